//! The `ip -batch` and `bridge -batch` lines of each namespace: the router's and switches' links,
//! and each node's overlay device (kernel VXLAN, with its IPv6 twin where asked, or a TUN device
//! for the lab's tunnel), pod bridge, pods, and what flanneld programs for its peers.

use std::net::{IpAddr, Ipv6Addr};

use super::layout::{zone_router, zone_router6};
use super::{LabNode, Layout, OVERLAY_MTU, OVERLAY_MTU6, Pod, TUNNEL_MTU, nat};
use crate::inventory::Overlay;
use crate::inventory::{Cidr, Cni, Family};
use crate::lab::scenario::{Fault, OverlayMode, Scenario};
use probe_proto::{MacAddr, Port, Vni};

/// What to run in one namespace, phase by phase.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NsSetup {
    pub ns: String,
    /// Phase 1: create veth pairs whose peers go to other namespaces (`ip -batch`).
    pub links: Vec<String>,
    /// Phase 2: addresses, devices, routes, neighbours (`ip -batch`).
    pub config: Vec<String>,
    /// Phase 3: forwarding database entries (`bridge -batch`).
    pub fdb: Vec<String>,
    /// Phase 4: one nftables ruleset.
    pub nft: String,
    pub sysctl: Vec<(String, String)>,
}

impl NsSetup {
    pub(super) fn new(ns: &str) -> Self {
        Self {
            ns: ns.to_string(),
            // Lab namespaces speak IPv4 only: no router solicitations or DAD noise on the wire.
            sysctl: vec![
                ("net.ipv6.conf.all.disable_ipv6".into(), "1".into()),
                ("net.ipv6.conf.default.disable_ipv6".into(), "1".into()),
            ],
            ..Self::default()
        }
    }

    /// A dual-stack lab's namespace: IPv6 on (its addresses are added `nodad`, and no device
    /// duplicate-address-detects), forwarding both families where `forward`.
    pub(super) fn dual_stack(&mut self, forward: bool) {
        self.sysctl = [
            ("net.ipv6.conf.all.disable_ipv6", "0"),
            ("net.ipv6.conf.default.disable_ipv6", "0"),
            ("net.ipv6.conf.all.accept_dad", "0"),
            ("net.ipv6.conf.default.accept_dad", "0"),
        ]
        .into_iter()
        .chain(forward.then_some(("net.ipv6.conf.all.forwarding", "1")))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .chain(
            std::mem::take(&mut self.sysctl)
                .into_iter()
                .filter(|(k, _)| !k.starts_with("net.ipv6.")),
        )
        .collect();
    }
}

/// The router: it forwards between the zones; its ruleset is the cloud network's.
pub(super) fn router(s: &Scenario, l: &Layout) -> NsSetup {
    let mut router = NsSetup::new(&l.router_ns);
    router
        .sysctl
        .push(("net.ipv4.ip_forward".into(), "1".into()));
    if s.dual_stack() {
        router.dual_stack(true);
        // Phase 2 runs after the switches added the zone links: their IPv6 addresses too.
        for z in 0..l.switch_ns.len() {
            router
                .config
                .push(format!("addr add {}/64 dev z{z} nodad", zone_router6(z)));
        }
    }
    router.nft = nat::router_ruleset(s.dual_stack());
    router
}

/// One bridge per zone, its uplink to the router and a port per node of the zone; the router's
/// side of each uplink goes to `router` (to `second` for the zones behind a second router).
pub(super) fn switches(
    l: &Layout,
    first: &mut NsSetup,
    mut second: Option<&mut NsSetup>,
) -> Vec<NsSetup> {
    let mut out = Vec::new();
    for (z, sw) in l.switch_ns.iter().enumerate() {
        let mut setup = NsSetup::new(sw);
        let router = match second.as_deref_mut() {
            Some(r) if super::routers::behind_second(l, z) => r,
            _ => &mut *first,
        };
        setup.links.push(format!(
            "link add rt type veth peer name z{z} netns {}",
            router.ns
        ));
        setup.config.push("link add br0 type bridge".into());
        setup.config.push("link set br0 up".into());
        setup.config.push("link set rt master br0 up".into());
        router
            .config
            .push(format!("addr add {}/24 dev z{z}", zone_router(z)));
        router.config.push(format!("link set z{z} up"));
        for n in l.nodes.iter().chain(&l.candidate).filter(|n| n.zone == z) {
            setup.links.push(format!(
                "link add {} type veth peer name eth0 netns {}",
                n.switch_port(),
                n.ns
            ));
            setup
                .config
                .push(format!("link set {} master br0 up", n.switch_port()));
        }
        out.push(setup);
    }
    out
}

