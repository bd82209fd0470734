//! The plan: what the coordinator asks one agent to do, probe by probe, and how it is parsed and
//! checked against the limits an agent enforces.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::num::{NonZeroU32, NonZeroU64};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::{
    DEFAULT_AGENT_PORT, DEFAULT_GENEVE_PORT, DEFAULT_VXLAN_PORT, DEFAULT_WIREGUARD_PORT, Flow,
    Port, Vni, limits, parse_plan_lazy,
};

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

/// The probe kinds. `kind` is the JSON tag; each kind's fields are its own struct, so a
/// function that runs one kind takes that struct and nothing else.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Probe {
    Tcp(TcpProbe),
    Udp(UdpProbe),
    Icmp(IcmpProbe),
    /// ICMP echo to a remote VXLAN tunnel endpoint: crosses the kernel's VXLAN device both ways.
    Vtep(IcmpProbe),
    Mtu(MtuProbe),
    Tls(TlsProbe),
    Dns(DnsProbe),
    Vxlan(VxlanProbe),
    Ipip(IpipProbe),
    Geneve(GeneveProbe),
    Wireguard(WireguardProbe),
    Node(NodeProbe),
    Seen(SeenProbe),
    Hop(HopProbe),
}

// An unknown field is a coordinator newer than the agent or a typo: refused, never ignored (a
// `dns` probe's misspelt server would silently ask /etc/resolv.conf instead). Hence
// `deny_unknown_fields` on every kind.

/// TCP connect; with `echo`, send a nonce and expect the agent's responder to echo it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpProbe {
    pub address: IpAddr,
    pub port: Port,
    #[serde(default)]
    pub echo: bool,
}

/// A magic+nonce datagram to a `probe-pod serve` responder, which echoes it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UdpProbe {
    pub address: IpAddr,
    pub port: Port,
}

/// A TCP SYN or a UDP probe datagram to `address:port` that may cross at most `ttl` routers
/// (kind `hop`): where it expires, that router's ICMP time exceeded (read from the error queue)
/// names it. A tcptraceroute step through the same protocol and port as a blocked path.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HopProbe {
    pub address: IpAddr,
    pub port: Port,
    pub protocol: Transport,
    pub ttl: std::num::NonZeroU8,
}

/// ICMP echo, or ICMPv6 echo to an IPv6 address (kind `icmp`, or `vtep` when the address is a
/// remote VXLAN tunnel endpoint).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IcmpProbe {
    pub address: IpAddr,
}

/// ICMP echo with DF set, `size` bytes of IPv4 packet; to an IPv6 address, ICMPv6 echo of `size`
/// bytes of IPv6 packet that is never fragmented (a router's Packet Too Big is read from the
/// error queue).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MtuProbe {
    pub address: IpAddr,
    /// Absent: the MTU of the sender's own route toward `address` (its interface's, as the
    /// kernel has it), which the result reports as `packetSize`: a pod's MTU is what its CNI
    /// configured, whatever the inventory knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u16>,
}

/// TCP + TLS + one HTTP GET: the API server probe.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TlsProbe {
    pub address: IpAddr,
    pub port: Port,
    /// SNI and the name the certificate must match; the address when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    /// PEM bundle to verify the server certificate against: recorded, and enforced (the
    /// handshake fails unless it verifies) with `requireVerified` or a `tokenFile`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    #[serde(default)]
    pub require_verified: bool,
    #[serde(default = "default_http_path")]
    pub path: String,
    /// File holding a bearer token to send, only to a server verified against `caFile`; the
    /// token itself never appears in results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<PathBuf>,
}

/// One DNS query, to `server` or, when absent, as the agent's own resolv.conf directs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DnsProbe {
    pub name: String,
    #[serde(default)]
    pub record_type: DnsRecordType,
    #[serde(default)]
    pub protocol: Transport,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<SocketAddr>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolv_conf: Option<PathBuf>,
}

/// A crafted VXLAN datagram (inner Ethernet/IPv4/ICMP carrying a nonce) sent to a peer's VXLAN
/// port, over an IPv4 or an IPv6 underlay. Receipt is confirmed by the peer agent's sniffer
/// (`seen`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VxlanProbe {
    pub address: IpAddr,
    #[serde(default = "default_vxlan_port")]
    pub port: Port,
    #[serde(default)]
    pub vni: Vni,
    /// Chosen by the coordinator so it can ask the peer for it; random when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inner_source: Option<Ipv4Addr>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inner_destination: Option<Ipv4Addr>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination_mac: Option<MacAddr>,
}

/// A crafted IP-in-IP packet (outer IP protocol 4, inner IPv4/ICMP echo carrying a nonce) sent
/// to a peer host, as Calico's `tunl0` sends them. Receipt is confirmed by the peer agent's
/// sniffer (`seen`): on its NIC, then decapsulated on its tunnel device.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IpipProbe {
    pub address: Ipv4Addr,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inner_source: Option<Ipv4Addr>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inner_destination: Option<Ipv4Addr>,
}

/// A crafted Geneve datagram (inner Ethernet/IPv4/ICMP echo carrying a nonce) sent to a peer's
/// Geneve port (UDP 6081 by default, Cilium's). Receipt is confirmed by the peer agent's
/// sniffer, which watches the ports it is given (`probe-pod serve --geneve-port`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GeneveProbe {
    pub address: Ipv4Addr,
    #[serde(default = "default_geneve_port")]
    pub port: Port,
    #[serde(default)]
    pub vni: Vni,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inner_source: Option<Ipv4Addr>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inner_destination: Option<Ipv4Addr>,
}

/// A datagram carrying a nonce to a peer's `WireGuard` port (51820/51821 for Calico and flannel,
/// 51871 for Cilium). Without the keys only its arrival on the peer's NIC can be confirmed (by
/// the peer agent's sniffer); `WireGuard` itself ignores it (no valid message type).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WireguardProbe {
    pub address: Ipv4Addr,
    #[serde(default = "default_wireguard_port")]
    pub port: Port,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<u32>,
}

/// Read the node's own configuration under `root` (its `/`, mounted read-only): CNI kubeconfigs
/// and their tokens (claims only, never the token), the kubelet's API server, resolv.conf; and,
/// with `apiCheck`, ask each kubeconfig's server whether it accepts the kubeconfig's credential.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeProbe {
    pub root: PathBuf,
    #[serde(default = "default_true")]
    pub api_check: bool,
}

/// Ask the local `probe-pod serve` which probe nonces its sniffer saw since `sinceMs`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SeenProbe {
    #[serde(default)]
    pub since_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonces: Option<Vec<u32>>,
    /// TCP probes to ask about, by flow (a SYN carries no nonce).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<Vec<Flow>>,
    #[serde(default = "default_agent_port")]
    pub port: Port,
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
            Self::Tcp(_) => "tcp",
            Self::Udp(_) => "udp",
            Self::Icmp(_) => "icmp",
            Self::Vtep(_) => "vtep",
            Self::Mtu(_) => "mtu",
            Self::Tls(_) => "tls",
            Self::Dns(_) => "dns",
            Self::Vxlan(_) => "vxlan",
            Self::Ipip(_) => "ipip",
            Self::Geneve(_) => "geneve",
            Self::Wireguard(_) => "wireguard",
            Self::Seen(_) => "seen",
            Self::Node(_) => "node",
            Self::Hop(_) => "hop",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum DnsRecordType {
    #[default]
    A,
    Aaaa,
    Srv,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
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
