//! Firewall gaps (`firewall.rs`): the port, the direction, where it is dropped, and one finding for
//! many pairs or zones.

use super::*;

#[test]
fn incident_1_flannel_port_blocked_to_the_new_worker() {
    let inv = inventory(3, 1, "flannel");
    let (results, f) = run(&inv, &|p| {
        if !crosses_overlay(p, "n3") {
            return None;
        }
        if p.path == PathClass::Overlay && p.to.protocol == Protocol::Udp {
            let to = p.to.node.clone().unwrap_or_default();
            return Some((
                Outcome::Timeout,
                format!(
                    "never reached {to}: dropped on the way (the network, or the sender's own firewall)"
                ),
            ));
        }
        timeout()
    });
    assert_eq!(kinds(&f), [Kind::FirewallGap], "{f:#?}");
    let gap = &f[0];
    assert!(
        like(json!({"kind": "firewall-gap", "protocol": "udp", "port": 8472, "from": ["n3"], "to": ["n1", "n2"], "direction": "both", "where": "network"})).matches(gap),
        "{gap:#?}"
    );
    assert_eq!(gap.evidence.len(), 4, "the four VXLAN receipts");
    let failed = results.iter().filter(|r| !r.result.outcome.is_ok()).count();
    assert_eq!(
        gap.evidence.len() + gap.consequences.len(),
        failed,
        "every pod and DNS failure is its consequence"
    );
    assert!(
        gap.consequences
            .iter()
            .any(|c| c.starts_with("pod-to-pod:n1/pod->n3/pod"))
    );
    // The packets died on the network: the fix is the network's, not nine host rules.
    assert_eq!(gap.facts().places(), [crate::diagnose::Where::Network]);
    assert!(
        gap.fix[0].starts_with("on the firewall, router or security group")
            && gap.fix[0].contains("udp/8472 from 192.168.56.12 to 192.168.56.10/31 and back"),
        "{:#?}",
        gap.fix
    );
    assert!(
        !gap.fix
            .iter()
            .any(|l| l.contains("nft ") || l.contains("iptables ")),
        "{:#?}",
        gap.fix
    );
}

#[test]
fn api_port_blocked_is_a_gap_whose_clusterip_failure_is_a_consequence() {
    let mut inv = inventory(3, 1, "calico");
    components(&mut inv, CALICO_AND_COREDNS);
    let (_, f) = run(&inv, &|p| {
        let from_n3 = p.from.node == "n3";
        let to_api = p.to.port == Some(6443)
            || matches!(p.path, PathClass::PodToService | PathClass::NodeToService);
        if from_n3 && to_api { timeout() } else { None }
    });
    assert_eq!(
        kinds(&f),
        [Kind::FirewallGap, Kind::BootstrapCycle],
        "{f:#?}"
    );
    assert!(like(json!({"kind": "firewall-gap", "protocol": "tcp", "port": 6443, "from": ["n3"], "to": ["n1"], "direction": "one"})).matches(&f[0]), "{:#?}", f[0]);
    assert!(
        f[0].consequences
            .iter()
            .any(|c| c.starts_with("node-to-service:n3/host")),
        "{:#?}",
        f[0]
    );
    assert!(
        f[0].consequences
            .iter()
            .any(|c| c.starts_with("pod-to-service:n3/pod")),
        "{:#?}",
        f[0]
    );
    assert_eq!(
        f[1].facts().state().map(State::as_str),
        Some("latent"),
        "not an active cycle: {:#?}",
        f[1]
    );
}

#[test]
fn asymmetric_gap_says_the_reverse_works() {
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run(&inv, &|p| {
        let (from, to) = node_of(p);
        if p.path == PathClass::NodeToNode && from == "n2" && to == "n3" && p.to.port == Some(10250)
        {
            Some((
                Outcome::Rejected,
                "ICMP communication administratively prohibited".into(),
            ))
        } else {
            None
        }
    });
    assert_eq!(kinds(&f), [Kind::FirewallGap]);
    assert!(
        like(json!({"port": 10250, "from": ["n2"], "to": ["n3"], "direction": "one"}))
            .matches(&f[0]),
        "{:#?}",
        f[0]
    );
    assert!(
        f[0].summary.contains("the reverse direction works"),
        "{}",
        f[0].summary
    );
}

