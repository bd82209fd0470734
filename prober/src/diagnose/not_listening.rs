//! Not listening: a TCP port refused (a reset, or ICMP port-unreachable from the node itself) on
//! a path between hosts that otherwise reach each other. The port is closed, not filtered:
//! whatever should listen there (the kubelet, etcd, a CNI agent) is down on that node. One
//! finding per node and port; never a firewall gap.

use std::collections::{BTreeMap, HashSet};

use probe_proto::Outcome;

use crate::model::{PathClass, Protocol};

use super::context::{Ctx, failed, list, names_text};
use super::finding::{Finding, Kind, Severity};

pub(super) fn not_listening(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) {
    // Hosts that reach each other: any working exchange between them.
    let mut reachable: HashSet<(u32, u32)> = HashSet::new();
    for r in ctx.results.iter().filter(|r| r.result.outcome.is_ok()) {
        if let (Some(a), Some(b)) = (ctx.from(&r), ctx.to(&r)) {
            reachable.insert((a, b));
        }
    }
    let mut refused: BTreeMap<(u32, u16), Vec<usize>> = BTreeMap::new();
    for (i, r) in ctx.results.iter().enumerate() {
        if ctx.explained.contains(&i)
            || !failed(&r)
            || r.result.outcome != Outcome::Refused
            || r.to.protocol != Protocol::Tcp
        {
            continue;
        }
        let host_path = matches!(
            r.path,
            PathClass::NodeToNode | PathClass::PodToNode | PathClass::NodeToApiserver
        );
        let (Some(a), Some(b), Some(port)) = (ctx.from(&r), ctx.to(&r), r.to.port) else {
            continue;
        };
        if host_path && (a == b || reachable.contains(&(a, b))) {
            refused.entry((b, port)).or_default().push(i);
        }
    }
    for ((node, port), ev) in refused {
        let name = ctx.name(node).to_string();
        let what = if port == 10250 {
            " (the kubelet)"
        } else if ctx
            .api_backends
            .iter()
            .any(|&(n, p)| n == node && p == port)
        {
            " (the API server)"
        } else {
            ""
        };
        let mut from: Vec<u32> = ev
            .iter()
            .filter_map(|&i| ctx.from(&ctx.results.at(i)))
            .collect();
        from.sort_unstable();
        from.dedup();
        let from = list(ctx, &from);
        let mut f = Finding::new(
            Kind::NotListening,
            Severity::Error,
            format!(
                "nothing listens on tcp/{port}{what} on {name}: refused to {} although {name} answers them otherwise — the service is down, not blocked",
                names_text(&from)
            ),
        );
        f.protocol = Some(Protocol::Tcp);
        f.port = Some(port);
        f.from = from;
        f.to = vec![name.clone()];
        f.nodes = vec![name.clone()];
        f.fix.push(format!(
            "on {name}: check what should listen on tcp/{port}{what} (ss -ltnp 'sport = :{port}'; its unit or pod logs), or a firewall rule that rejects with a TCP reset"
        ));
        ctx.emit(findings, f, &ev, &[]);
    }
}
