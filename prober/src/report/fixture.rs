//! Reports for the renderings' tests: the planner's real matrix over a synthetic inventory, every
//! probe answered, those crossing one firewalled node's overlay timed out.

use probe_proto::{Outcome, ProbeResult};

use super::Report;
use crate::diagnose::finding::FirewallGap;
use crate::diagnose::{Finding, Kind, Severity};
use crate::model::{AgentKind, Direction, PathClass, ResultRecord};
use crate::plan::{Filter, plan};
use crate::run::RunOutput;
use crate::testutil::inventory;

/// A report of `nodes` nodes in which every path through `cut`'s overlay times out (none when
/// `cut` is `None`), with the firewall-gap finding the lab's flannel-8472 scenario produces.
pub fn report(nodes: usize, cut: Option<&str>) -> Report {
    let inv = inventory(nodes, 1, "flannel");
    let results: Vec<ResultRecord> = plan(&inv, &Filter::default())
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let to = p.to.node.as_deref().unwrap_or("");
            let crosses = cut.is_some_and(|c| (p.from.node == c) != (to == c) && !to.is_empty());
            let overlay = matches!(
                p.path,
                PathClass::PodToPod | PathClass::NodeToPod | PathClass::PodToNode
            ) && (p.from.agent == AgentKind::Pod
                || p.to.agent == Some(AgentKind::Pod));
            let mut result = if crosses && overlay {
                ProbeResult::new(
                    p.id.to_string(),
                    Outcome::Timeout,
                    "no answer within 2000 ms",
                )
            } else {
                ProbeResult::new(p.id.to_string(), Outcome::Ok, "ok")
            };
            if result.outcome.is_ok() {
                result.rtt_micros = Some(200 + u64::try_from(i % 97).unwrap_or(0) * 40);
            }
            p.record(None, result)
        })
        .collect();
    let agents = inv.every_agent_ran();
    let run = RunOutput {
        results: results.into(),
        agents,
        interrupted: false,
        elapsed: std::time::Duration::from_millis(1234),
    };
    let mut report = Report::new(run, &inv);
    report.findings.retain(|f| f.kind() != Kind::BootstrapCycle);
    if let Some(c) = cut {
        let gap = FirewallGap {
            protocol: crate::model::Protocol::Udp,
            port: Some(8472),
            from: vec![c.to_string()],
            to: inv
                .nodes
                .iter()
                .map(|n| n.name.clone())
                .filter(|n| n != c)
                .collect(),
            direction: Direction::Both,
            where_: Vec::new(),
            inferred: false,
            hop: None,
        };
        let mut f = Finding::new(
            gap,
            Severity::Error,
            format!("udp/8472 (VXLAN) is blocked between {c} and every other node, both ways"),
        );
        f.fix = vec![format!(
            "nft add rule inet filter input udp dport 8472 accept  # on {c}"
        )];
        report.findings = vec![f];
    }
    report
}

/// The healthy twin of [`flannel_gap_report`].
pub fn healthy(nodes: usize) -> Report {
    report(nodes, None)
}

/// Three nodes, n3 cut off on the overlay.
pub fn flannel_gap_report() -> Report {
    report(3, Some("n3"))
}