#[test]
fn rejected_by_the_host_itself_says_where() {
    let inv = inventory(2, 1, "flannel");
    let (results, f) = {
        let plan_results = plan(&inv, &Filter::default()).to_vec();
        let results: Vec<ResultRecord> = plan_results
            .iter()
            .map(|p| {
                let mut r = ProbeResult::new(p.id.clone(), Outcome::Ok, "ok");
                if p.path == PathClass::NodeToNode
                    && p.from.node == "n2"
                    && p.to.port == Some(10250)
                {
                    r = ProbeResult::new(p.id.clone(), Outcome::Rejected, "ICMP admin prohibited");
                    r.icmp = Some(IcmpInfo {
                        icmp_type: 3,
                        code: 13,
                        from: Some(p.to.address),
                    });
                }
                ResultRecord {
                    unknown: None,
                    path: p.path,
                    from: p.from.clone(),
                    to: p.to.clone(),
                    result: r,
                }
            })
            .collect();
        let f = diagnose(&inv, &Results::of(&results), &[]);
        (results, f)
    };
    assert_every_failure_explained(&results, &f);
    assert_eq!(
        f[0].facts().places(),
        [Where::Host("n1".into())],
        "{:#?}",
        f[0]
    );
}

#[test]
fn a_tcp_port_dropped_by_the_receivers_own_firewall_says_host() {
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run(&inv, &|p| {
        let (_, to) = node_of(p);
        (p.to.protocol == Protocol::Tcp && p.to.port == Some(10250) && to == "n2").then(|| {
            (
                Outcome::Timeout,
                "reached n2's eth0 but n2 never answered: dropped by n2 itself".into(),
            )
        })
    });
    assert_eq!(kinds(&f), [Kind::FirewallGap], "{f:#?}");
    assert!(
        like(json!({"protocol": "tcp", "port": 10250, "to": ["n2"], "where": "host:n2"}))
            .matches(&f[0]),
        "{:#?}",
        f[0]
    );
    assert!(
        f[0].fix.iter().all(|l| l.starts_with("on n2 ")),
        "{:#?}",
        f[0].fix
    );
    // The same port dropped on the way: the network.
    let (_, f) = run(&inv, &|p| {
        let (_, to) = node_of(p);
        (p.to.protocol == Protocol::Tcp && p.to.port == Some(10250) && to == "n2").then(|| {
            (
                Outcome::Timeout,
                "never reached n2: dropped on the way".into(),
            )
        })
    });
    assert!(
        like(json!({"protocol": "tcp", "port": 10250, "where": "network"})).matches(&f[0]),
        "{:#?}",
        f[0]
    );
}

#[test]
fn a_port_blocked_between_every_pair_is_one_finding() {
    // (nodes in the cluster, nodes between which tcp/10250 is blocked, the words it must use)
    let cases: [(usize, &[&str], &str); 2] = [
        (
            5,
            &["n1", "n2", "n3", "n4", "n5"],
            "everywhere: between every pair of the 5 nodes",
        ),
        (5, &["n1", "n2", "n4"], "between every pair of n1, n2, n4"),
    ];
    for (n, among, words) in cases {
        let inv = inventory(n, 1, "flannel");
        let (_, f) = run(&inv, &move |p| {
            let (from, to) = node_of(p);
            (matches!(p.path, PathClass::NodeToNode | PathClass::PodToNode)
                && from != to
                && among.contains(&from)
                && among.contains(&to)
                && p.to.port == Some(10250))
            .then(timeout)
            .flatten()
        });
        assert_eq!(kinds(&f), [Kind::FirewallGap], "{among:?}: {f:#?}");
        assert!(f[0].summary.contains(words), "{}", f[0].summary);
        assert_eq!(f[0].facts().from(), among);
        assert_eq!(f[0].facts().to(), among);
    }
}

