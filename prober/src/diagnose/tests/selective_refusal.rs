//! A TCP port refused to some senders while others connect to the very same port is a firewall
//! (a `reject with tcp reset` rule), not a dead service; refused to every sender, it is.

use super::*;

/// Whether `p` carries traffic from `sender` to the API server on n1 (tcp/6443): directly, to
/// the node, or through the `kubernetes` Service (kube-proxy sends it to :6443).
fn to_api_from(p: &PlannedProbe, sender: &str) -> bool {
    let (from, to) = node_of(p);
    if from != sender {
        return false;
    }
    match p.path {
        PathClass::PodToService | PathClass::NodeToService => {
            p.to.service.as_deref() == Some("kubernetes")
        }
        PathClass::NodeToApiserver
        | PathClass::PodToApiserver
        | PathClass::NodeToNode
        | PathClass::PodToNode => to == "n1" && p.to.port == Some(6443),
        _ => false,
    }
}

#[test]
fn a_reset_from_some_senders_only_is_a_host_firewall_gap() {
    // (refused senders, what the receipts say, the `where` wanted: none when unknown)
    let cases: [(&[&str], &str, Option<&str>); 4] = [
        // The SYN reached n1 and n1 answered with a reset: its own firewall.
        (&["n3"], "refused by n1 itself", Some("host:n1")),
        (&["n2"], "refused by n1 itself", Some("host:n1")),
        // Never reached n1: a network device answered in its name.
        (
            &["n3"],
            "never reached n1: reset on the way",
            Some("network"),
        ),
        // No receipt: the reset carries n1's address whoever sent it.
        (&["n3"], "connection refused", None),
    ];
    for (senders, detail, place) in cases {
        let mut inv = inventory(4, 1, "calico");
        components(&mut inv, CALICO_AND_COREDNS);
        let (results, f) = run(&inv, &move |p| {
            senders
                .iter()
                .any(|s| to_api_from(p, s))
                .then(|| (Outcome::Refused, detail.to_string()))
        });
        assert!(
            !kinds(&f).contains(&Kind::NotListening) && !kinds(&f).contains(&Kind::Unexplained),
            "{senders:?}: {f:#?}"
        );
        let gap = f
            .iter()
            .find(|g| g.kind() == Kind::FirewallGap)
            .unwrap_or_else(|| panic!("{senders:?}: no gap: {f:#?}"));
        assert!(
            like(json!({"protocol": "tcp", "port": 6443, "from": senders, "to": ["n1"], "direction": "one"})).matches(gap),
            "{senders:?}: {gap:#?}"
        );
        let have = serde_json::to_value(gap).unwrap();
        assert_eq!(
            have.get("where").and_then(|w| w.as_str()),
            place,
            "{gap:#?}"
        );
        // The paths through it are its consequences: the Service, the pods' direct path.
        let sender_pod = format!("pod-to-service:{}/pod->", senders[0]);
        assert!(
            gap.consequences.iter().any(|c| c.starts_with(&sender_pod)),
            "{gap:#?}"
        );
        let failed = results.iter().filter(|r| !r.result.outcome.is_ok()).count();
        assert_eq!(
            gap.evidence.len() + gap.consequences.len(),
            failed,
            "{f:#?}"
        );
    }
}

#[test]
fn a_reset_to_every_sender_is_not_listening_with_its_consequences() {
    let mut inv = inventory(3, 1, "calico");
    components(&mut inv, CALICO_AND_COREDNS);
    let (_, f) = run(&inv, &|p| {
        ["n1", "n2", "n3"]
            .iter()
            .any(|s| to_api_from(p, s))
            .then(|| (Outcome::Refused, "connection refused".into()))
    });
    assert!(
        !kinds(&f).contains(&Kind::FirewallGap) && !kinds(&f).contains(&Kind::Unexplained),
        "{f:#?}"
    );
    let nl = f.iter().find(|g| g.kind() == Kind::NotListening).unwrap();
    assert!(
        like(json!({"port": 6443, "nodes": ["n1"]})).matches(nl),
        "{nl:#?}"
    );
    assert!(
        nl.consequences
            .iter()
            .any(|c| c.starts_with("pod-to-service:n2/pod->")),
        "{nl:#?}"
    );
}

#[test]
fn a_reset_over_ipv6_from_one_sender_is_a_gap_over_ipv6_not_a_dead_service() {
    let mut inv = inventory(4, 1, "calico");
    components(&mut inv, CALICO_AND_COREDNS);
    let (_, f) = run_dual(&inv, &|p| {
        (to_api_from(p, "n3") && p.to.family() == crate::model::Family::Ipv6)
            .then(|| (Outcome::Refused, "refused by n1 itself".to_string()))
    });
    // And the latent cycle every such cluster has.
    assert_eq!(
        kinds(&f),
        [Kind::FirewallGap, Kind::BootstrapCycle],
        "{f:#?}"
    );
    let gap = &f[0];
    assert_eq!(gap.family, Some(crate::model::Family::Ipv6), "{gap:#?}");
    assert_eq!(gap.facts().from(), ["n3"]);
    assert!(
        gap.summary.contains("n3 over IPv6 with a TCP reset"),
        "{}",
        gap.summary
    );
    assert!(
        gap.fix.iter().any(|l| l.starts_with(
            "on n1 (ip6tables): ip6tables -I INPUT -p tcp -s fd00:192:168:56::12 --dport 6443"
        )),
        "{:#?}",
        gap.fix
    );
    assert!(
        !gap.fix.iter().any(|l| l.contains("(iptables)")),
        "{:#?}",
        gap.fix
    );
}
