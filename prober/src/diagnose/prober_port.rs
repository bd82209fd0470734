//! The prober's own port: pod-to-node probes end at a host agent on its port (9917 unless the
//! inventory says otherwise), a port the cluster itself never needs. When those fail on a node
//! that the senders reach on the cluster's own ports, the node's firewall (rightly) does not open
//! the prober's port: "the prober cannot use its port here", a warning with the fix, and the
//! pod-to-node path is not tested there. Never a cluster firewall gap.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use probe_proto::Outcome;

use crate::model::{AgentKind, PathClass, Protocol, Record};

use super::context::{Ctx, failed, list, names_text};
use super::finding::{Finding, ProberPort, Severity};

pub(super) fn prober_port(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) {
    // Hosts that reach each other on anything but the prober's port, and pods whose network
    // works at all: a failure to the agent's port is only the port's when both hold.
    let pods_ok = ctx.pods_ok();
    let mut reachable: HashSet<(u32, u32)> = HashSet::new();
    for r in ctx.results.iter().filter(|r| r.result.outcome.is_ok()) {
        if !to_host_agent(&r)
            && let (Some(a), Some(b)) = (ctx.from(&r), ctx.to(&r))
        {
            reachable.insert((a, b));
        }
    }
    // (node, port) -> the failed probes to that node's host agent on its port.
    let mut blocked: BTreeMap<(u32, u16), Vec<usize>> = BTreeMap::new();
    for (i, r) in ctx.results.iter().enumerate() {
        if ctx.explained.contains(&i)
            || !failed(&r)
            || !to_host_agent(&r)
            || !matches!(r.result.outcome, Outcome::Timeout | Outcome::Rejected)
        {
            continue;
        }
        let (Some(a), Some(b), Some(port)) = (ctx.from(&r), ctx.to(&r), r.to.port) else {
            continue;
        };
        if pods_ok.contains(a) && (a == b || reachable.contains(&(a, b))) {
            blocked.entry((b, port)).or_default().push(i);
        }
    }
    // One finding per port, naming every node that does not open it.
    let mut by_port: BTreeMap<u16, (BTreeSet<u32>, Vec<usize>)> = BTreeMap::new();
    for ((node, port), ev) in blocked {
        let e = by_port.entry(port).or_default();
        e.0.insert(node);
        e.1.extend(ev);
    }
    for (port, (nodes, ev)) in by_port {
        let nodes: Vec<u32> = nodes.into_iter().collect();
        let names = list(ctx, &nodes);
        let mut f = Finding::new(
            ProberPort {
                protocol: Protocol::Tcp,
                port,
                from: Vec::new(),
                to: names.clone(),
                nodes: names.clone(),
            },
            Severity::Warning,
            format!(
                "the prober cannot use its port tcp/{port} on {}: its agent there does not answer \
                 the node's pods although the node answers them on the cluster's ports — the \
                 cluster does not need this port, so the pod-to-node path to {} is not tested",
                names_text(&names),
                if names.len() == 1 { "it" } else { "them" },
            ),
        );
        f.fix.push(format!(
            "nothing to open for the cluster; to test pod-to-node to {} too, let the pod CIDR reach \
             tcp/{port} there for the prober, or run the agents on a port the nodes already open \
             (probe-pod serve --port, and the inventory's agents.*.port)",
            names_text(&names),
        ));
        let cidr = ctx.inv.cluster.pod_cidr.to_string();
        for n in &names {
            f.fix.push(format!(
                "on {n} (nftables): nft insert rule inet filter input ip saddr {cidr} tcp dport {port} accept"
            ));
        }
        ctx.emit(findings, f, &ev, &[]);
    }
}

/// A probe to a host agent on the agent's own port: pod-to-node echo.
fn to_host_agent(r: &Record<'_>) -> bool {
    r.path == PathClass::PodToNode && r.to.agent == Some(AgentKind::Host)
}