#[test]
fn a_zone_to_zone_block_is_one_finding_per_zone_pair() {
    // 100 nodes in 4 zones of 25; the kubelet port is blocked both ways between z0 and z1 and
    // between z1 and z2, and nowhere else.
    let inv = zones_consecutive(100, 4);
    let zone: HashMap<String, String> = inv
        .nodes
        .iter()
        .map(|n| (n.name.clone(), n.zone.clone().unwrap()))
        .collect();
    let (_, f) = run(&inv, &move |p| {
        let (from, to) = node_of(p);
        if p.path != PathClass::NodeToNode || p.to.port != Some(10250) {
            return None;
        }
        let mut pair = [zone[from].as_str(), zone[to].as_str()];
        pair.sort_unstable();
        matches!(pair, ["z0", "z1"] | ["z1", "z2"])
            .then(timeout)
            .flatten()
    });
    assert_eq!(kinds(&f), [Kind::FirewallGap, Kind::FirewallGap], "{f:#?}");
    let mut summaries: Vec<&str> = f.iter().map(|g| g.summary.as_str()).collect();
    summaries.sort_unstable();
    assert!(
        summaries[0].starts_with("tcp/10250 (the kubelet) is blocked between zone z0 (n1, "),
        "{summaries:#?}"
    );
    assert!(
        summaries[0].contains(" and zone z1 (n26, "),
        "{summaries:#?}"
    );
    assert!(
        summaries[1].contains("between zone z1 (n26, ")
            && summaries[1].contains(" and zone z2 (n51, "),
        "{summaries:#?}"
    );
    for g in &f {
        assert_eq!(g.facts().direction(), Some(crate::model::Direction::Both));
        assert_eq!(
            (g.facts().from().len(), g.facts().to().len()),
            (25, 25),
            "{g:#?}"
        );
        assert_eq!(
            g.evidence.len(),
            2 * 25 * 25,
            "every blocked pair is evidence"
        );
        // The zone's addresses are a few CIDR blocks, not 25 literals.
        let net = g.fix.iter().find(|l| l.contains("router")).unwrap();
        assert!(net.matches(", ").count() < 12, "{net}");
        assert!(net.contains(" between zone z"), "{net}");
    }
}

#[test]
fn a_zone_pair_blocked_one_way_among_two_zones_is_one_finding() {
    let inv = zones_consecutive(100, 2);
    let (_, f) = run(&inv, &|p| {
        let (from, to) = node_of(p);
        let n = |s: &str| s[1..].parse::<usize>().unwrap();
        (p.path == PathClass::NodeToNode && p.to.port == Some(10250) && n(from) <= 50 && n(to) > 50)
            .then(timeout)
            .flatten()
    });
    assert_eq!(kinds(&f), [Kind::FirewallGap], "{f:#?}");
    assert!(
        f[0].summary
            .starts_with("tcp/10250 (the kubelet) is blocked from zone z0 (n1, ")
            && f[0].summary.contains(" to zone z1 (n51, ")
            && f[0].summary.ends_with("; the reverse direction works"),
        "{}",
        f[0].summary
    );
    // And the same port blocked between every pair is still one finding, "everywhere".
    let (_, f) = run(&inv, &|p| {
        (p.path == PathClass::NodeToNode && p.to.port == Some(10250))
            .then(timeout)
            .flatten()
    });
    assert_eq!(kinds(&f), [Kind::FirewallGap], "{f:#?}");
    assert!(f[0].summary.contains("everywhere"), "{}", f[0].summary);
}

/// Whether a probe from `from` to `to` goes from n3 to the kubelet (tcp/10250) of n1 or n2.
fn kubelet_from_n3(from: &crate::model::AgentRef, to: &crate::model::Target) -> bool {
    from.node == "n3" && matches!(to.node.as_deref(), Some("n1" | "n2")) && to.port == Some(10250)
}

