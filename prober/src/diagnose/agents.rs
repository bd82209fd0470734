//! Agents that could not run: their paths are unknown, not failed.

use crate::model::AgentStatus;

use super::context::{Ctx, failed};
use super::finding::{Finding, Kind, Severity};

pub(super) fn agent_missing(
    ctx: &mut Ctx<'_>,
    findings: &mut Vec<Finding>,
    agents: &[AgentStatus],
) {
    for a in agents.iter().filter(|a| !a.ran) {
        let idx: Vec<usize> = ctx
            .results
            .iter()
            .enumerate()
            .filter(|(i, r)| {
                (r.from.node == a.node && r.from.agent == a.agent && r.is_unknown())
                    || (failed(r)
                        && !ctx.explained.contains(i)
                        && r.to.node.as_deref() == Some(&a.node)
                        && r.to.agent == Some(a.agent))
            })
            .map(|(i, _)| i)
            .collect();
        let mut f = Finding::new(
            Kind::AgentMissing,
            Severity::Warning,
            format!(
                "no {} agent could run on {}: its paths are unknown, not failed ({})",
                a.agent.as_str(),
                a.node,
                a.detail
            ),
        );
        f.nodes = vec![a.node.clone()];
        ctx.emit(findings, f, &[], &idx);
    }
}
