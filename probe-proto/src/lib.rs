//! Wire types shared by the agent and the coordinator: plans in, results out (JSON, camelCase).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::num::{NonZeroU16, NonZeroU32, NonZeroU64};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

mod lazy;
mod limits;
pub mod util;

pub use lazy::{LazyPlan, parse_plan_lazy};
pub use limits::{
    MAX_CONCURRENCY, MAX_DNS_NAME_BYTES, MAX_HTTP_PATH_BYTES, MAX_ID_BYTES, MAX_PLAN_BYTES,
    MAX_PLAN_DEADLINE_MS, MAX_PROBE_TIMEOUT_MS, unusable_target,
};

/// The port every agent listens on unless told otherwise.
pub const DEFAULT_AGENT_PORT: u16 = 9917;
/// The port the kernel's VXLAN device of flannel and cilium owns.
pub const DEFAULT_VXLAN_PORT: u16 = 8472;
/// Geneve's IANA port, which Cilium uses.
pub const DEFAULT_GENEVE_PORT: u16 = 6081;
/// `WireGuard`'s usual port (Calico's and flannel's).
pub const DEFAULT_WIREGUARD_PORT: u16 = 51820;
/// The four bytes that open every probe payload (TCP echo, UDP echo, ICMP echo, crafted VXLAN).
pub const MAGIC: [u8; 4] = *b"PRB1";
/// The magic of the crafted VXLAN probe's inner packet, distinct from `MAGIC` so the sniffer's
/// filter copies only those (not every VTEP ping or MTU probe) to user space.
pub const VXLAN_MAGIC: [u8; 4] = *b"PRBV";

/// A TCP or UDP port, never 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "u16", into = "u16")]
pub struct Port(NonZeroU16);

impl Port {
    #[must_use]
    pub const fn new(port: u16) -> Option<Self> {
        match NonZeroU16::new(port) {
            Some(p) => Some(Self(p)),
            None => None,
        }
    }

    #[must_use]
    pub const fn get(self) -> u16 {
        self.0.get()
    }
}

impl TryFrom<u16> for Port {
    type Error = String;
    fn try_from(value: u16) -> Result<Self, Self::Error> {
        Self::new(value).ok_or_else(|| "port 0 is not a port: expected 1-65535".to_string())
    }
}

impl From<Port> for u16 {
    fn from(p: Port) -> u16 {
        p.get()
    }
}

impl fmt::Display for Port {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A VXLAN network identifier (24 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "u32", into = "u32")]
pub struct Vni(u32);

impl Vni {
    #[must_use]
    pub const fn new(vni: u32) -> Option<Self> {
        if vni < (1 << 24) {
            Some(Self(vni))
        } else {
            None
        }
    }

    #[must_use]
    pub const fn get(self) -> u32 {
        self.0
    }
}

impl Default for Vni {
    fn default() -> Self {
        Self(1)
    }
}

impl TryFrom<u32> for Vni {
    type Error = String;
    fn try_from(value: u32) -> Result<Self, Self::Error> {
        Self::new(value).ok_or_else(|| format!("VNI {value} does not fit in 24 bits"))
    }
}

impl From<Vni> for u32 {
    fn from(v: Vni) -> u32 {
        v.0
    }
}

/// What the coordinator asks one agent to do: a batch of probes run concurrently.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
// An unknown field is a coordinator newer than the agent or a typo: refused, never ignored (a
// `dns` probe's misspelt server would silently ask /etc/resolv.conf instead).
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Plan {
    /// Wall-clock budget for the whole plan, in milliseconds. Probes not finished by then time out;
    /// probes not started by then are reported as `error`.
    pub deadline_ms: NonZeroU64,
    /// How many probes may be in flight at once (further capped by the agent's open-file limit).
    #[serde(default = "default_concurrency")]
    pub concurrency: NonZeroU32,
    /// Per-probe deadline used when a probe does not set its own.
    #[serde(default = "default_probe_timeout")]
    pub probe_timeout_ms: NonZeroU64,
    pub probes: Vec<ProbeSpec>,
}

pub(crate) fn default_concurrency() -> NonZeroU32 {
    NonZeroU32::new(1024).expect("non-zero")
}

pub(crate) fn default_probe_timeout() -> NonZeroU64 {
    NonZeroU64::new(2000).expect("non-zero")
}

/// One probe: an id chosen by the coordinator, an optional deadline, and what to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProbeSpec {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<NonZeroU64>,
    #[serde(flatten)]
    pub probe: Probe,
}

