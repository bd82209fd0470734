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

/// Whether `p` leaves or reaches n3 (a Service or DNS probe from n3 counts: it leaves n3).
fn cut_off_n3(p: &PlannedProbe) -> bool {
    let (from, to) = node_of(p);
    let to = if p.path == PathClass::Dns
        || matches!(p.path, PathClass::PodToService | PathClass::NodeToService)
    {
        "elsewhere"
    } else {
        to
    };
    let cross = !to.is_empty() && from != to;
    cross && (from == "n3" || to == "n3")
}

#[test]
fn a_node_cut_off_is_one_finding_not_a_gap_per_port() {
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run(&inv, &|p| cut_off_n3(p).then(|| timeout().unwrap()));
    assert_eq!(kinds(&f), [Kind::Partition], "{f:#?}");
    assert!(
        like(json!({"state": "unreachable", "nodes": ["n3"]})).matches(&f[0]),
        "{:#?}",
        f[0]
    );
    assert!(f[0].summary.contains("n3 is cut off"));
}

#[test]
fn a_node_dead_over_ipv6_alone_is_one_finding_naming_the_family_not_gaps() {
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run_dual(&inv, &|p| {
        (cut_off_n3(p) && p.to.family() == crate::model::Family::Ipv6)
            .then(|| (Outcome::Timeout, "never reached: no answer".to_string()))
    });
    assert_eq!(kinds(&f), [Kind::Partition], "{f:#?}");
    let cut = &f[0];
    assert!(
        like(json!({"state": "unreachable", "nodes": ["n3"]})).matches(cut),
        "{cut:#?}"
    );
    assert_eq!(cut.family, Some(crate::model::Family::Ipv6));
    assert!(
        cut.summary.starts_with("n3 is cut off over IPv6") && cut.summary.contains("IPv4 works"),
        "{}",
        cut.summary
    );
    let fix = cut.fix.join("\n");
    for want in [
        "ip -6 route get fd00:192:168:56::10",
        "icmpv6 type { packet-too-big, nd-router-solicit, nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert, nd-redirect } accept",
        "for t in 2 133 134 135 136 137; do ip6tables",
        "rule family=ipv6 icmp-type name=$t accept",
    ] {
        assert!(fix.contains(want), "{want}\n{fix}");
    }
}

#[test]
fn a_node_dead_in_both_families_is_the_plain_partition() {
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run_dual(&inv, &|p| cut_off_n3(p).then(|| timeout().unwrap()));
    assert_eq!(kinds(&f), [Kind::Partition], "{f:#?}");
    assert_eq!(f[0].family, None, "{:#?}", f[0]);
    assert!(
        f[0].summary.starts_with("n3 is cut off:"),
        "{}",
        f[0].summary
    );
}

#[test]
fn a_cut_off_node_of_an_ipv6_only_cluster_is_pinged_at_its_ipv6_address() {
    // IPv6-only: the inventory's IPv4 `address` is no address at all (0.0.0.0 stands for none).
    let inv = crate::testutil::ipv6_only(3, 1, "flannel");
    let (_, f) = run(&inv, &|p| cut_off_n3(p).then(|| timeout().unwrap()));
    // Besides the overlay's warning (no tunnel endpoint over IPv6 is known).
    let cut: Vec<&Finding> = f.iter().filter(|g| g.kind() == Kind::Partition).collect();
    assert_eq!(cut.len(), 1, "{f:#?}");
    let fix = cut[0].fix.join("\n");
    assert!(fix.contains("(ping -6 fd00:56::c)"), "{fix}");
    assert!(!fix.contains("0.0.0.0"), "{fix}");
}