#[test]
fn a_port_blocked_over_ipv6_only_is_one_finding_naming_the_family() {
    let inv = inventory(3, 1, "flannel");
    let (results, f) = run_dual(&inv, &|p| {
        (kubelet_from_n3(&p.from, &p.to) && p.to.family() == crate::model::Family::Ipv6).then(
            || {
                (
                    Outcome::Timeout,
                    "never reached: dropped on the way".to_string(),
                )
            },
        )
    });
    assert_eq!(kinds(&f), [Kind::FirewallGap], "{f:#?}");
    let gap = &f[0];
    assert!(
        like(json!({"kind": "firewall-gap", "protocol": "tcp", "port": 10250, "from": ["n3"], "to": ["n1", "n2"], "direction": "one", "where": "network"})).matches(gap),
        "{gap:#?}"
    );
    assert_eq!(gap.family, Some(crate::model::Family::Ipv6), "{gap:#?}");
    assert!(
        gap.summary
            .starts_with("tcp/10250 (the kubelet) is blocked over IPv6 only, from n3 to n1, n2")
            && gap.summary.contains("; IPv4 works"),
        "{}",
        gap.summary
    );
    // The IPv4 probes of the same pairs and port that got through are the evidence that it is
    // IPv6's alone.
    let ok_v4: Vec<&str> = results
        .iter()
        .filter(|r| kubelet_from_n3(&r.from, &r.to) && r.to.family() == crate::model::Family::Ipv4)
        .map(|r| r.result.id.as_str())
        .collect();
    assert!(!ok_v4.is_empty());
    for id in ok_v4 {
        assert!(gap.evidence.iter().any(|e| e == id), "{id}: {gap:#?}");
    }
    // The fix speaks IPv6, compressed, and nothing of IPv4.
    assert!(
        gap.fix[0].contains("allow tcp/10250 from fd00:192:168:56::12 to fd00:192:168:56::10/127"),
        "{:#?}",
        gap.fix
    );
    assert!(
        !gap.fix.iter().any(|l| l.contains("192.168.56.")),
        "{:#?}",
        gap.fix
    );
}

#[test]
fn a_port_blocked_in_both_families_is_one_plain_gap_with_fixes_for_both() {
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run_dual(&inv, &|p| {
        kubelet_from_n3(&p.from, &p.to)
            .then(|| (Outcome::Timeout, "dropped by the receiver itself".into()))
    });
    assert_eq!(kinds(&f), [Kind::FirewallGap], "{f:#?}");
    let gap = &f[0];
    assert_eq!(gap.family, None, "no family claim: {gap:#?}");
    assert!(
        gap.summary
            .starts_with("tcp/10250 (the kubelet) is blocked from n3 to n1, n2")
            && !gap.summary.contains("IPv"),
        "{}",
        gap.summary
    );
    assert_eq!(gap.facts().to(), ["n1", "n2"]);
    for want in [
        "on n1 (nftables): nft insert rule inet filter input ip saddr { 192.168.56.12 } tcp dport 10250 accept",
        "on n1 (iptables): iptables -I INPUT -p tcp -s 192.168.56.12 --dport 10250 -j ACCEPT",
        "on n1 (nftables): nft insert rule inet filter input ip6 saddr { fd00:192:168:56::12 } tcp dport 10250 accept",
        "on n1 (ip6tables): ip6tables -I INPUT -p tcp -s fd00:192:168:56::12 --dport 10250 -j ACCEPT",
        "on n2 (firewalld): firewall-cmd --permanent --add-rich-rule='rule family=\"ipv6\" source address=\"fd00:192:168:56::12\" port port=\"10250\" protocol=\"tcp\" accept' && firewall-cmd --reload",
    ] {
        assert!(gap.fix.iter().any(|l| l == want), "{want}\n{:#?}", gap.fix);
    }
}

#[test]
fn ipv4_and_ipv6_blocked_for_different_pairs_are_two_findings_each_naming_its_family() {
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run_dual(&inv, &|p| {
        let (_, to) = node_of(p);
        let hit = match p.to.family() {
            crate::model::Family::Ipv6 => to == "n1",
            crate::model::Family::Ipv4 => to == "n2",
        };
        (kubelet_from_n3(&p.from, &p.to) && hit)
            .then(|| (Outcome::Timeout, "never reached: dropped".into()))
    });
    assert_eq!(kinds(&f), [Kind::FirewallGap, Kind::FirewallGap], "{f:#?}");
    let by_family: Vec<(Option<crate::model::Family>, &[String])> =
        f.iter().map(|g| (g.family, g.facts().to())).collect();
    assert!(
        by_family.contains(&(Some(crate::model::Family::Ipv6), &["n1".to_string()][..]))
            && by_family.contains(&(Some(crate::model::Family::Ipv4), &["n2".to_string()][..])),
        "{f:#?}"
    );
    assert!(
        f.iter()
            .all(|g| g.summary.contains(" only, ") && g.summary.contains(" works"))
    );
}
