//! DNS (`dns.rs`): an answered error code is a DNS finding.

use super::*;

#[test]
fn dns_rcode_is_a_dns_finding() {
    let inv = inventory(3, 1, "flannel");
    let (results, _) = run(&inv, &|_| None);
    let mut results = results;
    for r in results
        .iter_mut()
        .filter(|r| r.path == PathClass::Dns && r.from.node == "n2")
    {
        r.result.outcome = Outcome::DnsError;
        r.result.dns = Some(Box::new(probe_proto::DnsInfo {
            server: "10.96.0.10:53".parse().unwrap(),
            name: "kubernetes.default.svc.cluster.local".into(),
            rcode: Some("SERVFAIL".into()),
            answers: Vec::new(),
        }));
    }
    let f = diagnose(&inv, &Results::of(&results), &[]);
    assert_every_failure_explained(&results, &f);
    assert_eq!(kinds(&f), [Kind::Dns]);
    assert_eq!(f[0].facts().state().map(State::as_str), Some("servfail"));
}

#[test]
fn dns_silent_over_ipv6_alone_says_the_family_and_how_to_check_it() {
    // Dual-stack: no DNS query over IPv6 is answered (the DNS pods bound to IPv4), IPv4's are.
    let inv = crate::testutil::dual_stack(3, 1, "flannel");
    let (_, f) = run(&inv, &|p| {
        (p.path == PathClass::Dns && p.to.family() == crate::model::Family::Ipv6)
            .then(timeout)
            .flatten()
    });
    assert_eq!(kinds(&f), [Kind::Dns], "{f:#?}");
    assert!(
        like(json!({"kind": "dns", "state": "no-answer", "family": "ipv6"})).matches(&f[0]),
        "{:#?}",
        f[0]
    );
    assert!(
        f[0].summary
            .starts_with("cluster DNS does not answer over IPv6 while IPv4 queries are answered"),
        "{}",
        f[0].summary
    );
    assert!(
        f[0].fix.iter().any(|l| l.contains("[::]:53")),
        "{:#?}",
        f[0].fix
    );
}

#[test]
fn dns_silent_in_both_families_names_no_family() {
    let inv = crate::testutil::dual_stack(3, 1, "flannel");
    let (_, f) = run(&inv, &|p| {
        (p.path == PathClass::Dns).then(timeout).flatten()
    });
    assert_eq!(kinds(&f), [Kind::Dns], "{f:#?}");
    assert_eq!(f[0].family, None, "{:#?}", f[0]);
    assert!(!f[0].summary.contains("IPv"), "{}", f[0].summary);
}
