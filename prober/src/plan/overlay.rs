//! The overlay: each peer's VTEP, a crafted VXLAN or Geneve datagram or IP-in-IP packet the
//! receiver's sniffer confirms, and full-size packets between pods for MTU holes, in each family
//! the cluster has. Over an IPv6 underlay (`vtep6`, `address6`) the VTEP echo is `ICMPv6` and the
//! crafted datagram is VXLAN's alone: the engine crafts Geneve, IP-in-IP and `WireGuard` over
//! IPv4 only.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use probe_proto::{
    GeneveProbe, IcmpProbe, IpipProbe, MacAddr, MtuProbe, Port, Probe, Vni, VxlanProbe,
    WireguardProbe,
};

use super::{Builder, family_suffix};
use crate::inventory::{Family, Inventory, Node, Overlay, OverlayMode};
use crate::model::{AgentKind, AgentRef, PathClass, Protocol, Target};

/// One peer's tunnel endpoint in one family: the VTEP's address and MAC, the node's underlay
/// address the crafted datagram goes to, and the IPv4 inner addresses it carries (the IPv4
/// VTEPs of both ends where they have them; over an IPv6 underlay without them, none).
struct Tunnel {
    vtep: IpAddr,
    mac: Option<MacAddr>,
    underlay: IpAddr,
    inner_source: Option<Ipv4Addr>,
    inner_destination: Option<Ipv4Addr>,
}

/// `to`'s tunnel endpoint over the `family` underlay, seen from `from`; `None` when `to` has no
/// VTEP or no address in that family.
fn tunnel(from: &Node, to: &Node, family: Family) -> Option<Tunnel> {
    let v4 = |n: &Node| n.vtep.as_ref().map(|v| v.address);
    match family {
        Family::Ipv4 => {
            let vtep = to.vtep.as_ref()?;
            Some(Tunnel {
                vtep: IpAddr::V4(vtep.address),
                mac: vtep.mac,
                underlay: IpAddr::V4(to.ipv4()?),
                inner_source: v4(from),
                inner_destination: Some(vtep.address),
            })
        }
        Family::Ipv6 => {
            let vtep = to.vtep6.as_ref()?;
            Some(Tunnel {
                vtep: IpAddr::V6(vtep.address),
                mac: vtep.mac,
                underlay: IpAddr::V6(to.address6?),
                inner_source: v4(from),
                inner_destination: v4(to),
            })
        }
    }
}

impl<'a> Builder<'a> {
    pub(super) fn overlay(&mut self) {
        let inv: &'a Inventory = self.inv;
        let Some(ov) = inv.cluster.overlay else {
            return;
        };
        // Crafted probes exist for these encapsulations; IP-in-IP has no port (never a UDP
        // probe), WireGuard and native routing have no crafted probe.
        if !crafted_mode(&ov) {
            return self.pod_mtu(&ov);
        }
        for family in inv.families() {
            for (fnode, _, _) in self.agents_in(AgentKind::Host, family) {
                for tnode in inv.nodes.iter().filter(|t| t.name != fnode.name) {
                    // No tunnel endpoint known: not probed here; the diagnosis says so
                    // (diagnose/overlay_unprobed.rs), never silence.
                    if let Some(t) = tunnel(fnode, tnode, family) {
                        self.tunnel_probes(&ov, fnode, tnode, family, &t);
                    }
                }
            }
        }
        self.pod_mtu(&ov);
    }

