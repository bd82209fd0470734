//! Not listening: a TCP port refused (a reset, or ICMP port-unreachable from the node itself) on
//! a path between hosts that otherwise reach each other, and to every sender (a port that lets
//! some senders in is served: diagnose/selective.rs). The port is closed, not filtered: whatever
//! should listen there (the kubelet, etcd, a CNI agent) is down on that node. One finding per
//! node and port, with what goes through that port as its consequences; never a firewall gap.

use std::collections::{BTreeMap, HashSet};

use probe_proto::Outcome;

use crate::model::{Family, PathClass, Protocol};
use crate::plan::optional_cni_ports;

use super::context::{Ctx, failed, list, names_text};
use super::finding::{Finding, NotListening, Severity};

pub(super) fn not_listening(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) {
    // Hosts that reach each other: any working exchange between them. And the (node, port,
    // family) some TCP probe connected to: a port refused over one family only is served over
    // the other.
    let mut reachable: HashSet<(u32, u32)> = HashSet::new();
    let mut served: HashSet<(u32, u16, Family)> = HashSet::new();
    for r in ctx.results.iter().filter(|r| r.result.outcome.is_ok()) {
        if let (Some(a), Some(b)) = (ctx.from(&r), ctx.to(&r)) {
            reachable.insert((a, b));
            if let (Protocol::Tcp, Some(port)) = (r.to.protocol, r.to.port) {
                served.insert((b, port, r.to.family()));
            }
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
    // A port only some nodes serve, on a node the inventory says nothing about: nobody knows it
    // should listen there, so its silence is a note, not an error: one per port.
    let optional_port = |node: u32, port: u16| {
        optional_cni_ports(ctx.inv.cluster.cni).contains(&port)
            && ctx.inv.nodes[node as usize].serves.is_none()
    };
    let mut notes: BTreeMap<u16, (Vec<u32>, Vec<usize>)> = BTreeMap::new();
    let mut errors = Vec::new();
    for ((node, port), ev) in refused {
        if optional_port(node, port) {
            let n = notes.entry(port).or_default();
            n.0.push(node);
            n.1.extend(ev);
        } else {
            errors.push(((node, port), ev));
        }
    }
    optional_notes(ctx, findings, notes);
    for ((node, port), ev) in errors {
        let name = ctx.name(node).to_string();
        let what = if port == 10250 {
            " (the kubelet)"
        } else if ctx
            .api_backends
            .iter()
            .any(|b| b.node == node && b.port == port)
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
        let (over, why, fix) = wording(ctx, (node, port, what), &ev, &served);
        let mut f = Finding::new(
            NotListening {
                protocol: Protocol::Tcp,
                port,
                from: from.clone(),
                to: vec![name.clone()],
                nodes: vec![name.clone()],
            },
            Severity::Error,
            format!(
                "nothing listens on tcp/{port}{what} on {name}{over}: refused to {} although {why}",
                names_text(&from)
            ),
        );
        f.fix.push(fix);
        // What goes through the closed port (the Service's backend, the pods' direct path) fails
        // because of it.
        let cons: Vec<usize> = ctx
            .results
            .iter()
            .enumerate()
            .filter(|(i, r)| failed(r) && !ctx.explained.contains(i) && !ev.contains(i))
            .filter(|(_, r)| reaches(ctx, r).contains(&(node, port)))
            .map(|(i, _)| i)
            .collect();
        ctx.emit(findings, f, &ev, &cons);
    }
}

/// The summary's family words, the reason and the fix for `node`'s `port` refused in `ev`:
/// refused over one family while the other connects is a service bound to that other family
/// only; otherwise it is down.
fn wording(
    ctx: &Ctx<'_>,
    (node, port, what): (u32, u16, &str),
    ev: &[usize],
    served: &HashSet<(u32, u16, Family)>,
) -> (String, String, String) {
    let name = ctx.name(node);
    let family = ctx.family_of(ev.iter().copied());
    let only = family.filter(|f| served.contains(&(node, port, f.other())));
    match only {
        Some(f) => (
            format!(" over {f} only"),
            format!(
                "{} connects — the service listens on an {} address only",
                f.other(),
                f.other()
            ),
            format!(
                "on {name}: make what serves tcp/{port}{what} listen on {} too (ss -ltnp 'sport = :{port}' shows the address it is bound to; bind it to {} or to the node's {f} address)",
                f.name(),
                if f == Family::Ipv6 { "[::]" } else { "0.0.0.0" }
            ),
        ),
        None => (
            String::new(),
            format!("{name} answers them otherwise — the service is down, not blocked"),
            format!(
                "on {name}: check what should listen on tcp/{port}{what} (ss -ltnp 'sport = :{port}'; its unit or pod logs), or a firewall rule that rejects with a TCP reset"
            ),
        ),
    }
}

/// The TCP ports on nodes a result connects to, its own node's included (`Ctx::needs` leaves out
/// what never leaves the sender): the API server behind the `kubernetes` Service, or the node and
/// port it names.
fn reaches(ctx: &Ctx<'_>, r: &crate::model::Record<'_>) -> Vec<(u32, u16)> {
    if r.to.protocol != Protocol::Tcp {
        return Vec::new();
    }
    match r.path {
        PathClass::PodToService | PathClass::NodeToService
            if r.to.service.as_deref() == Some("kubernetes") =>
        {
            ctx.api_backends
                .iter()
                .filter(|b| b.family == r.to.family())
                .map(|b| (b.node, b.port))
                .collect()
        }
        PathClass::NodeToNode
        | PathClass::PodToNode
        | PathClass::NodeToApiserver
        | PathClass::PodToApiserver => match (ctx.to(r), r.to.port) {
            (Some(b), Some(p)) => vec![(b, p)],
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// One note per optional port: the nodes where nothing listens on it.
fn optional_notes(
    ctx: &mut Ctx<'_>,
    findings: &mut Vec<Finding>,
    notes: BTreeMap<u16, (Vec<u32>, Vec<usize>)>,
) {
    for (port, (nodes, ev)) in notes {
        let names = list(ctx, &nodes);
        let mut f = Finding::new(
            NotListening {
                protocol: Protocol::Tcp,
                port,
                from: Vec::new(),
                to: names.clone(),
                nodes: names.clone(),
            },
            Severity::Warning,
            format!(
                "note: nothing listens on tcp/{port} (Typha) on {}; Typha runs on a few nodes only and the inventory does not say which (`serves`), so this is no fault by itself",
                names_text(&names)
            ),
        );
        f.fix.push(format!("to check: kubectl -n calico-system get pods -o wide -l k8s-app=calico-typha; give the inventory each node's `serves` so only Typha's nodes are probed on tcp/{port}"));
        ctx.emit(findings, f, &ev, &[]);
    }
}
