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
