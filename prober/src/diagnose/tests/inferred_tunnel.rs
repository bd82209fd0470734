//! A tunnel no crafted probe could go through is still diagnosed from its pattern: hosts fine,
//! every pod path across exactly those node pairs dead, each side fine inside. The overlay's
//! encapsulation is named, flagged inferred, with the pod, service and DNS failures following.

use super::*;

/// Three nodes in two zones (n1, n2 | n3), `mode` overlay, no tunnel endpoint known anywhere
/// (so no crafted probe is planned), with everything that rides the overlay across n3 dead.
/// `n3_pods_dead`: n3's pods reach nothing at all, not even their own host.
fn unprobed(mode: &str, n3_pods_dead: bool) -> (Vec<ResultRecord>, Vec<Finding>) {
    let mut inv = inventory(3, 1, "calico");
    inv.cluster.overlay = Some(
        serde_saphyr::from_str(&format!(
            "{{mode: {mode}, port: {}, vni: {}}}",
            if mode == "ipip" { 0 } else { 4789 },
            if mode == "ipip" { 0 } else { 4096 }
        ))
        .unwrap(),
    );
    for (i, n) in inv.nodes.iter_mut().enumerate() {
        n.vtep = None;
        n.zone = Some(if i < 2 { "office" } else { "cloud" }.into());
    }
    run(&inv, &move |p| {
        let n3_pod = p.from.node == "n3" && p.from.agent == AgentKind::Pod;
        (crosses_overlay(p, "n3") || (n3_pods_dead && n3_pod))
            .then(|| (Outcome::Timeout, "no answer within 2000 ms".to_string()))
    })
}

#[test]
fn an_unprobed_tunnel_blocked_between_zones_is_inferred_from_the_pattern() {
    for (mode, protocol) in [("ipip", "ipip"), ("vxlan", "udp")] {
        let (_, f) = unprobed(mode, false);
        assert!(
            !kinds(&f).contains(&Kind::Unexplained) && !kinds(&f).contains(&Kind::Dns),
            "{mode}: {f:#?}"
        );
        let gap = f
            .iter()
            .find(|g| g.kind() == Kind::FirewallGap)
            .unwrap_or_else(|| panic!("{mode}: {f:#?}"));
        assert!(
            like(json!({"protocol": protocol, "from": ["n3"], "to": ["n1", "n2"], "direction": "both", "inferred": true})).matches(gap),
            "{mode}: {gap:#?}"
        );
        assert!(
            gap.summary.contains("inferred, not probed"),
            "{}",
            gap.summary
        );
        assert!(
            gap.consequences.iter().any(|c| c.starts_with("dns:")),
            "DNS follows: {gap:#?}"
        );
        assert_eq!(serde_json::to_value(gap).unwrap()["inferred"], json!(true));
    }
}

#[test]
fn pods_dead_inside_a_side_are_not_read_as_a_tunnel() {
    let (_, f) = unprobed("ipip", true);
    assert!(
        !f.iter().any(|g| g.facts().inferred()),
        "n3's pods reach nothing, not even n3: {f:#?}"
    );
}

/// [`unprobed`]'s cluster (VXLAN, zones office | cloud, no tunnel endpoint) run dual-stack, with
/// everything that rides the overlay across n3 dead over `dead` families.
fn unprobed_dual(dead: &'static [crate::model::Family]) -> Vec<Finding> {
    let mut inv = inventory(3, 1, "calico");
    inv.cluster.overlay =
        Some(serde_saphyr::from_str("{mode: vxlan, port: 4789, vni: 4096}").unwrap());
    for (i, n) in inv.nodes.iter_mut().enumerate() {
        n.vtep = None;
        n.zone = Some(if i < 2 { "office" } else { "cloud" }.into());
    }
    run_dual(&inv, &move |p| {
        (crosses_overlay(p, "n3") && dead.contains(&p.to.family()))
            .then(timeout)
            .flatten()
    })
    .1
}

#[test]
fn an_unprobed_tunnel_dead_over_ipv6_only_is_inferred_for_ipv6_while_ipv4_carries_the_pods() {
    use crate::model::Family;
    let f = unprobed_dual(&[Family::Ipv6]);
    assert!(!kinds(&f).contains(&Kind::Unexplained), "{f:#?}");
    let gaps: Vec<&Finding> = f.iter().filter(|g| g.facts().inferred()).collect();
    assert_eq!(gaps.len(), 1, "{f:#?}");
    let gap = gaps[0];
    assert!(
        like(json!({"kind": "firewall-gap", "protocol": "udp", "port": 4789, "from": ["n3"], "to": ["n1", "n2"], "direction": "both", "family": "ipv6"})).matches(gap),
        "{gap:#?}"
    );
    assert!(
        gap.summary.contains("over IPv6 only") && gap.summary.contains("IPv4 works"),
        "{}",
        gap.summary
    );
    // Its rules open the IPv6 underlay, and nothing of IPv4 (which works).
    assert!(
        gap.fix
            .iter()
            .any(|l| l.contains("ip6 saddr") || l.contains("ip6tables")),
        "{:#?}",
        gap.fix
    );
    assert!(
        !gap.fix.iter().any(|l| l.contains("192.168.56.")),
        "{:#?}",
        gap.fix
    );
    assert!(
        gap.consequences
            .iter()
            .chain(&gap.evidence)
            .all(|id| id.ends_with("/ipv6")),
        "only IPv6 results: {gap:#?}"
    );
}

#[test]
fn an_unprobed_tunnel_dead_in_both_families_is_one_inferred_gap_without_a_family() {
    use crate::model::Family;
    let f = unprobed_dual(&[Family::Ipv4, Family::Ipv6]);
    let gaps: Vec<&Finding> = f.iter().filter(|g| g.facts().inferred()).collect();
    assert_eq!(gaps.len(), 1, "{f:#?}");
    assert_eq!(gaps[0].family, None, "{:#?}", gaps[0]);
    assert!(!gaps[0].summary.contains("IPv"), "{}", gaps[0].summary);
    for fam in ["ip saddr", "ip6 saddr"] {
        assert!(
            gaps[0].fix.iter().any(|l| l.contains(fam)),
            "{fam}: {:#?}",
            gaps[0].fix
        );
    }
}
