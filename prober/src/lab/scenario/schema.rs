//! The scenario's cluster: nodes, zones, the overlay, the components and the candidate.

use serde::{Deserialize, Serialize};

use probe_proto::{Port, Vni};

use super::{Expect, Fault};
pub use crate::inventory::OverlayMode;
use crate::inventory::{Cni, Component, Overlay};
use crate::lab::build::{OVERLAY_MTU, OVERLAY_MTU6};

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
    /// Routers in a row: 1 joins every zone; 2 puts the zones after the first behind a second
    /// router, joined to the first by a transit link (192.168.64.0/30), so a path between the
    /// first zone and another crosses two routers that each decrement the TTL.
    #[serde(default = "default_routers", skip_serializing_if = "is_one_router")]
    pub routers: usize,
    /// The IP families of the lab's cluster: `[ipv4]` when absent; `[ipv4, ipv6]` builds it
    /// dual-stack (IPv6 on every link, pod and Service beside IPv4, the IPv4 underlay carrying
    /// the overlay's IPv6 pods too, or with `overlay.ipv6Tunnel` a second VXLAN device over the
    /// IPv6 underlay); `[ipv6]` is an IPv6-only cluster on an IPv6-only underlay:
    /// the nodes' links have IPv6 addresses alone, flannel's VXLAN device runs over IPv6
    /// (`vtep6`, its fdb entries the peers' IPv6 addresses), and its inventory, and so every
    /// probe of the matrix, has IPv6 addresses only.
    #[serde(default = "default_families", skip_serializing_if = "is_ipv4_only")]
    pub ip_families: Vec<crate::inventory::Family>,
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
    /// Probe only these path classes (`matrix --paths`): a narrowed run, whose findings must
    /// claim only what it probed. Every path class when absent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<crate::model::PathClass>,
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
    /// Whether it forwards IPv4 (`net.ipv4.ip_forward`, set in its own namespace only), as a
    /// machine prepared for kubeadm does; `false` for a machine that was not.
    #[serde(default = "forwards", skip_serializing_if = "is_true")]
    pub ip_forward: bool,
}

fn forwards() -> bool {
    true
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde hands a reference
fn is_true(b: &bool) -> bool {
    *b
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde hands a reference
fn is_zero(n: &i64) -> bool {
    *n == 0
}

fn default_role() -> String {
    "worker".into()
}

fn default_families() -> Vec<crate::inventory::Family> {
    vec![crate::inventory::Family::Ipv4]
}

#[allow(clippy::ptr_arg)] // serde's `skip_serializing_if` passes the field's own type
fn is_ipv4_only(f: &Vec<crate::inventory::Family>) -> bool {
    *f == default_families()
}

impl Scenario {
    /// Whether the lab is built dual-stack.
    #[must_use]
    pub fn dual_stack(&self) -> bool {
        self.ip_families.contains(&crate::inventory::Family::Ipv6)
    }

    /// Whether the nodes' underlay is IPv6 alone (an IPv6-only cluster): the overlay runs over
    /// IPv6 and its MTU leaves room for the IPv6 outer header.
    #[must_use]
    pub fn ipv6_underlay(&self) -> bool {
        !self.ip_families.contains(&crate::inventory::Family::Ipv4)
    }

    /// Whether the pods' IPv6 has a VXLAN device of its own over the IPv6 underlay
    /// (`overlay.ipv6Tunnel`).
    #[must_use]
    pub fn ipv6_tunnel(&self) -> bool {
        self.overlay.is_some_and(|o| o.ipv6_tunnel)
    }

    /// The overlay's MTU, the pods' too: 1450 over the IPv4 underlay, 1430 over the IPv6 one
    /// (its outer header is 20 bytes longer), on 1500-byte links. Beside an IPv6 tunnel it is
    /// the smaller of the two devices', as Calico sets it, so a full-size packet of either
    /// family fits its tunnel.
    #[must_use]
    pub fn overlay_mtu(&self) -> u16 {
        if self.ipv6_underlay() || self.ipv6_tunnel() {
            OVERLAY_MTU6
        } else {
            OVERLAY_MTU
        }
    }
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
fn default_routers() -> usize {
    1
}
#[allow(clippy::trivially_copy_pass_by_ref)] // serde's `skip_serializing_if` passes a reference
fn is_one_router(n: &usize) -> bool {
    *n == 1
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
    #[serde(deserialize_with = "tunnel")]
    pub mode: OverlayMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<Port>,
    /// Whether the inventory names each node's tunnel endpoint (default: yes). `false` is a CNI
    /// that publishes none discovery reads: the tunnel cannot be probed directly.
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub vteps_known: bool,
    /// Whether the inventory gives the overlay its MTU (default: yes). `false` is an inventory
    /// that does not say it: each pod agent then probes at its own interface's MTU.
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub mtu_known: bool,
    /// Whether the pods' IPv6 rides a VXLAN device of its own over the IPv6 underlay, beside the
    /// IPv4 one (default: no, the IPv4 device carries both families): flannel's `flannel-v6.1`,
    /// Calico's `vxlan-v6.calico`, as they run dual-stack, each node's `vtep6` on it. For a
    /// dual-stack VXLAN lab alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ipv6_tunnel: bool,
}

fn yes() -> bool {
    true
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's `skip_serializing_if` passes a reference
fn is_yes(b: &bool) -> bool {
    *b
}

/// The lab always builds a tunnel: `none` (native routing) is refused.
fn tunnel<'de, D: serde::Deserializer<'de>>(d: D) -> Result<OverlayMode, D::Error> {
    match OverlayMode::deserialize(d)? {
        OverlayMode::None => Err(serde::de::Error::custom(
            "none: the lab always builds a tunnel (vxlan, ipip, geneve or wireguard)",
        )),
        mode => Ok(mode),
    }
}

impl Scenario {
    /// The overlay the lab builds, as the inventory describes it: the mode's usual port unless
    /// the scenario names one; Calico's VNI 4096, flannel's 1 (Geneve too); the lab's pod MTU.
    #[must_use]
    pub fn overlay(&self) -> Overlay {
        const VXLAN: Port = Port::new(probe_proto::DEFAULT_VXLAN_PORT).expect("non-zero");
        const GENEVE: Port = Port::new(probe_proto::DEFAULT_GENEVE_PORT).expect("non-zero");
        const WIREGUARD: Port = Port::new(probe_proto::DEFAULT_WIREGUARD_PORT).expect("non-zero");
        const CALICO_VNI: Vni = Vni::new(4096).expect("24 bits");
        const FLANNEL_VNI: Vni = Vni::new(1).expect("24 bits");
        let (mode, port, mtu_known) = self.overlay.map_or((OverlayMode::Vxlan, None, true), |o| {
            (o.mode, o.port, o.mtu_known)
        });
        let vni = if self.cni == Cni::Calico {
            CALICO_VNI
        } else {
            FLANNEL_VNI
        };
        let mtu = mtu_known.then_some(self.overlay_mtu());
        match mode {
            OverlayMode::Vxlan => Overlay::Vxlan {
                port: port.unwrap_or(VXLAN),
                vni,
                mtu,
            },
            OverlayMode::Geneve => Overlay::Geneve {
                port: port.unwrap_or(GENEVE),
                vni,
                mtu,
            },
            OverlayMode::Wireguard => Overlay::Wireguard {
                port: port.unwrap_or(WIREGUARD),
                mtu,
            },
            OverlayMode::Ipip => Overlay::Ipip { mtu },
            // Refused in a scenario file (`tunnel`): never built.
            OverlayMode::None => Overlay::None { mtu },
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
