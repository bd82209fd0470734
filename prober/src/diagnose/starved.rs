//! Agents kept from running: probes that timed out on every attempt while their agent was
//! starved (a CPU hog, a throttled cgroup) measured the scheduler. They are unknown, not
//! failed; one warning per node says so, with the longest stall, so a loaded node is never read
//! as a lossy or firewalled one.

use std::collections::BTreeMap;

use super::context::Ctx;
use super::finding::{Finding, Severity, Starved};
use crate::model::Unknown;

pub(super) fn starved(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) {
    // Per sending node: its starved results and the longest stall among them.
    let mut per_node: BTreeMap<String, (Vec<usize>, u32)> = BTreeMap::new();
    for (i, r) in ctx.results.iter().enumerate() {
        if r.unknown != Some(Unknown::Starved) {
            continue;
        }
        let slot = per_node.entry(r.from.node.clone()).or_default();
        slot.0.push(i);
        slot.1 = slot.1.max(r.result.stalled_ms.unwrap_or(0));
    }
    for (node, (idx, longest)) in per_node {
        let mut f = Finding::new(
            Starved {
                nodes: vec![node.clone()],
            },
            Severity::Warning,
            format!(
                "the agent on {node} was kept from running (up to {longest} ms) while {} of its probe(s) waited, on every attempt: those paths are unknown, not failed",
                idx.len()
            ),
        );
        f.fix.push(format!(
            "on {node}: find what takes the CPU (top; the agent pod's CPU limit and its throttling in cpu.stat), then run again"
        ));
        f.notes.push(
            "a timer that fires late measures the scheduler, not the network: nothing here says a path is blocked or lossy".into(),
        );
        ctx.emit(findings, f, &[], &idx);
    }
}
