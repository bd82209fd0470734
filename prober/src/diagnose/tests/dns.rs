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
