//! The scenario's cluster: nodes, zones, the overlay, the components and the candidate.

use serde::{Deserialize, Serialize};

use super::{Expect, Fault};
use crate::inventory::{Cni, Component};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    #[serde(default = "default_name")]
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Number of nodes, named n1..nN; the first `controlPlanes` are control-plane nodes.
    #[serde(default = "default_nodes")]
    pub nodes: usize,
    #[serde(default = "default_control_planes")]
    pub control_planes: usize,
    /// Zones (each an L2 switch; zones are joined by a router). Nodes not listed join the first.
    #[serde(default)]
    pub zones: Vec<Zone>,
    /// Agent pods per node.
    #[serde(default = "default_pods")]
    pub pods_per_node: usize,
    /// The node whose pod network hosts the cluster DNS pod.
    #[serde(default = "default_dns_node")]
    pub dns_node: String,
    /// The CNI the inventory reports.
    #[serde(default = "default_cni")]
    pub cni: Cni,
    /// The encapsulation the lab builds and the inventory reports: flannel's VXLAN on 8472 when
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlay: Option<LabOverlay>,
    #[serde(default)]
    pub components: Vec<Component>,
    #[serde(default)]
    pub faults: Vec<Fault>,
    #[serde(default)]
    pub expect: Expect,
    /// A machine about to join: `lab run` runs `prober preflight` for it instead of `matrix`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<CandidateSpec>,
}

/// The candidate: a host on a zone switch with an address and nothing else (no overlay device,
/// no pods, no kubelet), until `occupied` says a program already holds some ports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CandidateSpec {
    pub name: String,
    /// The zone whose switch it hangs on (the first zone when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// `worker` or `control-plane`.
    #[serde(default = "default_role")]
    pub role: String,
    /// Ports (TCP and UDP) a program already listens on there, for a port conflict.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub occupied: Vec<u16>,
    /// The nameservers its resolv.conf names (default: the lab's upstream resolver), e.g.
    /// 127.0.0.53 for a systemd-resolved stub that becomes a DNS forward loop once it joins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<std::net::Ipv4Addr>,
    /// Seconds its clock runs ahead of the API server's (negative: behind). The lab's hosts
    /// share one clock, so the API server's `Date` runs this much behind instead.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub clock_skew: i64,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde hands a reference
fn is_zero(n: &i64) -> bool {
    *n == 0
}

fn default_role() -> String {
    "worker".into()
}

fn default_name() -> String {
    "lab".into()
}
fn default_nodes() -> usize {
    3
}
fn default_control_planes() -> usize {
    1
}
fn default_pods() -> usize {
    1
}
fn default_dns_node() -> String {
    "n1".into()
}
fn default_cni() -> Cni {
    Cni::Flannel
}

impl Default for Scenario {
    fn default() -> Self {
        serde_saphyr::from_str("{}").expect("an empty scenario is valid")
    }
}

/// The lab's overlay: kernel VXLAN (on `port`, 8472 by default), or a user-space tunnel standing
/// in for the devices this kind of kernel may lack: IP-in-IP (IP protocol 4) or Geneve (UDP 6081).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabOverlay {
    pub mode: OverlayMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Whether the inventory names each node's tunnel endpoint (default: yes). `false` is a CNI
    /// that publishes none discovery reads: the tunnel cannot be probed directly.
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub vteps_known: bool,
}

fn yes() -> bool {
    true
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's `skip_serializing_if` passes a reference
fn is_yes(b: &bool) -> bool {
    *b
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OverlayMode {
    Vxlan,
    Ipip,
    Geneve,
    /// The `WireGuard` port carrying the lab's tunnel in plaintext (no keys, no encryption): what
    /// the firewalls see is real UDP 51820.
    Wireguard,
}

impl OverlayMode {
    /// The inventory's `cluster.overlay.mode`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Vxlan => "vxlan",
            Self::Ipip => "ipip",
            Self::Geneve => "geneve",
            Self::Wireguard => "wireguard",
        }
    }
}

impl Scenario {
    /// The overlay's mode and its port (0 for IP-in-IP, which has none).
    #[must_use]
    pub fn overlay(&self) -> (OverlayMode, u16) {
        match self.overlay {
            None => (OverlayMode::Vxlan, 8472),
            Some(LabOverlay { mode, port, .. }) => (
                mode,
                match mode {
                    OverlayMode::Vxlan => port.unwrap_or(8472),
                    OverlayMode::Geneve => port.unwrap_or(6081),
                    OverlayMode::Wireguard => port.unwrap_or(51820),
                    OverlayMode::Ipip => 0,
                },
            ),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Zone {
    pub name: String,
    pub nodes: Vec<String>,
}

impl Scenario {
    /// Node names, n1..nN.
    #[must_use]
    pub fn node_names(&self) -> Vec<String> {
        (1..=self.nodes).map(|i| format!("n{i}")).collect()
    }
}
