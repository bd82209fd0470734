//! A refusal on an open path (`not_listening.rs`): nothing listens there, never a gap.

use super::*;

#[test]
fn refused_on_an_open_path_is_not_listening_never_a_gap() {
    // Table: who refuses (every other node: a port refused to some only is a firewall, see
    // tests/selective_refusal.rs), and the one finding it must give.
    let cases: [(&[&str], &str, u16); 2] =
        [(&["n1", "n3"], "n2", 10250), (&["n2", "n3"], "n1", 10250)];
    for (senders, receiver, port) in cases {
        let inv = inventory(3, 1, "flannel");
        let (_, f) = run(&inv, &move |p| {
            let (from, to) = node_of(p);
            (matches!(p.path, PathClass::NodeToNode | PathClass::PodToNode)
                && senders.contains(&from)
                && to == receiver
                && p.to.port == Some(port))
            .then(|| (Outcome::Refused, "connection refused".into()))
        });
        assert_eq!(kinds(&f), [Kind::NotListening], "{senders:?}: {f:#?}");
        assert_eq!(f[0].facts().nodes(), [receiver]);
        assert_eq!(f[0].facts().port(), Some(port));
        assert!(f[0].summary.contains("(the kubelet)"), "{}", f[0].summary);
    }
}

/// n2's kubelet refusing every other node over `families`, the rest working.
fn kubelet_on_n2_refused(families: &'static [crate::model::Family]) -> Vec<Finding> {
    let inv = inventory(3, 1, "flannel");
    run_dual(&inv, &|p| {
        let (from, to) = node_of(p);
        (matches!(p.path, PathClass::NodeToNode | PathClass::PodToNode)
            && from != "n2"
            && to == "n2"
            && p.to.port == Some(10250)
            && families.contains(&p.to.family()))
        .then(|| (Outcome::Refused, "connection refused".into()))
    })
    .1
}

#[test]
fn refused_over_ipv6_only_is_a_service_bound_to_ipv4_never_a_gap() {
    let f = kubelet_on_n2_refused(&[crate::model::Family::Ipv6]);
    assert_eq!(kinds(&f), [Kind::NotListening], "{f:#?}");
    assert_eq!(f[0].facts().nodes(), ["n2"]);
    assert_eq!(f[0].family, Some(crate::model::Family::Ipv6));
    assert!(
        f[0].summary
            .starts_with("nothing listens on tcp/10250 (the kubelet) on n2 over IPv6 only")
            && f[0].summary.contains("IPv4 connects"),
        "{}",
        f[0].summary
    );
    assert!(f[0].fix[0].contains("[::]"), "{:#?}", f[0].fix);
}

#[test]
fn refused_in_both_families_is_one_not_listening_without_a_family() {
    let f = kubelet_on_n2_refused(&[crate::model::Family::Ipv4, crate::model::Family::Ipv6]);
    assert_eq!(kinds(&f), [Kind::NotListening], "{f:#?}");
    assert_eq!(f[0].family, None);
    assert!(!f[0].summary.contains("IPv"), "{}", f[0].summary);
}