/// The probe kinds. `kind` is the JSON tag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Probe {
    /// TCP connect; with `echo`, send a nonce and expect the agent's responder to echo it.
    #[serde(rename_all = "camelCase")]
    Tcp {
        address: IpAddr,
        port: Port,
        #[serde(default)]
        echo: bool,
    },
    /// A magic+nonce datagram to a `probe-pod serve` responder, which echoes it.
    #[serde(rename_all = "camelCase")]
    Udp { address: IpAddr, port: Port },
    /// ICMP echo.
    #[serde(rename_all = "camelCase")]
    Icmp { address: Ipv4Addr },
    /// ICMP echo to a remote VXLAN tunnel endpoint: crosses the kernel's VXLAN device both ways.
    #[serde(rename_all = "camelCase")]
    Vtep { address: Ipv4Addr },
    /// ICMP echo with DF set, `size` bytes of IPv4 packet.
    #[serde(rename_all = "camelCase")]
    Mtu { address: Ipv4Addr, size: u16 },
    /// TCP + TLS + one HTTP GET: the API server probe.
    #[serde(rename_all = "camelCase")]
    Tls {
        address: IpAddr,
        port: Port,
        /// SNI and the name the certificate must match; the address when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server_name: Option<String>,
        /// PEM bundle to verify the server certificate against: recorded, and enforced (the
        /// handshake fails unless it verifies) with `requireVerified` or a `tokenFile`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ca_file: Option<PathBuf>,
        #[serde(default)]
        require_verified: bool,
        #[serde(default = "default_http_path")]
        path: String,
        /// File holding a bearer token to send, only to a server verified against `caFile`; the
        /// token itself never appears in results.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token_file: Option<PathBuf>,
    },
    /// One DNS query, to `server` or, when absent, as the agent's own resolv.conf directs.
    #[serde(rename_all = "camelCase")]
    Dns {
        name: String,
        #[serde(default)]
        record_type: DnsRecordType,
        #[serde(default)]
        protocol: Transport,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server: Option<SocketAddr>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resolv_conf: Option<PathBuf>,
    },
    /// A crafted VXLAN datagram (inner Ethernet/IPv4/ICMP carrying a nonce) sent to a peer's VXLAN
    /// port. Receipt is confirmed by the peer agent's sniffer (`seen`).
    #[serde(rename_all = "camelCase")]
    Vxlan {
        address: Ipv4Addr,
        #[serde(default = "default_vxlan_port")]
        port: Port,
        #[serde(default)]
        vni: Vni,
        /// Chosen by the coordinator so it can ask the peer for it; random when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nonce: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        inner_source: Option<Ipv4Addr>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        inner_destination: Option<Ipv4Addr>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        destination_mac: Option<MacAddr>,
    },
    /// A crafted IP-in-IP packet (outer IP protocol 4, inner IPv4/ICMP echo carrying a nonce)
    /// sent to a peer host, as Calico's `tunl0` sends them. Receipt is confirmed by the peer
    /// agent's sniffer (`seen`): on its NIC, then decapsulated on its tunnel device.
    #[serde(rename_all = "camelCase")]
    Ipip {
        address: Ipv4Addr,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nonce: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        inner_source: Option<Ipv4Addr>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        inner_destination: Option<Ipv4Addr>,
    },
    /// A crafted Geneve datagram (inner Ethernet/IPv4/ICMP echo carrying a nonce) sent to a peer's
    /// Geneve port (UDP 6081 by default, Cilium's). Receipt is confirmed by the peer agent's
    /// sniffer, which watches the ports it is given (`probe-pod serve --geneve-port`).
    #[serde(rename_all = "camelCase")]
    Geneve {
        address: Ipv4Addr,
        #[serde(default = "default_geneve_port")]
        port: Port,
        #[serde(default)]
        vni: Vni,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nonce: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        inner_source: Option<Ipv4Addr>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        inner_destination: Option<Ipv4Addr>,
    },
    /// A datagram carrying a nonce to a peer's `WireGuard` port (51820/51821 for Calico and flannel,
    /// 51871 for Cilium). Without the keys only its arrival on the peer's NIC can be confirmed
    /// (by the peer agent's sniffer); `WireGuard` itself ignores it (no valid message type).
    #[serde(rename_all = "camelCase")]
    Wireguard {
        address: Ipv4Addr,
        #[serde(default = "default_wireguard_port")]
        port: Port,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nonce: Option<u32>,
    },
    /// Read the node's own configuration under `root` (its `/`, mounted read-only): CNI
    /// kubeconfigs and their tokens (claims only, never the token), the kubelet's API server,
    /// resolv.conf; and, with `apiCheck`, ask each kubeconfig's server whether it accepts the
    /// kubeconfig's credential.
    #[serde(rename_all = "camelCase")]
    Node {
        root: PathBuf,
        #[serde(default = "default_true")]
        api_check: bool,
    },
    /// Ask the local `probe-pod serve` which probe nonces its sniffer saw since `sinceMs`.
    #[serde(rename_all = "camelCase")]
    Seen {
        #[serde(default)]
        since_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nonces: Option<Vec<u32>>,
        /// TCP probes to ask about, by flow (a SYN carries no nonce).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        flows: Option<Vec<Flow>>,
        #[serde(default = "default_agent_port")]
        port: Port,
    },
}

