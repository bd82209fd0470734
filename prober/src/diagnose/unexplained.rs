//! The rest: failed results no other rule explains, grouped by path class and outcome, so that
//! every failure ends up in some finding.

use std::collections::{BTreeMap, BTreeSet};

use probe_proto::Outcome;

use crate::model::PathClass;

use super::context::{Ctx, failed};
use super::finding::{Finding, Severity, Unexplained};

pub(super) fn unexplained(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) {
    let mut groups: BTreeMap<(PathClass, Outcome), Vec<usize>> = BTreeMap::new();
    for (i, r) in ctx.results.iter().enumerate() {
        if failed(&r) && !ctx.explained.contains(&i) {
            groups
                .entry((r.path, r.result.outcome))
                .or_default()
                .push(i);
        }
    }
    for ((path, outcome), idx) in groups {
        let first = &ctx.results.at(idx[0]).result.detail;
        let nodes: BTreeSet<String> = idx
            .iter()
            .flat_map(|&i| {
                [
                    Some(ctx.results.at(i).from.node.clone()),
                    ctx.results.at(i).to.node.clone(),
                ]
            })
            .flatten()
            .collect();
        let f = Finding::new(
            Unexplained {
                nodes: nodes.into_iter().collect(),
            },
            Severity::Error,
            format!(
                "{} {path} probe(s) fail with {outcome} and no finding explains them; first: {first}",
                idx.len()
            ),
        );
        ctx.emit(findings, f, &idx, &[]);
    }
}