pub(super) fn node_setup(s: &Scenario, l: &Layout, n: &LabNode) -> NsSetup {
    let mut st = NsSetup::new(&n.ns);
    st.sysctl.push(("net.ipv4.ip_forward".into(), "1".into()));
    if n.address6.is_some() {
        st.dual_stack(true);
    }
    // The IPv6-only cluster's underlay: the node's link has its IPv6 address alone, and the
    // overlay runs over it.
    let six_underlay = n.address6.filter(|_| s.ipv6_underlay());
    // The pods' MTU: the smaller device's beside an IPv6 twin, whose own is always 1430.
    let mtu = s.overlay_mtu();
    let device_mtu = if six_underlay.is_some() {
        OVERLAY_MTU6
    } else {
        OVERLAY_MTU
    };
    let c = &mut st.config;
    c.push("link set eth0 up".into());
    if six_underlay.is_none() {
        c.push(format!("addr add {}/24 dev eth0", n.address));
        c.push(format!("route add default via {}", n.gateway()));
    }
    if let Some(a6) = n.address6 {
        c.push(format!("addr add {a6}/64 dev eth0 nodad"));
        c.push(format!("route add default via {}", zone_router6(n.zone)));
    }
    let device = overlay_device(s);
    let mode = s.overlay().mode();
    match s.overlay() {
        Overlay::Vxlan { port, vni, .. } => {
            let local = six_underlay.map_or(IpAddr::V4(n.address), IpAddr::V6);
            vxlan_device(c, device, n.mac, local, (port, vni), device_mtu);
            if let Some(a6) = n.address6.filter(|_| s.ipv6_tunnel()) {
                ipv6_twin(c, s, n, a6, (port, vni));
            }
        }
        // This kernel may have no ipip or geneve device: a TUN device whose packets the lab's
        // tunnel process (`probe-pod tunnel`) carries as real IP protocol 4 or UDP 6081 packets.
        // (`None` is refused by the scenario's schema: never built.)
        Overlay::Ipip { .. }
        | Overlay::Geneve { .. }
        | Overlay::Wireguard { .. }
        | Overlay::None { .. } => {
            c.push(format!("tuntap add dev {device} mode tun"));
            c.push(format!("link set {device} mtu {TUNNEL_MTU}"));
        }
    }
    c.push(format!("addr add {}/32 dev {device}", n.vtep));
    if six_underlay.is_some() {
        c.push(format!("addr add {}/128 dev {device} nodad", n.vtep6()));
    }
    c.push(format!("link set {device} up"));
    c.push("link add cni0 type bridge".into());
    c.push(format!("link set cni0 mtu {mtu}"));
    c.push(format!("addr add {}/24 dev cni0", n.bridge()));
    if n.address6.is_some() {
        c.push(format!("addr add {}/64 dev cni0 nodad", n.bridge6()));
    }
    c.push("link set cni0 up".into());
    let mut pods: Vec<&Pod> = n.pods.iter().collect();
    if l.nodes[l.dns_node].name == n.name {
        pods.push(&l.dns_pod);
    }
    for p in pods {
        st.links.push(format!(
            "link add {} type veth peer name eth0 netns {}",
            p.host_if, p.ns
        ));
        st.config
            .push(format!("link set {} master cni0 mtu {mtu} up", p.host_if));
    }
    for peer in l.nodes.iter().filter(|p| p.name != n.name) {
        peer_entries(&mut st, l, n, peer, mode, (device, overlay_device6(s)));
    }
    // kube-proxy's rules of each family, unless a fault takes them away.
    let kube_proxy = |family| {
        !s.faults.iter().any(|f| {
            matches!(f, Fault::KubeProxyMissing { node, family: missing }
                if *node == n.name && missing.is_none_or(|m| m == family))
        })
    };
    st.nft = nat::node_nat(l, n, kube_proxy(Family::Ipv4));
    st.nft
        .push_str(&nat::node_nat6(l, n, kube_proxy(Family::Ipv6)));
    st
}

/// A kernel VXLAN device as flanneld creates it: its MAC, VNI and port over `local`'s family's
/// underlay, learning nothing (its fdb entries are static), at the MTU its outer header leaves.
fn vxlan_device(
    c: &mut Vec<String>,
    device: &str,
    mac: MacAddr,
    local: IpAddr,
    (port, vni): (Port, Vni),
    mtu: u16,
) {
    c.push(format!(
        "link add {device} address {mac} type vxlan id {} local {local} dev eth0 dstport {port} nolearning",
        vni.get(),
    ));
    c.push(format!("link set {device} mtu {mtu}"));
}

/// The IPv6 twin of the VXLAN device (`overlay.ipv6Tunnel`): the same VNI and port over the
/// IPv6 underlay (the kernel opens an IPv6 socket of its own for it), its own MAC, the node's
/// `vtep6` on it.
fn ipv6_twin(c: &mut Vec<String>, s: &Scenario, n: &LabNode, local: Ipv6Addr, vxlan: (Port, Vni)) {
    let device = overlay_device6(s);
    vxlan_device(c, device, n.mac6(), local.into(), vxlan, OVERLAY_MTU6);
    c.push(format!("addr add {}/128 dev {device} nodad", n.vtep6()));
    c.push(format!("link set {device} up"));
}

