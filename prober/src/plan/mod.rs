//! Pure: the topology becomes the matrix — every probe every agent must run, by path class. One
//! file per path family; this one holds the matrix's cell, the filter and the builder they share.

mod api;
mod dns;
mod node_config;
mod node_ports;
pub mod overlay;
mod pods;
pub mod preflight;
pub mod sample;

use std::net::IpAddr;

use probe_proto::{Port, Probe, TcpProbe, UdpProbe};

use crate::inventory::{Agent, Family, Inventory, Node};
use crate::model::{AgentKind, AgentRef, PathClass, Target};

pub use node_ports::{cni_tcp_ports, optional_cni_ports, served_tcp_ports};
pub use overlay::{encapsulation_overhead, pod_mtu, underlay_mtu_needed};

mod planned;
pub use planned::{Planned, PlannedRef};

/// One cell of the matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedProbe {
    pub id: String,
    pub path: PathClass,
    pub from: AgentRef,
    pub to: Target,
    pub probe: Probe,
    /// The port of the receiving node's host agent, whose sniffer confirms a crafted overlay
    /// datagram (`seen`), and says where a failed TCP or UDP probe to the node's own address got
    /// to; `None` for probes no host agent receives.
    pub receipt_port: Option<Port>,
}

/// Which paths and nodes to plan.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only these path classes (all when empty).
    pub paths: Vec<PathClass>,
    pub skip_paths: Vec<PathClass>,
    /// Only probes from or to these nodes (all when empty).
    pub nodes: Vec<String>,
    /// Between nodes, only these pairs (`--sample`); all when absent.
    pub sample: Option<sample::Sample>,
}

impl Filter {
    fn wants(&self, p: PathClass) -> bool {
        (self.paths.is_empty() || self.paths.contains(&p)) && !self.skip_paths.contains(&p)
    }

    fn touches(&self, from: &str, to: Option<&str>) -> bool {
        self.nodes.is_empty()
            || self
                .nodes
                .iter()
                .any(|n| n == from || Some(n.as_str()) == to)
    }
}

/// Stable, readable ids: `pod-to-pod:n1/pod->n3/pod:tcp/9917`; the IPv6 variant of a path
/// ends in `/ipv6` (`pod-to-pod:n1/pod->n3/pod:tcp/9917/ipv6`), the IPv4 one keeps its id.
fn id(path: PathClass, from: &AgentRef, to: &str, what: &str) -> String {
    format!("{path}:{from}->{to}:{what}")
}

/// What a probe's `what` gets for its family: nothing for IPv4 (its ids as before dual-stack),
/// `/ipv6` for IPv6.
fn family_suffix(f: Family) -> &'static str {
    match f {
        Family::Ipv4 => "",
        Family::Ipv6 => "/ipv6",
    }
}

/// Collects the filtered matrix; each path family adds its cells from its own file.
struct Builder<'a> {
    inv: &'a Inventory,
    filter: &'a Filter,
    out: Planned,
}

impl<'a> Builder<'a> {
    /// Adds one cell unless the filter leaves it out; the cell, for fields only some paths set.
    fn push(
        &mut self,
        path: PathClass,
        from: AgentRef,
        to: Target,
        label: &str,
        what: &str,
        probe: Probe,
    ) -> Option<usize> {
        if !self.filter.wants(path) || !self.filter.touches(&from.node, to.node.as_deref()) {
            return None;
        }
        let sampled_out = self
            .filter
            .sample
            .as_ref()
            .is_some_and(|s| !s.keeps(path, &from.node, to.node.as_deref()));
        if sampled_out {
            return None;
        }
        let id = id(path, &from, label, what);
        Some(self.out.push(PlannedProbe {
            id,
            path,
            from,
            to,
            probe,
            receipt_port: None,
        }))
    }

    /// The agents of `kind` that have an address in `family`, with it.
    fn agents_in(&self, kind: AgentKind, family: Family) -> Vec<(&'a Node, &'a Agent, IpAddr)> {
        self.agents(kind)
            .into_iter()
            .filter_map(|(n, a)| Some((n, a, a.ip(family)?)))
            .collect()
    }

    fn agents(&self, kind: AgentKind) -> Vec<(&'a Node, &'a Agent)> {
        let inv: &'a Inventory = self.inv;
        inv.nodes
            .iter()
            .filter_map(|n| {
                let a = match kind {
                    AgentKind::Host => n.agents.host.as_ref(),
                    AgentKind::Pod => n.agents.pod.as_ref(),
                };
                a.map(|a| (n, a))
            })
            .collect()
    }
}

/// The wire carries only non-zero ports; the planner's own port lists hold no 0 (inventory ports
/// are `Port`s already).
fn port(p: u16) -> Port {
    Port::new(p).unwrap_or_else(|| Port::new(1).expect("non-zero"))
}

/// The full matrix for `inv`, filtered. Pure; ids are unique and stable.
#[must_use]
pub fn plan(inv: &Inventory, filter: &Filter) -> Planned {
    let mut b = Builder {
        inv,
        filter,
        out: Planned::new(),
    };
    b.agent_matrix(PathClass::PodToPod, AgentKind::Pod, AgentKind::Pod);
    b.agent_matrix(PathClass::NodeToPod, AgentKind::Host, AgentKind::Pod);
    b.agent_matrix(PathClass::PodToNode, AgentKind::Pod, AgentKind::Host);
    b.node_to_node();
    b.overlay();
    b.api();
    b.dns();
    b.node_config();
    let mut out = b.out;
    receipts(inv, &mut out);
    out
}

/// TCP and UDP probes to a node's own address get its host agent as the receipt's witness: its
/// sniffer sees whether the SYN or datagram arrived before the node's firewall did.
fn receipts(inv: &Inventory, out: &mut Planned) {
    let nodes: std::collections::HashMap<&str, &Node> =
        inv.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let mut witnessed = Vec::new();
    for (i, p) in out
        .iter()
        .enumerate()
        .filter(|(_, p)| p.receipt_port.is_none())
    {
        let (Probe::Tcp(TcpProbe { address, .. }) | Probe::Udp(UdpProbe { address, .. })) =
            *p.probe
        else {
            continue;
        };
        let Some(node) = p.to.node.as_deref().and_then(|n| nodes.get(n)) else {
            continue;
        };
        let Some(host) = &node.agents.host else {
            continue;
        };
        if node.ips().any(|ip| ip == address)
            || Family::ALL.into_iter().any(|f| host.ip(f) == Some(address))
        {
            witnessed.push((i, Some(host.port)));
        }
    }
    for (i, port) in witnessed {
        out.set_receipt_port(i, port);
    }
}

#[cfg(test)]
mod tests;