    /// The VTEP echo and the crafted datagram from `fnode`'s host agent to `tnode` over one
    /// family's underlay.
    fn tunnel_probes(
        &mut self,
        ov: &Overlay,
        fnode: &Node,
        tnode: &Node,
        family: Family,
        t: &Tunnel,
    ) {
        let suffix = family_suffix(family);
        let from = AgentRef {
            node: fnode.name.clone(),
            agent: AgentKind::Host,
        };
        let vtep_target = Target {
            node: Some(tnode.name.clone()),
            agent: None,
            service: Some("vtep".into()),
            address: t.vtep,
            port: None,
            protocol: Protocol::Icmp,
        };
        self.push(
            PathClass::Overlay,
            from.clone(),
            vtep_target,
            &format!("{}/vtep", tnode.name),
            &format!("icmp{suffix}"),
            Probe::Vtep(IcmpProbe { address: t.vtep }),
        );
        let crafted = match (t.underlay, t.inner_destination) {
            (IpAddr::V4(a), Some(vtep)) => crafted(ov, a, t.inner_source, vtep, t.mac),
            // Over IPv6 the engine crafts VXLAN alone.
            (IpAddr::V6(a), _) => crafted6(ov, a, t),
            (IpAddr::V4(_), None) => None,
        };
        let Some((protocol, port, probe)) = crafted else {
            return;
        };
        let vx_target = Target {
            node: Some(tnode.name.clone()),
            agent: Some(AgentKind::Host),
            service: None,
            address: t.underlay,
            port,
            protocol,
        };
        let kind = match port {
            Some(p) => format!("{}/{p}{suffix}", ov.mode()),
            None => format!("{}{suffix}", ov.mode()),
        };
        let receipt_port = tnode.agents.host.as_ref().map(|a| a.port);
        let label = format!("{}/host", tnode.name);
        if let Some(i) = self.push(PathClass::Overlay, from, vx_target, &label, &kind, probe) {
            self.out.set_receipt_port(i, receipt_port);
        }
    }

    /// Full-size packets between pods: small ones passing while these vanish is an MTU hole. The
    /// size is the inventory's overlay MTU; without one, each pod agent sends its own interface's
    /// (the MTU its CNI configured), which the result reports, so the MTU is probed under every
    /// encapsulation and native routing alike. In each family the cluster has: ICMP echo with
    /// DF set over IPv4, `ICMPv6` echo (never fragmented) over IPv6.
    fn pod_mtu(&mut self, ov: &Overlay) {
        let size = ov.mtu();
        let kind = size.map_or_else(|| "mtu/own".to_string(), |s| format!("mtu/{s}"));
        for family in self.inv.families() {
            let what = format!("{kind}{}", family_suffix(family));
            let pods = self.agents_in(AgentKind::Pod, family);
            for (fnode, _, _) in &pods {
                for (tnode, _, address) in pods.iter().filter(|(t, _, _)| t.name != fnode.name) {
                    let from = AgentRef {
                        node: fnode.name.clone(),
                        agent: AgentKind::Pod,
                    };
                    let to = Target {
                        node: Some(tnode.name.clone()),
                        agent: Some(AgentKind::Pod),
                        service: None,
                        address: *address,
                        port: None,
                        protocol: Protocol::Icmp,
                    };
                    let probe = Probe::Mtu(MtuProbe {
                        address: *address,
                        size,
                    });
                    self.push(
                        PathClass::Overlay,
                        from,
                        to,
                        &format!("{}/pod", tnode.name),
                        &what,
                        probe,
                    );
                }
            }
        }
    }
}

/// Whether the overlay's encapsulation has a crafted probe: all but native routing.
fn crafted_mode(ov: &Overlay) -> bool {
    !matches!(ov, Overlay::None { .. })
}

/// The nodes whose overlay the plan cannot probe because no tunnel endpoint is known for them
/// (the CNI published none the discovery reads, in either family): empty when the overlay has no
/// crafted probe or fewer than two nodes run host agents.
#[must_use]
pub fn unprobed(inv: &Inventory) -> Vec<String> {
    let Some(ov) = &inv.cluster.overlay else {
        return Vec::new();
    };
    let hosts = inv.nodes.iter().filter(|n| n.agents.host.is_some()).count();
    if !crafted_mode(ov) || hosts < 2 {
        return Vec::new();
    }
    // A host with no pod network at all (a preflight candidate before its join) has no tunnel
    // to probe yet.
    let has_pods = |n: &&crate::inventory::Node| {
        n.pod_cidr.is_some() || !n.pod_cidrs.is_empty() || n.agents.pod.is_some()
    };
    inv.nodes
        .iter()
        .filter(|n| n.vtep.is_none() && n.vtep6.is_none())
        .filter(has_pods)
        .map(|n| n.name.clone())
        .collect()
}

