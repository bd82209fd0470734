//! What an agent answers: one result per probe, with what the network did and what the agent
//! saw (ICMP errors, TLS and DNS details, sightings, a node's configuration).

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use serde::{Deserialize, Serialize};

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
#[derive(Debug, Clone, Copy, PartialEq, Hash, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IcmpInfo {
    #[serde(rename = "type")]
    pub icmp_type: u8,
    pub code: u8,
    /// The address that sent the ICMP error (the router or host that refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<IpAddr>,
}

#[derive(Debug, Clone, PartialEq, Hash, Eq, Serialize, Deserialize)]
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

#[derive(Debug, Clone, PartialEq, Hash, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Hash, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sighting {
    pub nonce: u32,
    pub interface: String,
    /// Outer source address of the packet.
    pub from: IpAddr,
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
    pub from: IpAddr,
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

/// How far a failed path's packets got, from the same probe sent with rising TTL: the last hop
/// that answered with ICMP time exceeded, and how many hops from the sender it is. The packets
/// died at that hop (a router that filters what it forwards) or just after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Trace {
    /// The last hop that answered.
    pub after: IpAddr,
    /// Its distance from the sender, in hops (1: the sender's own gateway).
    pub hops: u8,
}

/// The answer to one `ProbeSpec`: exactly one per probe.
#[derive(Debug, Clone, PartialEq, Hash, Eq, Serialize, Deserialize)]
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
    /// The IP packet an mtu probe sent, in bytes: the plan's size, or the sender's own route
    /// MTU when the plan left it to the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packet_size: Option<u16>,
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
    /// Set by the coordinator from TTL-limited probes along a path that failed on the network:
    /// how far its packets got.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<Trace>,
    /// `seen` probes: the TCP ports whose SYNs the local sniffer records (absent: none, or an
    /// older agent), so a SYN it was not watching for is never read as one that did not arrive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watched_tcp_ports: Option<Vec<u16>>,
    /// How long the sending agent was kept from running while this probe ran, in ms, when that
    /// was enough to doubt a timeout (`stall::doubts`). The agent re-ran such a probe once; a
    /// failure that still carries a stall measured the machine, never the network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stalled_ms: Option<u32>,
}

/// A node's configuration as its host agent read it. Holds no secret: tokens are reduced to their
/// claims.
#[derive(Debug, Clone, PartialEq, Hash, Eq, Default, Serialize, Deserialize)]
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
    /// The forwarding sysctls kubeadm's preflight checks, read in the agent's own network
    /// namespace (they are per namespace), never under `root`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forwarding: Option<ForwardingFacts>,
    /// Files that could not be read or parsed, with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Hash, Eq, Default, Serialize, Deserialize)]
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
/// sent when `verified`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerTrust {
    /// The server's certificate chains to the kubeconfig's own CA and names the server.
    Verified,
    /// The server's certificate does not verify against the kubeconfig's CA (another CA signed it,
    /// it names another server, or it expired): a rotated CA or an impostor. The credential was
    /// not sent.
    Untrusted,
    /// `insecure-skip-tls-verify: true` and no CA: nothing can be verified, so the credential was
    /// not sent (whoever answers would get it, and its answer proves nothing); only the token's
    /// own claims were read.
    InsecureSkipVerify,
    /// There is nothing usable to verify against (no CA, an unreadable or malformed one, or a CA
    /// together with `insecure-skip-tls-verify`, which client-go refuses). The credential was not
    /// sent.
    Unverifiable,
}

/// The decoded, unverified claims of a token.
#[derive(Debug, Clone, PartialEq, Hash, Eq, Default, Serialize, Deserialize)]
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

#[derive(Debug, Clone, PartialEq, Hash, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckFacts {
    pub outcome: Outcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Hash, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForwardingFacts {
    /// `net.ipv4.ip_forward` is 1; `None` when it could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_forward: Option<bool>,
    /// `net.ipv6.conf.all.forwarding` is 1 (the switch the kernel's IPv6 forwarding obeys);
    /// `None` when it could not be read or the kernel has no IPv6.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6_forward: Option<bool>,
    /// `net.bridge.bridge-nf-call-iptables` is 1; `None` when the file is absent (the
    /// `br_netfilter` module is not loaded) or could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge_nf_call_iptables: Option<bool>,
    /// `net.bridge.bridge-nf-call-ip6tables` is 1, as the IPv4 one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge_nf_call_ip6tables: Option<bool>,
    /// `/proc/sys/net/bridge` exists: `br_netfilter` is loaded.
    #[serde(default)]
    pub br_netfilter: bool,
}

#[derive(Debug, Clone, PartialEq, Hash, Eq, Default, Serialize, Deserialize)]
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
            packet_size: None,
            node: None,
            attempts: None,
            ok_attempts: None,
            source: None,
            receipt: None,
            trace: None,
            watched_tcp_ports: None,
            stalled_ms: None,
        }
    }

    /// Failed while its agent was kept from running (`stalledMs`): its timer measured the
    /// scheduler, not the path, so it is no attempt and never evidence.
    #[must_use]
    pub fn is_starved(&self) -> bool {
        !self.outcome.is_ok() && self.stalled_ms.is_some()
    }

    /// Got through on some attempts but not all: a lossy path, not a blocked one.
    #[must_use]
    pub fn is_intermittent(&self) -> bool {
        matches!((self.attempts, self.ok_attempts), (Some(n), Some(k)) if k > 0 && k < n)
    }
}
