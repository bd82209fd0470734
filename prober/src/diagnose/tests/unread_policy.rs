//! A policy prober could not read (`policy/unread.rs`), judged per family: the hosts, the pods
//! and the overlay shown to work over IPv4 say nothing of IPv6.

use super::*;
use crate::model::Family;

/// Into a pod agent from another node.
fn into_pod_agent(p: &PlannedProbe) -> bool {
    let (from, to) = node_of(p);
    p.to.agent == Some(AgentKind::Pod) && !to.is_empty() && from != to
}

#[test]
fn ipv6_probes_into_one_pod_agent_dropped_is_a_policy_over_ipv6() {
    // Dual-stack: nothing new reaches n3's pod agent over IPv6; n3's pods reach the others over
    // IPv6 (the overlay carries IPv6 pod traffic to and from n3) and IPv4 is untouched.
    let inv = crate::testutil::dual_stack(3, 1, "flannel");
    let (_, f) = run(&inv, &|p| {
        (into_pod_agent(p) && node_of(p).1 == "n3" && p.to.family() == Family::Ipv6)
            .then(timeout)
            .flatten()
    });
    assert_eq!(kinds(&f), [Kind::Policy], "{f:#?}");
    assert!(
        like(json!({"kind": "policy", "state": "unreadable", "inferred": true, "nodes": ["n3"], "family": "ipv6"}))
            .matches(&f[0]),
        "{:#?}",
        f[0]
    );
    assert!(
        f[0].summary
            .contains("do not answer the other nodes over IPv6 while"),
        "{}",
        f[0].summary
    );
}

#[test]
fn ipv6_pod_paths_dead_both_ways_between_two_nodes_are_no_policy_though_ipv4_carries_pods() {
    // Dual-stack: every IPv6 pod path between n1 and n2 dies, both ways (an IPv6 route or fdb
    // entry missing), while IPv4 pods and both families' hosts are fine. The overlay is not
    // shown to carry IPv6 between them: no policy may be inferred from IPv4's success.
    let inv = crate::testutil::dual_stack(3, 1, "flannel");
    let (_, f) = run(&inv, &|p| {
        let (from, to) = node_of(p);
        let pair = matches!((from, to), ("n1", "n2") | ("n2", "n1"));
        (pair
            && p.to.family() == Family::Ipv6
            && matches!(p.path, PathClass::PodToPod | PathClass::NodeToPod))
        .then(timeout)
        .flatten()
    });
    assert!(!kinds(&f).contains(&Kind::Policy), "{f:#?}");
}
