//! Intermittent loss (`loss.rs`): a warning, never a gap, and never a DNS failure where the server
//! answers.

use super::*;

#[test]
fn loss_is_a_warning_never_a_gap() {
    // (every how many results is lossy, a node with extra loss, the nodes the finding must name)
    let cases: [(usize, Option<&str>, &[&str]); 3] = [
        (1, None, &["n1", "n2", "n3"]),
        (1000, Some("n3"), &["n3"]),
        (20, Some("n2"), &["n2"]),
    ];
    for (every, hot, named) in cases {
        let inv = inventory(3, 1, "flannel");
        let results = tweaked(&inv, &move |i, r| {
            let on_hot = hot.is_some_and(|h| r.from.node == h || r.to.node.as_deref() == Some(h))
                && r.to.node.as_deref() != Some(r.from.node.as_str());
            if i % every == 0 || (on_hot && i % 2 == 0) {
                intermittent(r, 2, 1);
            }
        });
        assert!(results.iter().any(|r| r.result.is_intermittent()));
        let f = diagnose(&inv, &Results::of(&results), &[]);
        assert_eq!(kinds(&f), [Kind::Loss], "{every}/{hot:?}: {f:#?}");
        assert_eq!(f[0].severity, Severity::Warning);
        assert_eq!(f[0].facts().nodes(), named, "{}", f[0].summary);
        assert!(f[0].summary.contains(" %"), "{}", f[0].summary);
        let lossy = results
            .iter()
            .filter(|r| r.result.is_intermittent())
            .count();
        assert_eq!(f[0].evidence.len(), lossy);
    }
}

#[test]
fn loss_next_to_a_real_block_gets_the_gap_and_only_it() {
    let inv = inventory(3, 1, "flannel");
    let results = tweaked(&inv, &|i, r| {
        let blocked = r.path == PathClass::NodeToNode
            && r.from.node == "n1"
            && r.to.node.as_deref() == Some("n2")
            && r.to.port == Some(10250);
        if blocked {
            intermittent(r, 3, 0);
        } else if i % 5 == 0 {
            intermittent(r, 3, 2);
        }
    });
    let f = diagnose(&inv, &Results::of(&results), &[]);
    assert_every_failure_explained(&results, &f);
    assert_eq!(kinds(&f), [Kind::FirewallGap, Kind::Loss], "{f:#?}");
    assert!(
        like(json!({"port": 10250, "from": ["n1"], "to": ["n2"]})).matches(&f[0]),
        "{:#?}",
        f[0]
    );
}

#[test]
fn an_unanswered_query_where_the_same_server_answers_is_loss_not_dns() {
    // A lossy run: one of n3's pod's cluster-DNS queries failed all three attempts while its
    // other queries to the same server were answered. The loss's, not a DNS fault.
    let mut inv = inventory(3, 1, "flannel");
    // Two names, so each sender asks the same server twice over the same transport.
    let dns = inv
        .cluster
        .dns
        .as_mut()
        .expect("the test inventory has cluster DNS");
    dns.names.push("example.com".into());
    let first_dns = std::cell::Cell::new(true);
    let results = tweaked(&inv, &|i, r| {
        let mine = r.path == PathClass::Dns
            && r.from.node == "n3"
            && r.from.agent == AgentKind::Pod
            && r.to.node.is_none();
        if mine && first_dns.replace(false) {
            intermittent(r, 3, 0);
        } else if i % 7 == 0 {
            intermittent(r, 3, 2);
        }
    });
    assert!(
        !first_dns.get(),
        "the plan has a DNS query from n3's pod to a Service"
    );
    let f = diagnose(&inv, &Results::of(&results), &[]);
    assert_every_failure_explained(&results, &f);
    assert_eq!(kinds(&f), [Kind::Loss], "{f:#?}");
}

#[test]
fn a_full_size_packet_lost_one_way_under_loss_is_loss_not_mtu() {
    // A lossy run (dual-stack lab, 3 % on every uplink): n3's pod lost its full-size probe to
    // n4's pod on all three tries while n4's got through to n3's. The loss's, not an MTU hole.
    let inv = inventory(4, 1, "flannel");
    let results = tweaked(&inv, &|i, r| {
        let big = r.path == PathClass::Overlay && r.to.agent == Some(AgentKind::Pod);
        if big && r.from.node == "n3" && r.to.node.as_deref() == Some("n4") {
            intermittent(r, 3, 0);
        } else if i % 7 == 0 {
            intermittent(r, 2, 1);
        }
    });
    let f = diagnose(&inv, &Results::of(&results), &[]);
    assert_every_failure_explained(&results, &f);
    assert_eq!(kinds(&f), [Kind::Loss], "{f:#?}");
    // Lost both ways, it is the path's size after all.
    let results = tweaked(&inv, &|i, r| {
        let big = r.path == PathClass::Overlay && r.to.agent == Some(AgentKind::Pod);
        let pair = [r.from.node.as_str(), r.to.node.as_deref().unwrap_or("")];
        if big && pair.contains(&"n3") && pair.contains(&"n4") {
            intermittent(r, 3, 0);
        } else if i % 7 == 0 {
            intermittent(r, 2, 1);
        }
    });
    let f = diagnose(&inv, &Results::of(&results), &[]);
    assert!(kinds(&f).contains(&Kind::Mtu), "{f:#?}");
}
