//! The Prometheus text exposition of a report (format 0.0.4), for `-o prometheus` and the
//! Pushgateway. Labels are bounded — path class, outcome, finding kind, severity, agent state,
//! node — never a node pair or an address, so the series grow at most linearly with the nodes.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::Report;
use crate::diagnose::{Kind, Severity};
use crate::model::PathClass;

/// Latency bucket bounds in seconds: 100 µs (a probe inside one host) to 5 s (past any probe
/// deadline worth having).
const BUCKETS: [f64; 15] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// Every finding kind, so that a kind that went away reads 0 rather than vanishing.
const KINDS: [Kind; 17] = [
    Kind::FirewallGap,
    Kind::BootstrapCycle,
    Kind::ServiceProxy,
    Kind::Overlay,
    Kind::Mtu,
    Kind::Dns,
    Kind::Credential,
    Kind::Misconfiguration,
    Kind::AgentMissing,
    Kind::PortConflict,
    Kind::Loss,
    Kind::NotListening,
    Kind::Partition,
    Kind::ProberPort,
    Kind::Policy,
    Kind::Starved,
    Kind::Unexplained,
];

/// A label value: backslash, double quote and newline escaped.
fn escape(v: &str) -> String {
    v.replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', r"\n")
}

struct Out(String);

impl Out {
    fn head(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}");
        let _ = writeln!(self.0, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                let _ = write!(self.0, "{k}=\"{}\"", escape(v));
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {value}");
    }
}

#[allow(clippy::cast_precision_loss)]
fn secs(micros: u64) -> f64 {
    micros as f64 / 1e6
}

/// The exposition of `report`, which finished at `finished` (seconds since the epoch).
#[must_use]
pub fn render(report: &Report, finished: u64) -> String {
    let mut out = Out(String::new());
    probes(&mut out, report);
    findings(&mut out, report);
    agents(&mut out, report);
    run(&mut out, report, finished);
    out.0
}