fn default_true() -> bool {
    true
}

fn default_http_path() -> String {
    "/livez".to_string()
}

fn default_vxlan_port() -> Port {
    Port::new(DEFAULT_VXLAN_PORT).expect("non-zero")
}

fn default_wireguard_port() -> Port {
    Port::new(DEFAULT_WIREGUARD_PORT).expect("non-zero")
}

fn default_geneve_port() -> Port {
    Port::new(DEFAULT_GENEVE_PORT).expect("non-zero")
}

fn default_agent_port() -> Port {
    Port::new(DEFAULT_AGENT_PORT).expect("non-zero")
}

impl Probe {
    /// The kind's JSON tag, for messages.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Tcp { .. } => "tcp",
            Self::Udp { .. } => "udp",
            Self::Icmp { .. } => "icmp",
            Self::Vtep { .. } => "vtep",
            Self::Mtu { .. } => "mtu",
            Self::Tls { .. } => "tls",
            Self::Dns { .. } => "dns",
            Self::Vxlan { .. } => "vxlan",
            Self::Ipip { .. } => "ipip",
            Self::Geneve { .. } => "geneve",
            Self::Wireguard { .. } => "wireguard",
            Self::Seen { .. } => "seen",
            Self::Node { .. } => "node",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum DnsRecordType {
    #[default]
    A,
    Aaaa,
    Srv,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    #[default]
    Udp,
    Tcp,
}

/// A MAC address, `aa:bb:cc:dd:ee:ff` on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct MacAddr(pub [u8; 6]);

impl TryFrom<String> for MacAddr {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        let mut out = [0u8; 6];
        let mut parts = s.split(':');
        for byte in &mut out {
            let part = parts
                .next()
                .ok_or_else(|| format!("MAC address {s:?}: expected 6 octets"))?;
            *byte = u8::from_str_radix(part, 16)
                .map_err(|_| format!("MAC address {s:?}: {part:?} is not a hex octet"))?;
        }
        if parts.next().is_some() {
            return Err(format!("MAC address {s:?}: expected 6 octets"));
        }
        Ok(Self(out))
    }
}

impl From<MacAddr> for String {
    fn from(m: MacAddr) -> String {
        m.to_string()
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

/// What the network did with one probe. Failures are data, never errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    Ok,
    /// TCP RST or ICMP port/protocol unreachable: the host is there, nothing listens.
    Refused,
    /// ICMP administratively/host/net prohibited: a firewall said no.
    Rejected,
    /// ICMP host/net unreachable, or no route.
    Unreachable,
    /// Silence until the deadline: typically a DROP rule.
    Timeout,
    TlsError,
    HttpError,
    /// HTTP 401 to the credential under test.
    Unauthorized,
    DnsError,
    /// The probe could not run; `detail` says why.
    Error,
}

impl Outcome {
    pub const ALL: [Outcome; 10] = [
        Self::Ok,
        Self::Refused,
        Self::Rejected,
        Self::Unreachable,
        Self::Timeout,
        Self::TlsError,
        Self::HttpError,
        Self::Unauthorized,
        Self::DnsError,
        Self::Error,
    ];

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Refused => "refused",
            Self::Rejected => "rejected",
            Self::Unreachable => "unreachable",
            Self::Timeout => "timeout",
            Self::TlsError => "tls-error",
            Self::HttpError => "http-error",
            Self::Unauthorized => "unauthorized",
            Self::DnsError => "dns-error",
            Self::Error => "error",
        }
    }

    #[must_use]
    pub fn is_ok(self) -> bool {
        self == Self::Ok
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An ICMP error read from the socket's error queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IcmpInfo {
    #[serde(rename = "type")]
    pub icmp_type: u8,
    pub code: u8,
    /// The address that sent the ICMP error (the router or host that refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<IpAddr>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsInfo {
    /// The certificate chain verified against the given CA bundle and matched the server name.
    pub verified: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The server's clock (its HTTP `Date` header, to the second) minus this agent's clock when
    /// the answer came, in milliseconds; positive when this agent's clock is behind. Absent
    /// without an HTTP answer carrying a readable `Date`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_skew_ms: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DnsInfo {
    /// The server that answered (or the last one tried).
    pub server: SocketAddr,
    /// The name actually queried (after resolv.conf search expansion).
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcode: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answers: Vec<String>,
}