/// What the node programs for one peer: a route through the tunnel device (by its inner
/// destination for the lab's tunnel process); for VXLAN what flanneld programs per family, on the
/// IPv4 device (`devices.0`) or, for the pods' IPv6 beside an IPv6 twin, on the twin
/// (`devices.1`).
fn peer_entries(
    st: &mut NsSetup,
    l: &Layout,
    n: &LabNode,
    peer: &LabNode,
    mode: OverlayMode,
    (device, device6): (&str, &str),
) {
    if mode != OverlayMode::Vxlan {
        // The tunnel process picks the peer by the inner destination.
        st.config
            .push(format!("route add {} dev {device}", peer.pod_cidr));
        return;
    }
    // Over the IPv6 underlay the fdb entry is the peer's IPv6 address, and the IPv4 pods
    // (outside the inventory) ride it too.
    let dst = match peer.address6.filter(|_| l.ipv6_underlay()) {
        Some(a6) => IpAddr::V6(a6),
        None => IpAddr::V4(peer.address),
    };
    let v4 = (peer.pod_cidr, IpAddr::V4(peer.vtep), peer.mac);
    flanneld(st, device, v4, Some(dst));
    if n.address6.is_none() {
        return;
    }
    let hop = IpAddr::V6(l.vtep6_next_hop(peer));
    match peer.address6.filter(|_| l.ipv6_tunnel) {
        // The twin: the peer's twin MAC, sent to its IPv6 address.
        Some(a6) => flanneld(
            st,
            device6,
            (peer.pod_cidr6(), hop, peer.mac6()),
            Some(IpAddr::V6(a6)),
        ),
        // The same device: its fdb entry above already sends the peer's VTEP MAC there.
        None => flanneld(st, device, (peer.pod_cidr6(), hop, peer.mac), None),
    }
}

/// What flanneld programs for one peer's pod range on one device: a route via the peer's VTEP
/// (onlink: no subnet holds it), a permanent neighbour entry with the VTEP's MAC, and where
/// `underlay` is given the fdb entry that sends frames for that MAC to it.
fn flanneld(
    st: &mut NsSetup,
    device: &str,
    (range, hop, mac): (Cidr, IpAddr, MacAddr),
    underlay: Option<IpAddr>,
) {
    st.config
        .push(format!("route add {range} via {hop} dev {device} onlink"));
    st.config.push(format!(
        "neigh add {hop} lladdr {mac} dev {device} nud permanent"
    ));
    if let Some(dst) = underlay {
        st.fdb
            .push(format!("fdb append {mac} dev {device} dst {dst}"));
    }
}

/// The VXLAN network identifier: Calico's 4096, flannel's 1.
#[must_use]
pub fn vni(s: &Scenario) -> u32 {
    s.overlay().vni().map_or(0, Vni::get)
}

/// The device that carries the pods' IPv6: the IPv6 twin (`overlay.ipv6Tunnel`) as the CNI
/// names it, flannel's `flannel-v6.1` or Calico's `vxlan-v6.calico`; else the overlay device.
#[must_use]
pub fn overlay_device6(s: &Scenario) -> &'static str {
    match (s.ipv6_tunnel(), s.cni) {
        (true, Cni::Calico) => "vxlan-v6.calico",
        (true, _) => "flannel-v6.1",
        (false, _) => overlay_device(s),
    }
}

/// The overlay device's name, as the CNI the scenario names calls it.
#[must_use]
pub fn overlay_device(s: &Scenario) -> &'static str {
    match (s.overlay().mode(), s.cni) {
        (OverlayMode::Vxlan, Cni::Calico) => "vxlan.calico",
        (OverlayMode::Vxlan, Cni::Cilium) => "cilium_vxlan",
        (OverlayMode::Vxlan, _) => "flannel.1",
        (OverlayMode::Ipip, _) => "tunl0",
        (OverlayMode::Geneve, _) => "cilium_geneve",
        (OverlayMode::Wireguard, Cni::Cilium) => "cilium_wg0",
        (OverlayMode::Wireguard, Cni::Calico) => "wireguard.cali",
        (OverlayMode::Wireguard, _) => "flannel-wg",
        // Refused by the scenario's schema: never built.
        (OverlayMode::None, _) => "none",
    }
}

pub(super) fn pod_setup(s: &Scenario, p: &Pod, n: &LabNode) -> NsSetup {
    let mut st = NsSetup::new(&p.ns);
    if s.dual_stack() {
        st.dual_stack(false);
    }
    // What the agent DaemonSet sets: ICMP echo without CAP_NET_RAW.
    st.sysctl
        .push(("net.ipv4.ping_group_range".into(), "0 2147483647".into()));
    st.config
        .push(format!("link set eth0 mtu {} up", s.overlay_mtu()));
    st.config
        .push(format!("addr add {}/24 dev eth0", p.address));
    st.config
        .push(format!("route add default via {}", n.bridge()));
    if let Some(a6) = p.address6 {
        st.config.push(format!("addr add {a6}/64 dev eth0 nodad"));
        st.config
            .push(format!("route add default via {}", n.bridge6()));
    }
    st
}