/// The bytes an encapsulation adds to every packet it carries over IPv4: what the underlay's path
/// MTU must hold beyond the overlay's own MTU. 0 for native routing.
#[must_use]
pub fn encapsulation_overhead(mode: OverlayMode) -> u16 {
    match mode {
        // Outer IPv4 20 + UDP 8 + VXLAN or Geneve (no options) 8 + inner Ethernet 14.
        OverlayMode::Vxlan | OverlayMode::Geneve => 50,
        // Outer IPv4 20.
        OverlayMode::Ipip => 20,
        // Outer IPv4 20 + UDP 8 + WireGuard data header 16 + tag 16.
        OverlayMode::Wireguard => 60,
        OverlayMode::None => 0,
    }
}

/// The MTU pods see over the overlay as the inventory tells it: its own, else the
/// encapsulation's default on a 1500-byte underlay (1450 for VXLAN and Geneve, 1480 for
/// IP-in-IP, 1440 for `WireGuard`); `None` for native routing without one. What the probes sent
/// is in their results (`packetSize`): without an inventory MTU, each pod's own.
#[must_use]
pub fn pod_mtu(ov: &Overlay) -> Option<u16> {
    const UNDERLAY: u16 = 1500;
    let overhead = encapsulation_overhead(ov.mode());
    ov.mtu()
        .or_else(|| (overhead > 0).then(|| UNDERLAY - overhead))
}

/// The underlay path MTU the overlay needs: its MTU plus its encapsulation's overhead; `None`
/// when the overlay's MTU is unknown or nothing encapsulates (native routing: the pods' MTU is
/// the underlay's own, and the diagnosis knows no overlay to blame).
#[must_use]
pub fn underlay_mtu_needed(ov: &Overlay) -> Option<u16> {
    let overhead = encapsulation_overhead(ov.mode());
    ov.mtu()
        .filter(|_| overhead > 0)
        .map(|m| m.saturating_add(overhead))
}

/// The crafted probe for the overlay's encapsulation to a peer at `address` whose tunnel
/// endpoint is `vtep`: its target's protocol and port (none for IP-in-IP) and the probe; none
/// for native routing.
pub(super) fn crafted(
    ov: &Overlay,
    address: Ipv4Addr,
    inner_source: Option<Ipv4Addr>,
    vtep: Ipv4Addr,
    mac: Option<MacAddr>,
) -> Option<(Protocol, Option<u16>, Probe)> {
    Some(match *ov {
        Overlay::None { .. } => return None,
        Overlay::Ipip { .. } => (
            Protocol::Ipip,
            None,
            Probe::Ipip(IpipProbe {
                address,
                nonce: None,
                inner_source,
                inner_destination: Some(vtep),
            }),
        ),
        Overlay::Wireguard { port, .. } => (
            Protocol::Udp,
            Some(port.get()),
            Probe::Wireguard(WireguardProbe {
                address,
                port,
                nonce: None,
            }),
        ),
        Overlay::Geneve { port, vni, .. } => (
            Protocol::Udp,
            Some(port.get()),
            Probe::Geneve(GeneveProbe {
                address,
                port,
                vni,
                nonce: None,
                inner_source,
                inner_destination: Some(vtep),
            }),
        ),
        Overlay::Vxlan { port, vni, .. } => {
            vxlan(port, vni, address.into(), (inner_source, Some(vtep)), mac)
        }
    })
}

/// A crafted VXLAN datagram to `address` (either family's underlay) carrying an IPv4 inner
/// packet from and to `inner`, to the peer VTEP's `mac`.
fn vxlan(
    port: Port,
    vni: Vni,
    address: IpAddr,
    (inner_source, inner_destination): (Option<Ipv4Addr>, Option<Ipv4Addr>),
    mac: Option<MacAddr>,
) -> (Protocol, Option<u16>, Probe) {
    (
        Protocol::Udp,
        Some(port.get()),
        Probe::Vxlan(VxlanProbe {
            address,
            port,
            vni,
            nonce: None,
            inner_source,
            inner_destination,
            destination_mac: mac.map(|m| MacAddr(m.0)),
        }),
    )
}

