//! Cut-off nodes: a node that nothing reaches and that reaches nothing is one finding, not a
//! firewall gap per port.

use crate::model::PathClass;

use super::context::{Ctx, failed};
use super::finding::{Finding, Kind, Severity};

/// A node that nothing reaches and that reaches nothing (beyond itself) is down or cut off: one
/// finding for all of its paths, not a gap per port.
pub(super) fn unreachable_nodes(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) {
    let n = ctx.inv.nodes.len();
    let mut ok = vec![false; n];
    let mut bad: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, r) in ctx.results.iter().enumerate() {
        let (Some(a), to) = (ctx.from(r), ctx.to(r)) else {
            continue;
        };
        // Only traffic that leaves the source node counts.
        let ends: Vec<u32> = match to {
            Some(b) if b != a => vec![a, b],
            Some(_) => continue,
            // Services and the DNS Service live elsewhere: they speak for the source only.
            None => vec![a],
        };
        for e in ends {
            if r.result.outcome.is_ok() {
                ok[e as usize] = true;
            } else if failed(r) {
                bad[e as usize].push(i);
            }
        }
    }
    for x in 0..n {
        if ok[x] || bad[x].is_empty() || n < 2 {
            continue;
        }
        let name = ctx.inv.nodes[x].name.clone();
        let idx = std::mem::take(&mut bad[x]);
        let x32 = u32::try_from(x).unwrap_or(u32::MAX);
        let (ev, cons): (Vec<usize>, Vec<usize>) = idx
            .into_iter()
            .filter(|i| !ctx.explained.contains(i))
            .partition(|&i| {
                let r = &ctx.results[i];
                matches!(r.path, PathClass::NodeToNode | PathClass::NodeToApiserver)
                    || Ctx::is_vxlan(r)
                    || (r.path == PathClass::PodToNode && ctx.to(r) == Some(x32))
            });
        let mut f = Finding::new(
            Kind::Unexplained,
            Severity::Error,
            format!(
                "{name} is cut off: no probe to or from it gets through on any port (the node is down, partitioned, or dropping everything)"
            ),
        );
        f.state = Some("unreachable".into());
        f.nodes = vec![name.clone()];
        f.fix.push(format!("check that {name} is up and that its uplink and the network around it pass traffic at all (ping {})", ctx.inv.nodes[x].address));
        ctx.emit(findings, f, &ev, &cons);
    }
}
