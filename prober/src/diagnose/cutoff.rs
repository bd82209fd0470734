//! Partitioned nodes: a node that nothing reaches and that reaches nothing is one `partition`
//! finding, not a firewall gap per port. Only what was probed counts: a partition needs failures
//! across distinct underlay ports, protocols and path classes, so a narrowed run (`--paths
//! overlay`, `--paths dns`) names the port that fails instead.

use std::collections::HashSet;
use std::net::IpAddr;

use crate::model::{Family, PathClass, Protocol};

use super::context::{Ctx, failed};
use super::finding::{Finding, Partition, PartitionState, Severity};

/// A node that nothing reaches and that reaches nothing (beyond itself) is down or cut off: one
/// finding for all of its paths, not a gap per port.
pub(super) fn unreachable_nodes(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) {
    let n = ctx.inv.nodes.len();
    let mut ok = vec![false; n];
    let mut bad: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, r) in ctx.results.iter().enumerate() {
        let (Some(a), to) = (ctx.from(&r), ctx.to(&r)) else {
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
            } else if failed(&r) {
                bad[e as usize].push(i);
            }
        }
    }
    for x in 0..n {
        if ok[x] || bad[x].is_empty() || n < 2 || !probed_widely(ctx, &bad[x]) {
            continue;
        }
        let name = ctx.inv.nodes[x].name.clone();
        let idx = std::mem::take(&mut bad[x]);
        let x32 = u32::try_from(x).unwrap_or(u32::MAX);
        let (ev, cons): (Vec<usize>, Vec<usize>) = idx
            .into_iter()
            .filter(|i| !ctx.explained.contains(i))
            .partition(|&i| {
                let r = &ctx.results.at(i);
                matches!(r.path, PathClass::NodeToNode | PathClass::NodeToApiserver)
                    || Ctx::is_vxlan(r)
                    || (r.path == PathClass::PodToNode && ctx.to(r) == Some(x32))
            });
        let peers = if ctx.sampled {
            " from its sampled peers"
        } else {
            ""
        };
        let mut f = Finding::new(
            Partition {
                state: PartitionState::Unreachable,
                nodes: vec![name.clone()],
            },
            Severity::Error,
            format!(
                "{name} is cut off{peers}: no probe to or from it gets through on any port (the node is down, partitioned, or dropping everything)"
            ),
        );
        // Its address of the first family it has (an IPv6-only node has no IPv4 one).
        let ping = match Family::ALL.into_iter().find_map(|f| ctx.host_addr(x32, f)) {
            Some(a @ IpAddr::V6(_)) => format!(" (ping -6 {a})"),
            Some(a) => format!(" (ping {a})"),
            None => String::new(),
        };
        f.fix.push(format!("check that {name} is up and that its uplink and the network around it pass traffic at all{ping}"));
        ctx.emit(findings, f, &ev, &cons);
    }
}

/// Whether the failures span several path classes, protocols and underlay ports: one kind of
/// probe failing everywhere (`--paths overlay`: one encapsulation port; `--paths dns`: no
/// underlay port at all) says something about that probe, not that the node is cut off. Ports
/// count only where a probe measured one directly (host to host, or the crafted encapsulation):
/// pods failing over the overlay all ride the overlay's one port.
pub(super) fn probed_widely(ctx: &Ctx<'_>, idx: &[usize]) -> bool {
    let pods_ok = ctx.pods_ok();
    let classes: HashSet<PathClass> = idx.iter().map(|&i| ctx.results.at(i).path).collect();
    let protocols: HashSet<Protocol> = idx.iter().map(|&i| ctx.results.at(i).to.protocol).collect();
    let ports: HashSet<(bool, u16)> = idx
        .iter()
        .filter_map(|&i| ctx.direct(&ctx.results.at(i), &pods_ok))
        .map(|l| (l.udp, l.port))
        .collect();
    classes.len() >= 2 && protocols.len() >= 2 && ports.len() >= 2
}
