//! The hop where it died: a gap placed on the network names the last router that answered the
//! TTL-limited probes of its evidence, in the finding, its summary and the network's fix line;
//! only when every path traced from its senders agrees, and never for a host's own drop.

use super::*;
use probe_proto::Trace;

/// Incident 1 (udp/8472 dropped on the network between n3 and the others), with the traces
/// `trace` gives the VXLAN evidence by (sender, receiver).
fn traced(trace: &dyn Fn(&str, &str) -> Option<Trace>) -> Vec<Finding> {
    let inv = inventory(3, 1, "flannel");
    let planned = plan(&inv, &Filter::default()).to_vec();
    let (mut results, _) = run(&inv, &|p| {
        crosses_overlay(p, "n3").then(|| (Outcome::Timeout, "never reached it".into()))
    });
    for (p, r) in planned.iter().zip(&mut results) {
        if crosses_overlay(p, "n3")
            && p.path == PathClass::Overlay
            && p.to.protocol == Protocol::Udp
        {
            let (from, to) = node_of(p);
            r.result.trace = trace(from, to);
        }
    }
    let f = diagnose(&inv, &Results::of(&results), &[]);
    assert_every_failure_explained(&results, &f);
    f
}

fn hop(after: &str, hops: u8) -> Option<Trace> {
    let after = after.parse().ok()?;
    Some(Trace { after, hops })
}

fn gap(f: &[Finding]) -> &Finding {
    f.iter()
        .find(|g| g.kind() == Kind::FirewallGap)
        .unwrap_or_else(|| panic!("{f:#?}"))
}

#[test]
fn a_gap_on_the_network_names_the_last_hop_that_answered() {
    // n3's side met the router at its own zone's address; the other side at another address of
    // the same router. The finding is read from its first side (n3 -> n1, n2).
    let f = traced(&|from, _| match from {
        "n3" => hop("192.168.64.2", 2),
        _ => hop("192.168.56.1", 1),
    });
    let g = gap(&f);
    assert!(
        like(
            json!({"kind": "firewall-gap", "port": 8472, "from": ["n3"], "where": "network",
            "hop": {"after": "192.168.64.2", "hops": 2}})
        )
        .matches(g),
        "{g:#?}"
    );
    assert!(
        g.summary
            .ends_with("; dropped after 192.168.64.2 (2 hops from n3)"),
        "{}",
        g.summary
    );
    assert!(
        g.fix[0].starts_with(
            "on the firewall after 192.168.64.2 (the last hop that answered, 2 hops from the sender"
        ),
        "{:#?}",
        g.fix
    );
    let json = serde_json::to_value(g).unwrap();
    assert_eq!(json["hop"], json!({"after": "192.168.64.2", "hops": 2}));
}

#[test]
fn traces_that_disagree_or_are_missing_name_no_hop() {
    // Two senders' paths end at different routers: neither is the place.
    let split = traced(&|from, to| match (from, to) {
        ("n3", "n1") => hop("192.168.64.2", 2),
        ("n3", "n2") => hop("192.168.57.1", 1),
        _ => None,
    });
    let untraced = traced(&|_, _| None);
    for f in [&split, &untraced] {
        let g = gap(f);
        assert_eq!(g.facts().hop(), None, "{g:#?}");
        assert!(!g.summary.contains("dropped after"), "{}", g.summary);
        assert!(
            g.fix[0].starts_with("on the firewall, router or security group"),
            "{:#?}",
            g.fix
        );
    }
    // Two senders at different distances from the same last hop: the nearer one's count.
    let near_and_far = traced(&|from, to| match (from, to) {
        ("n3", "n1") => hop("192.168.64.2", 3),
        ("n3", "n2") => hop("192.168.64.2", 2),
        _ => None,
    });
    assert_eq!(
        gap(&near_and_far).facts().hop().map(|h| h.hops),
        Some(2),
        "{near_and_far:#?}"
    );
}