/// The crafted datagram to a peer over the IPv6 underlay: VXLAN's (its IPv4 inner packet toward
/// the peer's IPv4 VTEP where there is one, to the peer's IPv6 VTEP's MAC); none for the other
/// encapsulations, which the engine crafts over IPv4 only.
fn crafted6(ov: &Overlay, address: Ipv6Addr, t: &Tunnel) -> Option<(Protocol, Option<u16>, Probe)> {
    let Overlay::Vxlan { port, vni, .. } = *ov else {
        return None;
    };
    Some(vxlan(
        port,
        vni,
        address.into(),
        (t.inner_source, t.inner_destination),
        t.mac,
    ))
}

#[cfg(test)]
mod tests {
    use super::super::{Filter, plan};
    use super::*;
    use crate::testutil::inventory;

    #[test]
    fn ipip_is_never_a_udp_probe_and_geneve_uses_its_port() {
        let mut inv = inventory(3, 1, "calico");
        if let Some(ov) = inv.cluster.overlay.as_mut() {
            *ov = Overlay::Ipip { mtu: ov.mtu() };
        }
        let probes = plan(&inv, &Filter::default()).to_vec();
        let crafted: Vec<_> = probes
            .iter()
            .filter(|p| p.path == PathClass::Overlay && p.to.agent == Some(AgentKind::Host))
            .collect();
        assert_eq!(crafted.len(), 6, "one per ordered pair");
        for p in &crafted {
            assert!(matches!(p.probe, Probe::Ipip(_)), "{p:?}");
            assert_eq!((p.to.protocol, p.to.port), (Protocol::Ipip, None));
            assert!(
                p.id.ends_with(":ipip") && p.receipt_port.is_some(),
                "{}",
                p.id
            );
        }
        assert!(
            !probes.iter().any(|p| matches!(p.probe, Probe::Vxlan(_))
                || (p.path == PathClass::Overlay && p.to.port == Some(0))),
            "no VXLAN or port-0 probe for IP-in-IP"
        );
        if let Some(ov) = inv.cluster.overlay.as_mut() {
            *ov = Overlay::Geneve {
                port: probe_proto::Port::new(6081).unwrap(),
                vni: Vni::new(2).unwrap(),
                mtu: ov.mtu(),
            };
        }
        let probes = plan(&inv, &Filter::default()).to_vec();
        let g = probes
            .iter()
            .find(|p| p.id == "overlay:n1/host->n2/host:geneve/6081")
            .unwrap();
        assert!(
            matches!(g.probe, Probe::Geneve(GeneveProbe { port, vni, .. }) if port.get() == 6081 && vni.get() == 2),
            "{g:?}"
        );
        // WireGuard: a datagram to its port, confirmed at the NIC.
        if let Some(ov) = inv.cluster.overlay.as_mut() {
            *ov = Overlay::Wireguard {
                port: probe_proto::Port::new(51871).unwrap(),
                mtu: ov.mtu(),
            };
        }
        let probes = plan(&inv, &Filter::default()).to_vec();
        assert!(
            probes
                .iter()
                .any(|p| p.id == "overlay:n1/host->n2/host:wireguard/51871"
                    && matches!(p.probe, Probe::Wireguard(_)))
        );
        // No crafted probe without an encapsulation: the pods' MTU probes remain.
        if let Some(ov) = inv.cluster.overlay.as_mut() {
            *ov = Overlay::None { mtu: ov.mtu() };
        }
        let probes = plan(&inv, &Filter::default()).to_vec();
        assert!(
            probes.iter().all(|p| p.path != PathClass::Overlay
                || matches!(p.probe, Probe::Mtu(_) | Probe::Vtep(_)))
        );
    }
}
