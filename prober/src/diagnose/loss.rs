//! Packet loss: paths that got through on some attempts and not on others. One warning naming
//! the nodes where the lost attempts concentrate, with the measured rate; never a firewall gap,
//! since a blocked path fails every attempt.

use std::collections::BTreeMap;

use super::context::{Ctx, failed, names_text};
use super::finding::{Finding, Loss, LossState, Severity};
use crate::model::Record;

/// A node is named when the loss on its paths is at least this many times the loss elsewhere.
const CONCENTRATION: f64 = 2.0;

/// Lost and total attempts of one result: a result never retried ran once.
fn attempts(r: &Record<'_>) -> (u64, u64) {
    let n = u64::from(r.result.attempts.unwrap_or(1));
    let ok = u64::from(
        r.result
            .ok_attempts
            .unwrap_or(u32::from(r.result.outcome.is_ok())),
    );
    (n.saturating_sub(ok), n)
}

fn percent(lost: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        #[allow(clippy::cast_precision_loss)] // counts far below 2^52
        let p = lost as f64 * 100.0 / total as f64;
        p
    }
}

pub(super) fn loss(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) {
    let lossy: Vec<usize> = ctx
        .results
        .iter()
        .enumerate()
        .filter(|(_, r)| r.result.is_intermittent())
        .map(|(i, _)| i)
        .collect();
    if lossy.is_empty() {
        return;
    }
    // Per node, over every path that ran and got through at least once (a path that failed every
    // attempt is blocked, not lossy): lost and total attempts.
    let mut per_node: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    let (mut lost_all, mut total_all) = (0, 0);
    for r in ctx.results.iter().filter(|r| r.result.outcome.is_ok()) {
        let (lost, n) = attempts(&r);
        lost_all += lost;
        total_all += n;
        let ends = [
            ctx.from(&r),
            ctx.to(&r).filter(|t| Some(*t) != ctx.from(&r)),
        ];
        for e in ends.into_iter().flatten() {
            let slot = per_node.entry(e).or_default();
            slot.0 += lost;
            slot.1 += n;
        }
    }
    // A node where loss concentrates loses at least twice as much on its own paths as the rest
    // of the cluster does on the others; when no node stands out, the loss is everywhere.
    let mut named: Vec<(u32, f64)> = per_node
        .iter()
        .filter(|(_, (lost, _))| *lost > 0)
        .map(|(&n, &(lost, total))| {
            let own = percent(lost, total);
            let rest = percent(lost_all - lost, total_all - total);
            (n, own, rest)
        })
        .filter(|&(_, own, rest)| own >= rest * CONCENTRATION)
        .map(|(n, own, _)| (n, own))
        .collect();
    let everywhere = named.is_empty();
    if everywhere {
        named = per_node
            .iter()
            .map(|(&n, &(lost, total))| (n, percent(lost, total)))
            .collect();
    }
    named.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    // The finding's node list in inventory order; the sentence in order of loss.
    let mut in_order: Vec<u32> = named.iter().map(|(n, _)| *n).collect();
    in_order.sort_unstable();
    let nodes: Vec<String> = in_order.iter().map(|&n| ctx.name(n).to_string()).collect();
    let where_ = if everywhere {
        "spread over every node's paths alike".to_string()
    } else {
        let each: Vec<String> = named
            .iter()
            .map(|(n, r)| format!("{} ({r:.1} %)", ctx.name(*n)))
            .collect();
        format!("concentrated on {}", names_text(&each))
    };
    let summary = format!(
        "packet loss: {} path(s) got through only on some attempts; {lost_all} of {total_all} attempts lost ({:.1} %), {where_}",
        lossy.len(),
        percent(lost_all, total_all),
    );
    // A path that failed every attempt between two nodes whose other probes of the same kind got
    // through, in a run that loses packets, is the loss's too (three lost tries in a row is
    // rare, not impossible): its consequence, never a cause of its own. Gaps, refusals and the
    // other rules have claimed theirs before this runs.
    let worked = ctx.lossy_ends().unwrap_or_default();
    let stray: Vec<usize> = ctx
        .results
        .iter()
        .enumerate()
        .filter(|(i, r)| failed(r) && !ctx.explained.contains(i))
        .filter(|(_, r)| ctx.from(r).is_some() && worked.contains(&ctx.ends(r)))
        .map(|(i, _)| i)
        .collect();
    let fix = format!(
        "look for drops and errors on the links of {} (ip -s link; the switch ports; a saturated uplink): nothing is blocked, so open no firewall port for this",
        names_text(&nodes)
    );
    let mut f = Finding::new(
        Loss {
            state: LossState::Intermittent,
            nodes,
        },
        Severity::Warning,
        summary,
    );
    f.fix.push(fix);
    ctx.emit(findings, f, &lossy, &stray);
}