/// One nonce the sniffer saw on one interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sighting {
    pub nonce: u32,
    pub interface: String,
    /// Outer source address of the packet.
    pub from: Ipv4Addr,
    /// Seen after decapsulation (the bare inner packet, on the VXLAN device), not as the outer
    /// UDP datagram (on the underlay).
    #[serde(default)]
    pub decapsulated: bool,
    /// Unix time in milliseconds.
    pub at_ms: u64,
    /// What kind of probe packet this is (absent: a crafted VXLAN probe, as older agents
    /// reported only those).
    #[serde(default, skip_serializing_if = "SightingKind::is_vxlan")]
    pub kind: SightingKind,
    /// The probe's flow, for TCP and UDP sightings: a SYN carries no nonce, so it is matched by
    /// the sender's address and port and the port it was sent to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<Flow>,
    /// The receiver's answer leaving it (a SYN-ACK, a UDP echo), not the probe arriving.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reply: bool,
}

/// The kind of probe packet a sniffer saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SightingKind {
    /// A crafted VXLAN datagram, or its decapsulated inner packet (matched by nonce).
    #[default]
    Vxlan,
    /// A plain UDP probe datagram or its echo (matched by nonce).
    Udp,
    /// A TCP SYN or its SYN-ACK (matched by flow).
    Tcp,
}

impl SightingKind {
    #[must_use]
    pub fn is_vxlan(&self) -> bool {
        *self == Self::Vxlan
    }
}

/// A probe's flow as seen from its sender: the sender's address and source port, and the port it
/// was sent to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Flow {
    pub from: Ipv4Addr,
    pub source_port: u16,
    pub port: u16,
}

/// Where a probe that the receiving host's sniffer was asked about got to: the evidence for
/// whether a failed path died on the network or in the receiving host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Receipt {
    /// It reached the receiving host's stack (a crafted VXLAN probe decapsulated).
    Delivered,
    /// It reached the receiver, which answered; the answer never got back (dropped on the way
    /// back, or by the sender's own firewall).
    Answered,
    /// It reached the receiving host's interface but was never delivered or answered: the
    /// receiving host itself dropped it (its firewall, or a VNI/port mismatch).
    HostDropped,
    /// The receiving host never saw it: dropped on the way (the network, or the sender's own
    /// firewall).
    NotArrived,
}

/// The answer to one `ProbeSpec`: exactly one per probe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProbeResult {
    pub id: String,
    pub outcome: Outcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_micros: Option<u64>,
    #[serde(default)]
    pub detail: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icmp: Option<IcmpInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<Box<TlsInfo>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns: Option<Box<DnsInfo>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen: Option<Vec<Sighting>>,
    /// The local path MTU the kernel reported (mtu probes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_mtu: Option<u32>,
    /// What a `node` probe read on the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<Box<NodeFacts>>,
    /// Set by the coordinator on a probe it re-ran because it failed: how many times it ran in
    /// all. Absent: it ran once and got through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// How many of `attempts` got through. `0 < okAttempts < attempts` is an intermittent path
    /// (outcome `ok`, with loss); `okAttempts == 0` failed every attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok_attempts: Option<u32>,
    /// The local address and port a TCP or UDP probe was sent from, so the receiver's sniffer
    /// can be asked whether it arrived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SocketAddr>,
    /// Set by the coordinator from the receiving host's sniffer: where the probe got to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<Receipt>,
    /// `seen` probes: the TCP ports whose SYNs the local sniffer records (absent: none, or an
    /// older agent), so a SYN it was not watching for is never read as one that did not arrive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watched_tcp_ports: Option<Vec<u16>>,
}

