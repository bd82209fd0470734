//! The prober's own port: pod-to-node probes end at a host agent on its port (9917 unless the
//! inventory says otherwise), a port the cluster itself never needs. When those fail on a node
//! that the senders reach on the cluster's own ports, the node's firewall (rightly) does not open
//! the prober's port: "the prober cannot use its port here", a warning with the fix, and the
//! pod-to-node path is not tested there. Never a cluster firewall gap.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use probe_proto::Outcome;

use crate::model::{AgentKind, Family, PathClass, Protocol, Record};

use super::context::{Ctx, failed, list, names_text};
use super::finding::{Finding, ProberPort, Severity};

pub(super) fn prober_port(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) {
    // Hosts that reach each other on anything but the prober's port, and pods whose network
    // works, per family: a failure to the agent's port is only the port's when both hold in
    // its family (IPv4 working says nothing of IPv6).
    let pods_ok = ctx.pods_ok();
    let mut reachable: HashSet<(u32, u32, Family)> = HashSet::new();
    for r in ctx.results.iter().filter(|r| r.result.outcome.is_ok()) {
        if !to_host_agent(&r)
            && let (Some(a), Some(b)) = (ctx.from(&r), ctx.to(&r))
        {
            reachable.insert((a, b, r.to.family()));
        }
    }
    // (node, port) -> per family, the failed probes to that node's host agent on its port.
    let mut blocked: BTreeMap<(u32, u16), BTreeMap<Family, Vec<usize>>> = BTreeMap::new();
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
        let family = r.to.family();
        if pods_ok.in_family(a, family) && (a == b || reachable.contains(&(a, b, family))) {
            blocked
                .entry((b, port))
                .or_default()
                .entry(family)
                .or_default()
                .push(i);
        }
    }
    // One finding per port and the families it is closed in, naming every node that does not
    // open it: closed over IPv6 only is IPv6's, closed in both one finding for both.
    let mut by_port: BTreeMap<(u16, Vec<Family>), Closed> = BTreeMap::new();
    for ((node, port), fams) in blocked {
        let e = by_port
            .entry((port, fams.keys().copied().collect()))
            .or_default();
        e.0.insert(node);
        e.1.extend(fams.into_values().flatten());
    }
    for ((port, families), (nodes, ev)) in by_port {
        let nodes: Vec<u32> = nodes.into_iter().collect();
        let names = list(ctx, &nodes);
        let over = match families[..] {
            [f] if ctx.dual_stack => format!(" over {f}"),
            _ => String::new(),
        };
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
                "the prober cannot use its port tcp/{port}{over} on {}: its agent there does not \
                 answer the node's pods although the node answers them on the cluster's ports — \
                 the cluster does not need this port, so the pod-to-node path to {} is not tested",
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
        for family in &families {
            let Some(cidr) = ctx.inv.cluster.pod_ranges().find(|c| c.family() == *family) else {
                continue;
            };
            let ip = match family {
                Family::Ipv4 => "ip",
                Family::Ipv6 => "ip6",
            };
            for n in &names {
                f.fix.push(format!(
                    "on {n} (nftables): nft insert rule inet filter input {ip} saddr {cidr} tcp dport {port} accept"
                ));
            }
        }
        if let ([family], true) = (&families[..], ctx.dual_stack) {
            f.family = Some(*family);
        }
        ctx.emit(findings, f, &ev, &[]);
    }
}

/// The nodes whose agent port is closed, and the failed probes that show it.
type Closed = (BTreeSet<u32>, Vec<usize>);

/// A probe to a host agent on the agent's own port: pod-to-node echo.
fn to_host_agent(r: &Record<'_>) -> bool {
    r.path == PathClass::PodToNode && r.to.agent == Some(AgentKind::Host)
}
