//! A run narrowed to some paths (`--paths overlay`) claims only what it probed: a node whose
//! failures are all one port, one protocol or one path class is not "cut off"; the port that
//! fails is named.

use super::*;

/// The full matrix's results for the path classes in `keep`, with n3's crossings of the overlay
/// timing out (the overlay port dropped on the network).
fn narrowed(inv: &Inventory, keep: &[PathClass]) -> Vec<ResultRecord> {
    let (results, _) = run(inv, &|p| {
        if !crosses_overlay(p, "n3") {
            return None;
        }
        if p.path == PathClass::Overlay && p.to.protocol == Protocol::Udp {
            return Some((Outcome::Timeout, "never reached: dropped on the way".into()));
        }
        timeout()
    });
    results
        .into_iter()
        .filter(|r| keep.contains(&r.path))
        .collect()
}

#[test]
fn a_narrowed_run_names_the_port_not_a_partition() {
    let cases: [&[PathClass]; 3] = [
        &[PathClass::Overlay],
        &[PathClass::Overlay, PathClass::PodToPod],
        &[PathClass::Overlay, PathClass::NodeToPod],
    ];
    for keep in cases {
        let inv = inventory(3, 1, "flannel");
        let results = narrowed(&inv, keep);
        let f = diagnose(&inv, &Results::of(&results), &[]);
        assert_every_failure_explained(&results, &f);
        assert!(!kinds(&f).contains(&Kind::Partition), "{keep:?}: {f:#?}");
        assert!(!kinds(&f).contains(&Kind::Unexplained), "{keep:?}: {f:#?}");
        assert!(
            f.iter().any(|g| like(json!({"kind": "firewall-gap", "protocol": "udp", "port": 8472, "from": ["n3"], "to": ["n1", "n2"], "direction": "both"})).matches(g)),
            "{keep:?}: {f:#?}"
        );
    }
}

#[test]
fn a_node_failing_every_port_protocol_and_class_is_still_cut_off() {
    let inv = inventory(3, 1, "flannel");
    let (results, _) = run(&inv, &|p| {
        let (from, to) = node_of(p);
        // Services and DNS live elsewhere: they cross too.
        let cross = from != to;
        (cross && (from == "n3" || to == "n3"))
            .then(|| (Outcome::Timeout, "no answer within 2000 ms".to_string()))
    });
    let f = diagnose(&inv, &Results::of(&results), &[]);
    assert!(kinds(&f).contains(&Kind::Partition), "{f:#?}");
}
