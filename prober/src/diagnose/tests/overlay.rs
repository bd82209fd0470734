//! The overlay and MTU (`overlay.rs`): a VXLAN drop by the host, an MTU black hole, an overlay
//! broken with its port open.

use super::*;

#[test]
fn host_firewall_drop_of_vxlan_says_host() {
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run(&inv, &|p| {
        if !crosses_overlay(p, "n2") {
            return None;
        }
        let (_, to) = node_of(p);
        if p.path == PathClass::Overlay && p.to.protocol == Protocol::Udp {
            return Some(if to == "n2" {
                (
                    Outcome::Timeout,
                    "reached n2's eth0 but never its VXLAN device: dropped by n2 itself".into(),
                )
            } else {
                // n2's own outbound VXLAN works; the receivers decapsulate it.
                (Outcome::Ok, "decapsulated".into())
            });
        }
        timeout()
    });
    assert_eq!(kinds(&f), [Kind::FirewallGap], "{f:#?}");
    assert!(like(json!({"protocol": "udp", "port": 8472, "from": ["n1", "n3"], "to": ["n2"], "direction": "one", "where": "host:n2"})).matches(&f[0]), "{:#?}", f[0]);
}

#[test]
fn mtu_black_hole() {
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run(&inv, &|p| {
        let is_mtu = p.path == PathClass::Overlay && p.to.agent == Some(AgentKind::Pod);
        if is_mtu && (p.from.node == "n3") != (p.to.node.as_deref() == Some("n3")) {
            timeout()
        } else {
            None
        }
    });
    assert_eq!(kinds(&f), [Kind::Mtu], "{f:#?}");
    assert_eq!(f[0].facts().nodes(), ["n3"], "{:#?}", f[0]);
    assert_eq!(f[0].evidence.len(), 4);
    // Issue 25, item 8: the ping to paste names an address (a node's name needs a resolver
    // that knows it), and how to read its answer is a note, not part of the command.
    let ping = f[0]
        .fix
        .iter()
        .find(|l| l.contains("ping -M do"))
        .unwrap_or_else(|| panic!("no ping: {:#?}", f[0].fix));
    let target = ping.rsplit(' ').next().unwrap_or_default();
    assert!(
        target.parse::<std::net::Ipv4Addr>().is_ok() && ping.starts_with("on n"),
        "{ping}"
    );
    assert!(!ping.contains('#') && !ping.contains('<'), "{ping}");
    assert!(
        f[0].notes.iter().any(|n| n.contains("plus 28")),
        "{:#?}",
        f[0]
    );
}

#[test]
fn overlay_broken_while_vxlan_port_is_open() {
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run(&inv, &|p| {
        let vxlan = p.path == PathClass::Overlay && p.to.protocol == Protocol::Udp;
        let pair = [p.from.node.as_str(), p.to.node.as_deref().unwrap_or("")];
        let n1_n2 = pair.contains(&"n1") && pair.contains(&"n2");
        let rides = matches!(
            p.path,
            PathClass::PodToPod | PathClass::NodeToPod | PathClass::Overlay
        );
        if n1_n2 && rides && !vxlan {
            timeout()
        } else {
            None
        }
    });
    assert_eq!(kinds(&f), [Kind::Overlay], "{f:#?}");
    assert_eq!(f[0].facts().nodes(), ["n1", "n2"]);
}

/// A full-size probe between pods (the MTU probe) crossing to or from n3 over `families`.
fn big_to_or_from_n3(p: &PlannedProbe, families: &[crate::model::Family]) -> bool {
    let is_mtu = p.path == PathClass::Overlay && p.to.agent == Some(AgentKind::Pod);
    is_mtu
        && (p.from.node == "n3") != (p.to.node.as_deref() == Some("n3"))
        && families.contains(&p.to.family())
}

#[test]
fn full_size_ipv6_lost_while_ipv4_passes_is_packet_too_big_filtered() {
    const V6: &[crate::model::Family] = &[crate::model::Family::Ipv6];
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run_dual(&inv, &|p| {
        big_to_or_from_n3(p, V6).then(|| timeout().unwrap())
    });
    assert_eq!(kinds(&f), [Kind::Mtu], "{f:#?}");
    let mtu = &f[0];
    assert_eq!(mtu.family, Some(crate::model::Family::Ipv6));
    assert_eq!(mtu.facts().nodes(), ["n3"]);
    assert!(
        mtu.summary
            .contains("ICMPv6 Packet Too Big (type 2) is filtered"),
        "{}",
        mtu.summary
    );
    for want in [
        "on n3 (ip6tables): for c in INPUT FORWARD OUTPUT; do ip6tables -I $c -p ipv6-icmp --icmpv6-type 2 -j ACCEPT; done",
        "on n3 (nftables): for c in input forward output; do nft insert rule inet filter $c icmpv6 type packet-too-big accept; done",
    ] {
        assert!(mtu.fix.iter().any(|l| l == want), "{want}\n{:#?}", mtu.fix);
    }
    let ping = mtu
        .fix
        .iter()
        .find(|l| l.contains("ping -6 -M do"))
        .unwrap();
    let target = ping.rsplit(' ').next().unwrap_or_default();
    assert!(target.parse::<std::net::Ipv6Addr>().is_ok(), "{ping}");
    assert!(
        !mtu.fix.iter().any(|l| l.contains("raise the underlay MTU")),
        "{:#?}",
        mtu.fix
    );
}

#[test]
fn full_size_lost_in_both_families_is_one_mtu_finding_without_a_family() {
    const BOTH: &[crate::model::Family] = &[crate::model::Family::Ipv4, crate::model::Family::Ipv6];
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run_dual(&inv, &|p| {
        big_to_or_from_n3(p, BOTH).then(|| timeout().unwrap())
    });
    assert_eq!(kinds(&f), [Kind::Mtu], "{f:#?}");
    assert_eq!(f[0].family, None);
    assert!(!f[0].summary.contains("Packet Too Big"), "{}", f[0].summary);
    assert!(
        f[0].fix
            .iter()
            .any(|l| l.contains("raise the underlay MTU"))
    );
}

#[test]
fn the_ping_for_ipv6_pods_over_an_ipv4_tunnel_checks_the_ipv4_underlay() {
    const V6: &[crate::model::Family] = &[crate::model::Family::Ipv6];
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run_dual_over_ipv4_tunnel(&inv, &|p| {
        big_to_or_from_n3(p, V6).then(|| timeout().unwrap())
    });
    assert_eq!(kinds(&f), [Kind::Mtu], "{f:#?}");
    assert_eq!(f[0].family, Some(crate::model::Family::Ipv6));
    // 1450 bytes of pod packet + 50 of VXLAN over IPv4, less ping's 28 bytes of headers: the
    // tunnel's underlay, not an IPv6 path between the nodes that no pod packet takes.
    let ping = f[0]
        .fix
        .iter()
        .find(|l| l.contains("ping "))
        .unwrap_or_else(|| panic!("no ping: {:#?}", f[0].fix));
    assert!(ping.contains("ping -M do -s 1472 "), "{ping}");
    let target = ping.rsplit(' ').next().unwrap_or_default();
    assert!(target.parse::<std::net::Ipv4Addr>().is_ok(), "{ping}");
}