/// A node's configuration as its host agent read it. Holds no secret: tokens are reduced to their
/// claims.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeFacts {
    pub root: String,
    /// Every kubeconfig under `etc/cni/net.d/`.
    #[serde(default)]
    pub cni_kubeconfigs: Vec<KubeconfigFacts>,
    /// `etc/kubernetes/kubelet.conf` and `bootstrap-kubelet.conf`, those that exist.
    #[serde(default)]
    pub kubelet: Vec<KubeconfigFacts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolv_conf: Option<ResolvFacts>,
    /// Files that could not be read or parsed, with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeconfigFacts {
    /// Path inside the node's root, e.g. `/etc/cni/net.d/calico-kubeconfig`.
    pub path: String,
    /// Unix seconds of the file's last change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// `token`, `token-file`, `client-certificate`, `exec`, `auth-provider` or `none`.
    pub auth: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<TokenFacts>,
    /// The server's answer to this credential (or, for a kubelet, whether anything listens).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<CheckFacts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The selected cluster says `insecure-skip-tls-verify: true`: its server is never verified,
    /// and its credential goes to whoever answers at its address (a warning on its own).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure_skip_tls_verify: bool,
    /// What the agent established about the server before sending the credential; absent when no
    /// credential check ran or the server was never reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_trust: Option<ServerTrust>,
}

/// Whether the API server a kubeconfig names is the one its CA vouches for. The credential is only
/// sent when `verified`, or when the kubeconfig itself says `insecure-skip-tls-verify`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerTrust {
    /// The server's certificate chains to the kubeconfig's own CA and names the server.
    Verified,
    /// The server's certificate does not verify against the kubeconfig's CA (another CA signed it,
    /// it names another server, or it expired): a rotated CA or an impostor. The credential was
    /// not sent.
    Untrusted,
    /// `insecure-skip-tls-verify: true` and no CA: not verified; the credential was sent, as
    /// kubectl and the CNI would send it.
    InsecureSkipVerify,
    /// There is nothing usable to verify against (no CA, an unreadable or malformed one, or a CA
    /// together with `insecure-skip-tls-verify`, which client-go refuses). The credential was not
    /// sent.
    Unverifiable,
}

/// The decoded, unverified claims of a token.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenFacts {
    /// `jwt`, or `opaque` when it is not a JWT (nothing can be said about its lifetime).
    pub format: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audience: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issued_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// A bound (`TokenRequest`) token: it carries `kubernetes.io` claims and an expiry.
    pub bound: bool,
    /// Unix seconds when the agent read it, to judge `expiresAt` and `issuedAt` against.
    pub checked_at: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckFacts {
    pub outcome: Outcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvFacts {
    pub nameservers: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub search: Vec<String>,
}

impl ProbeResult {
    #[must_use]
    pub fn new(id: impl Into<String>, outcome: Outcome, detail: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            outcome,
            rtt_micros: None,
            detail: detail.into(),
            icmp: None,
            http_status: None,
            tls: None,
            dns: None,
            nonce: None,
            seen: None,
            path_mtu: None,
            node: None,
            attempts: None,
            ok_attempts: None,
            source: None,
            receipt: None,
            watched_tcp_ports: None,
        }
    }

    /// Got through on some attempts but not all: a lossy path, not a blocked one.
    #[must_use]
    pub fn is_intermittent(&self) -> bool {
        matches!((self.attempts, self.ok_attempts), (Some(n), Some(k)) if k > 0 && k < n)
    }
}

/// Parses a duration as both binaries take it on the command line: `250ms`, `90s` (or `90`),
/// `30m`, `2h`.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    use std::time::Duration;
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?}: expected a number and a unit, like 500ms, 90s, 30m or 2h"))?;
    Ok(match unit {
        "ms" => Duration::from_millis(n),
        "" | "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.saturating_mul(60)),
        "h" => Duration::from_secs(n.saturating_mul(3600)),
        _ => return Err(format!("{s:?}: unknown unit {unit:?}; use ms, s, m or h")),
    })
}

/// A plan that could not be accepted; the message names the field.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("plan is not valid JSON at line {line}, column {column}: {message}")]
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("plan field `{path}`: {message}")]
    Field { path: String, message: String },
    #[error("plan has no probes")]
    Empty,
    #[error("plan is larger than {limit} bytes")]
    TooLarge { limit: usize },
}

