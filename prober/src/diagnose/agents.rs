//! Agents that could not run: their paths are unknown, not failed.

use std::collections::{HashMap, HashSet};

use crate::model::{AgentKind, AgentStatus};

use super::context::{Ctx, failed};
use super::finding::{AgentMissing, Finding, Severity};

pub(super) fn agent_missing(
    ctx: &mut Ctx<'_>,
    findings: &mut Vec<Finding>,
    agents: &[AgentStatus],
) {
    // One pass over the results, whatever the number of missing agents: a cluster where every
    // agent is missing must not cost agents x results.
    let missing: HashSet<(&str, AgentKind)> = agents
        .iter()
        .filter(|a| !a.ran)
        .map(|a| (a.node.as_str(), a.agent))
        .collect();
    if missing.is_empty() {
        return;
    }
    let mut touched: HashMap<(&str, AgentKind), Vec<usize>> = HashMap::new();
    for (i, r) in ctx.results.iter().enumerate() {
        let from = (r.from.node.as_str(), r.from.agent);
        if r.is_unknown() && missing.contains(&from) {
            touched.entry(from).or_default().push(i);
        } else if failed(&r)
            && !ctx.explained.contains(&i)
            && let (Some(node), Some(agent)) = (r.to.node.as_deref(), r.to.agent)
            && missing.contains(&(node, agent))
        {
            touched.entry((node, agent)).or_default().push(i);
        }
    }
    for a in agents.iter().filter(|a| !a.ran) {
        let idx = touched
            .remove(&(a.node.as_str(), a.agent))
            .unwrap_or_default();
        let f = Finding::new(
            AgentMissing {
                nodes: vec![a.node.clone()],
            },
            Severity::Warning,
            format!(
                "no {} agent could run on {}: its paths are unknown, not failed ({})",
                a.agent.as_str(),
                a.node,
                a.detail
            ),
        );
        ctx.emit(findings, f, &[], &idx);
    }
}
