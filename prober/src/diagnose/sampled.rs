//! A sampled matrix (`--sample`) probed only some node pairs: what the diagnosis found between
//! nodes speaks for those pairs alone. A gap "everywhere" is a gap on every sampled pair, a node
//! cut off is cut off from the peers it was probed with; each such finding says so, so no one
//! reads a claim about pairs that were never probed.

use crate::plan::sample::Sampled;

use super::finding::{Finding, Kind};

/// The kinds whose claims are drawn from probes between nodes.
const BETWEEN_NODES: [Kind; 5] = [
    Kind::FirewallGap,
    Kind::Partition,
    Kind::Loss,
    Kind::Overlay,
    Kind::Mtu,
];

/// Says on every finding drawn from probes between nodes what was sampled. The rules themselves
/// word their claims for the sampled pairs (`diagnose_sampled`); this adds how many pairs those are.
pub fn qualify(findings: &mut [Finding], sample: &Sampled) {
    let note = format!(
        " [sampled: {} of {} node pairs, each node with at least {} peers each way; pairs outside the sample were not probed]",
        sample.pairs, sample.possible_pairs, sample.peers
    );
    for f in findings
        .iter_mut()
        .filter(|f| BETWEEN_NODES.contains(&f.kind()))
    {
        f.summary.push_str(&note);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::finding::{Dns, DnsState, FirewallGap, Severity};
    use crate::model::{AgentKind, AgentRef, PathClass, Protocol, ResultRecord, Results, Target};
    use probe_proto::{Outcome, ProbeResult};

    fn sampled() -> Sampled {
        Sampled {
            peers: 3,
            pairs: 3100,
            possible_pairs: 999_000,
            zones: vec!["a".into(), "b".into()],
            sampled_paths: crate::plan::sample::SAMPLED_PATHS.to_vec(),
            turn: 0,
            runs: 1,
        }
    }

    #[test]
    fn findings_between_nodes_say_what_was_sampled() {
        let mut f = vec![
            Finding::new(
                FirewallGap {
                    protocol: Protocol::Udp,
                    port: Some(8472),
                    from: Vec::new(),
                    to: Vec::new(),
                    direction: crate::model::Direction::Both,
                    where_: Vec::new(),
                    inferred: false,
                    hop: None,
                },
                Severity::Error,
                "udp/8472 is blocked",
            ),
            Finding::new(
                Dns {
                    state: DnsState::NoAnswer,
                    nodes: Vec::new(),
                },
                Severity::Error,
                "cluster DNS does not answer",
            ),
        ];
        qualify(&mut f, &sampled());
        assert!(
            f[0].summary
                .ends_with("[sampled: 3100 of 999000 node pairs, each node with at least 3 peers each way; pairs outside the sample were not probed]"),
            "{}",
            f[0].summary
        );
        // DNS was probed from every node in full: nothing to qualify.
        assert_eq!(f[1].summary, "cluster DNS does not answer");
    }

    /// Every node's kubelet port is dropped from every other node.
    fn kubelet_blocked(inv: &crate::inventory::Inventory) -> Vec<ResultRecord> {
        let mut out = Vec::new();
        for a in &inv.nodes {
            for b in inv.nodes.iter().filter(|b| b.name != a.name) {
                for (port, outcome) in [(10250, Outcome::Timeout), (9917, Outcome::Ok)] {
                    out.push(ResultRecord {
                        path: PathClass::NodeToNode,
                        from: AgentRef {
                            node: a.name.clone(),
                            agent: AgentKind::Host,
                        },
                        to: Target {
                            node: Some(b.name.clone()),
                            agent: Some(AgentKind::Host),
                            service: None,
                            address: std::net::IpAddr::V4(b.address),
                            port: Some(port),
                            protocol: Protocol::Tcp,
                        },
                        unknown: None,
                        result: ProbeResult::new(
                            format!("{}->{}:{port}", a.name, b.name),
                            outcome,
                            "",
                        ),
                    });
                }
            }
        }
        out
    }

    #[test]
    fn a_sampled_run_claims_only_the_sampled_pairs() {
        let inv = crate::testutil::inventory(4, 1, "flannel");
        let results = kubelet_blocked(&inv);
        let full = crate::diagnose::diagnose(&inv, &Results::of(&results), &[]);
        let gap = |f: &[Finding]| {
            f.iter()
                .find(|f| f.kind() == Kind::FirewallGap)
                .map(|f| f.summary.clone())
                .unwrap_or_default()
        };
        assert!(
            gap(&full).contains("everywhere: between every pair of the 4 nodes"),
            "{}",
            gap(&full)
        );
        let sampled =
            crate::diagnose::diagnose_sampled(&inv, &Results::of(&results), &[], Some(&sampled()));
        assert!(
            gap(&sampled).contains("on every sampled pair of the 4 nodes"),
            "{}",
            gap(&sampled)
        );
        assert!(!gap(&sampled).contains("everywhere"), "{}", gap(&sampled));
    }
}