/// Probe results by path class and outcome; latency per path class; failures per node.
fn probes(out: &mut Out, report: &Report) {
    let mut by_outcome: BTreeMap<(PathClass, &'static str), u64> = BTreeMap::new();
    let mut rtts: BTreeMap<PathClass, Vec<u64>> = BTreeMap::new();
    let mut node_failed: BTreeMap<&str, u64> = BTreeMap::new();
    for r in &report.results {
        let outcome = if r.is_unknown() {
            "unknown"
        } else {
            r.result.outcome.as_str()
        };
        *by_outcome.entry((r.path, outcome)).or_default() += 1;
        let ok = rtts.entry(r.path).or_default();
        if r.result.outcome.is_ok()
            && !r.is_unknown()
            && let Some(m) = r.result.rtt_micros
        {
            ok.push(m);
        }
        if r.is_failed() {
            let mut nodes = BTreeSet::from([r.from.node.as_str()]);
            if let Some(n) = &r.to.node {
                nodes.insert(n.as_str());
            }
            for n in nodes {
                *node_failed.entry(n).or_default() += 1;
            }
        }
    }
    out.head(
        "prober_probes",
        "gauge",
        "Probes of the last run by path class and outcome (unknown: the probe never ran).",
    );
    for ((path, outcome), n) in &by_outcome {
        out.sample(
            "prober_probes",
            &[("path", path.as_str()), ("outcome", outcome)],
            n,
        );
    }

    // Latency of the successful probes, per path class.
    let name = "prober_probe_latency_seconds";
    out.head(
        name,
        "histogram",
        "Round-trip time of the last run's successful probes, per path class.",
    );
    for (path, micros) in &rtts {
        let p = path.as_str();
        for le in BUCKETS {
            let n = micros.iter().filter(|&&m| secs(m) <= le).count();
            out.sample(
                &format!("{name}_bucket"),
                &[("path", p), ("le", &le.to_string())],
                n,
            );
        }
        out.sample(
            &format!("{name}_bucket"),
            &[("path", p), ("le", "+Inf")],
            micros.len(),
        );
        let sum: u64 = micros.iter().sum();
        out.sample(&format!("{name}_sum"), &[("path", p)], secs(sum));
        out.sample(&format!("{name}_count"), &[("path", p)], micros.len());
    }

    // Failed probes per node (from or to it): which node to look at, one series per node.
    out.head(
        "prober_node_failed_probes",
        "gauge",
        "Failed probes of the last run that start or end on the node.",
    );
    let mut nodes: BTreeSet<&str> = report.agents.iter().map(|a| a.node.as_str()).collect();
    nodes.extend(report.results.iter().map(|r| r.from.node.as_str()));
    for n in nodes {
        out.sample(
            "prober_node_failed_probes",
            &[("node", n)],
            node_failed.get(n).copied().unwrap_or(0),
        );
    }
}

/// Findings by kind and severity; every kind, so that a resolved one reads 0.
fn findings(out: &mut Out, report: &Report) {
    let mut findings: BTreeMap<(String, &'static str), u64> = BTreeMap::new();
    for k in KINDS {
        for s in ["error", "warning"] {
            findings.insert((super::kebab(k), s), 0);
        }
    }
    for f in &report.findings {
        let s = match f.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        *findings.entry((super::kebab(f.kind()), s)).or_default() += 1;
    }
    out.head(
        "prober_findings",
        "gauge",
        "Findings of the last run's diagnosis by kind and severity.",
    );
    for ((kind, severity), n) in &findings {
        out.sample(
            "prober_findings",
            &[("kind", kind), ("severity", severity)],
            n,
        );
    }
}

fn agents(out: &mut Out, report: &Report) {
    let ran = report.agents.iter().filter(|a| a.ran).count();
    out.head(
        "prober_agents",
        "gauge",
        "Agents of the last run by state (missing: could not be started or reached).",
    );
    out.sample("prober_agents", &[("state", "ran")], ran);
    out.sample(
        "prober_agents",
        &[("state", "missing")],
        report.agents.len() - ran,
    );
}

/// When the run finished, how long it took, how it ended.
fn run(out: &mut Out, report: &Report, finished: u64) {
    let s = &report.summary;
    out.head(
        "prober_nodes",
        "gauge",
        "Nodes in the last run's inventory.",
    );
    out.sample("prober_nodes", &[], s.nodes);
    out.head(
        "prober_run_timestamp_seconds",
        "gauge",
        "When the last run finished, in seconds since the epoch.",
    );
    out.sample("prober_run_timestamp_seconds", &[], finished);
    out.head(
        "prober_run_duration_seconds",
        "gauge",
        "How long the last run probed.",
    );
    #[allow(clippy::cast_precision_loss)]
    out.sample(
        "prober_run_duration_seconds",
        &[],
        s.duration_millis as f64 / 1000.0,
    );
    out.head(
        "prober_run_interrupted",
        "gauge",
        "1 when the last run was interrupted before it finished.",
    );
    out.sample("prober_run_interrupted", &[], u8::from(s.interrupted));
    out.head(
        "prober_run_exit_code",
        "gauge",
        "The last run's exit code (0 no failures, 1 failures, 3 agents missing).",
    );
    out.sample("prober_run_exit_code", &[], s.exit_code);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    #[test]
    fn escapes_label_values() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn counts_outcomes_latency_findings_and_agents() {
        let report = fixture::flannel_gap_report();
        let text = render(&report, 1_700_000_000);
        assert!(
            text.contains("prober_run_timestamp_seconds 1700000000\n"),
            "{text}"
        );
        let failed_p2p = report
            .results
            .iter()
            .filter(|r| r.path == PathClass::PodToPod && r.is_failed())
            .count();
        assert!(failed_p2p > 0);
        let timeouts = text
            .lines()
            .find(|l| l.starts_with("prober_probes{path=\"pod-to-pod\",outcome=\"timeout\"}"))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(timeouts.ends_with(&format!(" {failed_p2p}")), "{timeouts}");
        assert!(text.contains("prober_findings{kind=\"firewall-gap\",severity=\"error\"} 1\n"));
        assert!(text.contains("prober_findings{kind=\"mtu\",severity=\"warning\"} 0\n"));
        assert!(text.contains("prober_agents{state=\"ran\"}"));
        assert!(
            text.contains("prober_probe_latency_seconds_bucket{path=\"pod-to-pod\",le=\"+Inf\"}")
        );
        // Buckets are cumulative.
        let counts: Vec<u64> = text
            .lines()
            .filter(|l| l.starts_with("prober_probe_latency_seconds_bucket{path=\"pod-to-pod\""))
            .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
            .collect();
        assert_eq!(counts.len(), BUCKETS.len() + 1);
        assert!(counts.windows(2).all(|w| w[0] <= w[1]), "{counts:?}");
        // No pair and no address in any label.
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            assert!(
                !l.contains("->") && !l.contains("10.244.") && !l.contains("192.168."),
                "{l}"
            );
        }
        let n3 = text
            .lines()
            .find(|l| l.starts_with("prober_node_failed_probes{node=\"n3\"}"))
            .unwrap();
        assert!(!n3.ends_with(" 0"), "n3 is the firewalled node: {n3}");
    }
}
