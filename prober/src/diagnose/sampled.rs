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

/// Qualifies every finding drawn from probes between nodes with what was sampled.
pub fn qualify(findings: &mut [Finding], sample: &Sampled) {
    let note = format!(
        " [sampled: {} of {} node pairs, each node with at least {} peers each way; pairs outside the sample were not probed]",
        sample.pairs, sample.possible_pairs, sample.peers
    );
    for f in findings
        .iter_mut()
        .filter(|f| BETWEEN_NODES.contains(&f.kind))
    {
        // "everywhere" and "every pair" would claim pairs that were never probed.
        f.summary = f
            .summary
            .replace(
                "everywhere: between every pair of",
                "on every sampled pair of",
            )
            .replace("between every pair of", "between every sampled pair of")
            .replace(
                "is cut off: no probe",
                "is cut off from its sampled peers: no probe",
            );
        f.summary.push_str(&note);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::finding::Severity;

    fn sampled() -> Sampled {
        Sampled {
            peers: 3,
            pairs: 3100,
            possible_pairs: 999_000,
            zones: vec!["a".into(), "b".into()],
            sampled_paths: crate::plan::sample::SAMPLED_PATHS.to_vec(),
        }
    }

    #[test]
    fn claims_between_nodes_speak_only_for_the_sampled_pairs() {
        let mut f = vec![
            Finding::new(
                Kind::FirewallGap,
                Severity::Error,
                "udp/8472 is blocked everywhere: between every pair of the 1000 nodes, in both directions",
            ),
            Finding::new(
                Kind::Partition,
                Severity::Error,
                "n7 is cut off: no probe to or from it gets through on any port",
            ),
            Finding::new(Kind::Dns, Severity::Error, "cluster DNS does not answer"),
        ];
        qualify(&mut f, &sampled());
        assert!(!f[0].summary.contains("everywhere"), "{}", f[0].summary);
        assert!(
            f[0].summary
                .contains("on every sampled pair of the 1000 nodes")
        );
        assert!(f[0].summary.contains("3100 of 999000 node pairs"));
        assert!(
            f[1].summary.contains("cut off from its sampled peers"),
            "{}",
            f[1].summary
        );
        // DNS was probed from every node in full: nothing to qualify.
        assert_eq!(f[2].summary, "cluster DNS does not answer");
    }
}
