//! The agents' own port blocked (`prober_port.rs`): the prober's problem, not a gap.

use super::*;

#[test]
fn the_agents_port_blocked_is_the_probers_problem_not_a_gap() {
    // Only tcp/9917 (the agents' own port) from n3 to n1 is rejected on the network: the cluster
    // does not need that port, so this is "the prober cannot use its port", never a firewall gap.
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run(&inv, &|p| {
        let (from, to) = node_of(p);
        if p.path == PathClass::PodToNode && from == "n3" && to == "n1" {
            Some((
                Outcome::Rejected,
                "ICMP communication administratively prohibited".into(),
            ))
        } else {
            None
        }
    });
    assert_eq!(kinds(&f), [Kind::ProberPort], "{f:#?}");
    assert_eq!(f[0].severity, Severity::Warning);
    assert!(
        like(json!({"protocol": "tcp", "port": 9917, "to": ["n1"]})).matches(&f[0]),
        "{:#?}",
        f[0]
    );
    assert_eq!(f[0].evidence.len(), 1, "{:#?}", f[0]);
}

#[test]
fn the_agents_port_closed_over_ipv6_only_is_ipv6s_with_an_ip6_rule() {
    // Dual-stack: the agents' port on n1 is rejected to n3's pods over IPv6 alone.
    use crate::model::Family;
    let inv = crate::testutil::dual_stack(3, 1, "flannel");
    let (_, f) = run(&inv, &|p| {
        let (from, to) = node_of(p);
        (p.path == PathClass::PodToNode
            && from == "n3"
            && to == "n1"
            && p.to.family() == Family::Ipv6)
            .then(|| {
                (
                    Outcome::Rejected,
                    "ICMP communication administratively prohibited".into(),
                )
            })
    });
    assert_eq!(kinds(&f), [Kind::ProberPort], "{f:#?}");
    assert!(
        like(json!({"port": 9917, "to": ["n1"], "family": "ipv6"})).matches(&f[0]),
        "{:#?}",
        f[0]
    );
    assert!(
        f[0].summary.contains("tcp/9917 over IPv6 on n1"),
        "{}",
        f[0].summary
    );
    assert!(
        f[0].fix.iter().any(|l| l
            == "on n1 (nftables): nft insert rule inet filter input ip6 saddr fd00:10:244::/56 tcp dport 9917 accept"),
        "{:#?}",
        f[0].fix
    );
    assert!(
        !f[0].fix.iter().any(|l| l.contains("ip saddr")),
        "IPv4 is open: {:#?}",
        f[0].fix
    );
}

#[test]
fn ipv4_reaching_a_node_does_not_make_its_ipv6_failures_the_agents_port() {
    // Over IPv6 nothing from n3 reaches n1 on any port, while IPv4 does and n1's IPv6 works with
    // n2: the IPv6 failures to n1's agent port are not the prober's port (IPv4's success says
    // nothing of IPv6).
    use crate::model::Family;
    let inv = crate::testutil::dual_stack(3, 1, "flannel");
    let (_, f) = run(&inv, &|p| {
        let (from, to) = node_of(p);
        (from == "n3" && to == "n1" && p.to.family() == Family::Ipv6)
            .then(timeout)
            .flatten()
    });
    assert!(!kinds(&f).contains(&Kind::ProberPort), "{f:#?}");
}