/// Parses and validates a plan, naming the offending field on error.
pub fn parse_plan(text: &str) -> Result<Plan, PlanError> {
    let lazy = parse_plan_lazy(text.to_string())?;
    let probes = lazy.probes().collect::<Result<Vec<_>, _>>()?;
    Ok(Plan {
        deadline_ms: lazy.deadline_ms,
        concurrency: lazy.concurrency,
        probe_timeout_ms: lazy.probe_timeout_ms,
        probes,
    })
}

/// Checks a plan built in memory (by the coordinator) against the limits an agent enforces.
pub fn validate_plan(plan: &Plan) -> Result<(), PlanError> {
    limits::check_plan(plan)
}

pub(crate) fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn unknown_plan_fields_are_refused() {
        let good = r#"{"deadlineMs": 1000, "probes": [{"id": "a", "kind": "dns", "name": "x.", "server": "10.0.0.1:53"}]}"#;
        assert!(serde_json::from_str::<super::Plan>(good).is_ok());
        for (bad, field) in [
            (
                r#"{"deadlineMs": 1000, "probes": [{"id": "a", "kind": "dns", "name": "x.", "address": "10.0.0.1:53"}]}"#,
                "address",
            ),
            (
                r#"{"deadlineMs": 1000, "probes": [], "paralel": 3}"#,
                "paralel",
            ),
        ] {
            let err = serde_json::from_str::<super::Plan>(bad).unwrap_err();
            assert!(err.to_string().contains(field), "{bad}: {err}");
        }
    }

    use super::*;

    fn full_plan() -> Plan {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let v4 = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        let p = |n| Port::new(n).unwrap();
        let probes = vec![
            Probe::Tcp {
                address: ip("10.0.0.1"),
                port: p(9917),
                echo: true,
            },
            Probe::Udp {
                address: ip("10.0.0.1"),
                port: p(9917),
            },
            Probe::Icmp {
                address: v4("10.0.0.1"),
            },
            Probe::Vtep {
                address: v4("10.244.1.0"),
            },
            Probe::Mtu {
                address: v4("10.0.0.1"),
                size: 1500,
            },
            Probe::Tls {
                address: ip("10.96.0.1"),
                port: p(443),
                server_name: Some("kubernetes.default.svc".into()),
                ca_file: Some("/ca.crt".into()),
                require_verified: false,
                path: "/livez".into(),
                token_file: Some("/token".into()),
            },
            Probe::Dns {
                name: "kubernetes.default.svc.cluster.local".into(),
                record_type: DnsRecordType::Srv,
                protocol: Transport::Tcp,
                server: Some("10.96.0.10:53".parse().unwrap()),
                resolv_conf: None,
            },
            Probe::Vxlan {
                address: v4("192.168.56.11"),
                port: p(8472),
                vni: Vni::new(1).unwrap(),
                nonce: Some(7),
                inner_source: Some(v4("10.244.1.0")),
                inner_destination: Some(v4("10.244.2.0")),
                destination_mac: Some(MacAddr([2, 0, 0, 0, 0, 1])),
            },
            Probe::Ipip {
                address: v4("192.168.56.11"),
                nonce: Some(8),
                inner_source: Some(v4("10.244.1.0")),
                inner_destination: Some(v4("10.244.2.0")),
            },
            Probe::Geneve {
                address: v4("192.168.56.11"),
                port: p(6081),
                vni: Vni::new(2).unwrap(),
                nonce: Some(9),
                inner_source: None,
                inner_destination: Some(v4("10.244.2.0")),
            },
            Probe::Wireguard {
                address: v4("192.168.56.11"),
                port: p(51871),
                nonce: Some(10),
            },
            Probe::Seen {
                since_ms: 5,
                nonces: Some(vec![7]),
                flows: Some(vec![Flow {
                    from: v4("192.168.56.10"),
                    source_port: 40000,
                    port: 10250,
                }]),
                port: p(9917),
            },
        ];
        Plan {
            deadline_ms: NonZeroU64::new(5000).unwrap(),
            concurrency: NonZeroU32::new(64).unwrap(),
            probe_timeout_ms: NonZeroU64::new(1000).unwrap(),
            probes: probes
                .into_iter()
                .enumerate()
                .map(|(i, probe)| ProbeSpec {
                    id: format!("p{i}"),
                    timeout_ms: None,
                    probe,
                })
                .collect(),
        }
    }

    #[test]
    fn plan_round_trips_through_json() {
        let plan = full_plan();
        let json = serde_json::to_string(&plan).unwrap();
        assert_eq!(parse_plan(&json).unwrap(), plan);
        assert!(json.contains(r#""kind":"vtep""#), "{json}");
        assert!(json.contains(r#""deadlineMs":5000"#), "{json}");
        assert!(
            json.contains(r#""destinationMac":"02:00:00:00:00:01""#),
            "{json}"
        );
        assert!(json.contains(r#""recordType":"SRV""#), "{json}");
    }

    #[test]
    fn result_round_trips_and_uses_contract_names() {
        let mut r = ProbeResult::new("a", Outcome::Rejected, "admin prohibited");
        r.rtt_micros = Some(12);
        r.icmp = Some(IcmpInfo {
            icmp_type: 3,
            code: 13,
            from: Some("10.0.0.254".parse().unwrap()),
        });
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(
            json,
            r#"{"id":"a","outcome":"rejected","rttMicros":12,"detail":"admin prohibited","icmp":{"type":3,"code":13,"from":"10.0.0.254"}}"#
        );
        assert_eq!(serde_json::from_str::<ProbeResult>(&json).unwrap(), r);
    }

    #[test]
    fn outcome_vocabulary_matches_design() {
        let names: Vec<String> = Outcome::ALL
            .iter()
            .map(|o| {
                serde_json::to_value(o)
                    .unwrap()
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(
            names,
            [
                "ok",
                "refused",
                "rejected",
                "unreachable",
                "timeout",
                "tls-error",
                "http-error",
                "unauthorized",
                "dns-error",
                "error"
            ]
        );
        for o in Outcome::ALL {
            assert_eq!(serde_json::to_value(o).unwrap(), o.as_str());
        }
    }

    #[test]
    fn bad_plans_name_the_problem() {
        let cases: &[(&str, &str)] = &[
            (
                r#"{"deadlineMs":1000,"probes":[{"id":"a","kind":"bogus"}]}"#,
                "probes[0]",
            ),
            (
                r#"{"deadlineMs":1000,"probes":[{"id":"a","kind":"tcp","address":"10.0.0.1"}]}"#,
                "missing field `port`",
            ),
            (
                r#"{"deadlineMs":1000,"probes":[{"id":"a","kind":"tcp","address":"10.0.0.1","port":0}]}"#,
                "port 0",
            ),
            (
                r#"{"deadlineMs":0,"probes":[{"id":"a","kind":"icmp","address":"10.0.0.1"}]}"#,
                "deadlineMs",
            ),
            (
                r#"{"deadlineMs":1000,"probes":[{"id":"a","kind":"icmp","address":"10.0.0.1"},{"id":"a","kind":"icmp","address":"10.0.0.2"}]}"#,
                "`probes[1].id`: duplicate",
            ),
            (r#"{"deadlineMs":1000,"probes":[]}"#, "no probes"),
            (
                r#"{"deadlineMs":1000,"probes":[{"id":"a","kind":"mtu","address":"10.0.0.1","size":10}]}"#,
                "probes[0].size",
            ),
            (
                r#"{"deadlineMs":1000,"probes":[{"id":"a","kind":"icmp","address":"nope"}]}"#,
                "address",
            ),
            (r#"{"deadlineMs":1000, "probes": ["#, "not valid JSON"),
            ("", "not valid JSON"),
        ];
        for (text, want) in cases {
            let err = parse_plan(text).expect_err(text).to_string();
            assert!(
                err.contains(want),
                "plan {text}\n  error {err}\n  wanted it to mention {want}"
            );
        }
    }

    #[test]
    fn limits_are_refused_naming_the_field() {
        let tcp = |addr: &str| format!(r#"{{"id":"a","kind":"tcp","address":"{addr}","port":1}}"#);
        let plan = |head: &str, probe: &str| format!(r#"{{{head}"probes":[{probe}]}}"#);
        let ok = tcp("10.0.0.1");
        let cases: Vec<(String, &str)> = vec![
            (
                plan(r#""deadlineMs":18446744073709551615,"#, &ok),
                "`deadlineMs`: 18446744073709551615 ms is beyond",
            ),
            (plan(r#""deadlineMs":3600001,"#, &ok), "`deadlineMs`"),
            (
                plan(r#""deadlineMs":1000,"probeTimeoutMs":600001,"#, &ok),
                "`probeTimeoutMs`",
            ),
            (
                plan(r#""deadlineMs":1000,"concurrency":4294967295,"#, &ok),
                "`concurrency`",
            ),
            (
                plan(
                    r#""deadlineMs":1000,"#,
                    r#"{"id":"a","kind":"icmp","address":"10.0.0.1","timeoutMs":9223372036854775808}"#,
                ),
                "`probes[0].timeoutMs`",
            ),
            (
                plan(r#""deadlineMs":1000,"#, &tcp("0.0.0.0")),
                "`probes[0].address`: 0.0.0.0 is the unspecified address",
            ),
            (plan(r#""deadlineMs":1000,"#, &tcp("::")), "unspecified"),
            (
                plan(r#""deadlineMs":1000,"#, &tcp("::ffff:0.0.0.0")),
                "unspecified",
            ),
            (
                plan(r#""deadlineMs":1000,"#, &tcp("255.255.255.255")),
                "broadcast",
            ),
            (
                plan(r#""deadlineMs":1000,"#, &tcp("239.1.2.3")),
                "multicast",
            ),
            (plan(r#""deadlineMs":1000,"#, &tcp("ff02::1")), "multicast"),
            (
                plan(
                    r#""deadlineMs":1000,"#,
                    r#"{"id":"a","kind":"vxlan","address":"224.0.0.1"}"#,
                ),
                "`probes[0].address`",
            ),
            (
                plan(
                    r#""deadlineMs":1000,"#,
                    r#"{"id":"a","kind":"ipip","address":"0.0.0.0"}"#,
                ),
                "`probes[0].address`",
            ),
            (
                plan(
                    r#""deadlineMs":1000,"#,
                    r#"{"id":"a","kind":"dns","name":"x","server":"0.0.0.0:53"}"#,
                ),
                "`probes[0].server`",
            ),
            (
                plan(
                    r#""deadlineMs":1000,"#,
                    r#"{"id":"a","kind":"tls","address":"10.0.0.1","port":443,"path":"/x HTTP/1.1\r\nX: y"}"#,
                ),
                "`probes[0].path`",
            ),
            (
                plan(
                    r#""deadlineMs":1000,"#,
                    &format!(
                        r#"{{"id":"{}","kind":"icmp","address":"10.0.0.1"}}"#,
                        "i".repeat(300)
                    ),
                ),
                "`probes[0].id`: 300 bytes",
            ),
        ];
        for (text, want) in &cases {
            let err = parse_plan(text).expect_err(text).to_string();
            assert!(
                err.contains(want),
                "plan {text}\n  error {err}\n  wanted {want}"
            );
        }
        // The limits themselves are accepted; loopback is a fine target.
        let edge = plan(
            r#""deadlineMs":3600000,"probeTimeoutMs":600000,"concurrency":65536,"#,
            &tcp("127.0.0.1"),
        );
        assert!(parse_plan(&edge).is_ok());
        let big = format!(
            r#"{{"deadlineMs":1,"probes":[],"pad":"{}"}}"#,
            "x".repeat(MAX_PLAN_BYTES)
        );
        assert!(matches!(parse_plan(&big), Err(PlanError::TooLarge { .. })));
    }

    #[test]
    fn validate_plan_agrees_with_the_parser() {
        let mut plan = full_plan();
        assert!(validate_plan(&plan).is_ok());
        plan.deadline_ms = NonZeroU64::new(u64::MAX).unwrap();
        assert!(
            validate_plan(&plan)
                .unwrap_err()
                .to_string()
                .contains("deadlineMs")
        );
    }

    #[test]
    fn unknown_kind_is_named() {
        let err = parse_plan(r#"{"deadlineMs":1000,"probes":[{"id":"a","kind":"bogus"}]}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("bogus"), "{err}");
    }

    #[test]
    fn mac_parse_rejects_garbage() {
        assert!(MacAddr::try_from("02:00:00:00:00".to_string()).is_err());
        assert!(MacAddr::try_from("02:00:00:00:00:zz".to_string()).is_err());
        assert!(MacAddr::try_from("02:00:00:00:00:01:02".to_string()).is_err());
        assert_eq!(
            MacAddr::try_from("0a:0b:0c:0d:0e:0f".to_string())
                .unwrap()
                .to_string(),
            "0a:0b:0c:0d:0e:0f"
        );
    }

    #[test]
    fn durations() {
        use std::time::Duration;
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("30m").unwrap(), Duration::from_secs(1800));
        assert_eq!(parse_duration("2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert!(parse_duration("5d").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn vni_must_fit_24_bits() {
        assert!(Vni::new(1 << 24).is_none());
        assert_eq!(Vni::new(0xff_ffff).unwrap().get(), 0xff_ffff);
    }
}
