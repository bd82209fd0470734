//! The pods' MTU is probed under every overlay, native routing included (each pod agent sends its
//! own interface MTU when the inventory gives none); an MTU the agents could not read is said to
//! be unprobed, never passed over in silence nor called a network failure.

use super::*;

fn mtu_unprobed(f: &[Finding]) -> bool {
    f.iter().any(|f| {
        f.kind() == Kind::Mtu
            && f.severity == Severity::Warning
            && f.summary.starts_with("MTU not probed")
    })
}

#[test]
fn an_mtu_probed_at_the_pods_own_size_says_nothing_when_healthy() {
    for mode in [
        "{mode: none}",
        "{mode: vxlan, port: 8472, vni: 1}",
        "{mode: ipip}",
    ] {
        let mut inv = inventory(3, 1, "calico");
        inv.cluster.overlay = Some(serde_saphyr::from_str(mode).unwrap());
        let (_, f) = run(&inv, &|_| None);
        assert!(f.is_empty(), "{mode}: {f:#?}");
    }
}

#[test]
fn an_mtu_the_pod_agents_could_not_read_is_a_warning_citing_the_probes() {
    let mut inv = inventory(3, 1, "calico");
    inv.cluster.overlay = Some(serde_saphyr::from_str("{mode: none}").unwrap());
    let (results, f) = run(&inv, &|p| {
        (matches!(p.probe, probe_proto::Probe::Mtu(_)) && p.from.node == "n2").then(|| {
            (
                Outcome::Error,
                "icmp echo 10.244.1.2 at this side's MTU: cannot read the MTU of the route toward 10.244.1.2: No route to host".into(),
            )
        })
    });
    assert!(mtu_unprobed(&f), "{f:#?}");
    assert_eq!(
        kinds(&f),
        [Kind::Mtu],
        "nothing else, never a failure of the network: {f:#?}"
    );
    let unsent: Vec<&str> = results
        .iter()
        .filter(|r| r.result.outcome == Outcome::Error)
        .map(|r| r.result.id.as_str())
        .collect();
    assert_eq!(f[0].evidence, unsent, "the unsent probes are its evidence");
    assert!(f[0].summary.contains("from n2"), "{}", f[0].summary);
}
