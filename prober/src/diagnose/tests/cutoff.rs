//! A node cut off (`cutoff.rs`): one finding, not a gap per port, and only when every kind of probe
//! fails.

use super::*;

#[test]
fn a_node_failing_one_kind_of_probe_only_is_not_cut_off() {
    // Only the DNS paths were probed (`--paths dns`) and n3's all fail: a DNS finding, not a
    // partition, since nothing else of n3 was probed.
    let inv = inventory(3, 1, "flannel");
    let (results, _) = run(&inv, &|_| None);
    let results: Vec<ResultRecord> = results
        .into_iter()
        .filter(|r| r.path == PathClass::Dns)
        .map(|mut r| {
            if r.from.node == "n3" {
                r.result.outcome = Outcome::Timeout;
            }
            r
        })
        .collect();
    let f = diagnose(&inv, &Results::of(&results), &[]);
    assert_every_failure_explained(&results, &f);
    assert!(!kinds(&f).contains(&Kind::Partition), "{f:#?}");
}

#[test]
fn a_node_cut_off_is_one_finding_not_a_gap_per_port() {
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run(&inv, &|p| {
        let (from, to) = node_of(p);
        let to = if p.path == PathClass::Dns
            || matches!(p.path, PathClass::PodToService | PathClass::NodeToService)
        {
            "elsewhere"
        } else {
            to
        };
        let cross = !to.is_empty() && from != to;
        if cross && (from == "n3" || to == "n3") {
            timeout()
        } else {
            None
        }
    });
    assert_eq!(kinds(&f), [Kind::Partition], "{f:#?}");
    assert!(
        like(json!({"state": "unreachable", "nodes": ["n3"]})).matches(&f[0]),
        "{:#?}",
        f[0]
    );
    assert!(f[0].summary.contains("n3 is cut off"));
}
