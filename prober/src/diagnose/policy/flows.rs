//! Which flows at which pod agents a planned probe makes, as policies see them: a probe from a
//! pod agent leaves through its egress; a probe to a pod agent arrives through its ingress. A
//! Service's probe reaches one of its backends (policies judge the translated address): each
//! backend is a route. Probes between host agents make no flow (no pod policy sees them).

use std::collections::HashMap;
use std::net::IpAddr;

use super::{Dir, Flow, Peer};
use crate::inventory::{Inventory, Node};
use crate::model::{AgentKind, AgentRef, Family, PathClass, Protocol, Target};

/// One way a probe can go: every flow on it must be allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub flows: Vec<Flow>,
}

/// The routes of planned probes, with the inventory's nodes indexed by name and by address
/// once: the policy rules ask for the routes of every result, and a scan of the nodes for each
/// made them grow with the cube of the cluster's size.
pub struct Routes<'a> {
    inv: &'a Inventory,
    by_name: HashMap<&'a str, &'a Node>,
    by_ip: HashMap<IpAddr, &'a Node>,
}

impl<'a> Routes<'a> {
    #[must_use]
    pub fn new(inv: &'a Inventory) -> Self {
        let by_name = inv.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
        let mut by_ip = HashMap::new();
        for n in &inv.nodes {
            for ip in n.ips() {
                // The first node with the address, as a scan in order finds it.
                by_ip.entry(ip).or_insert(n);
            }
        }
        Self {
            inv,
            by_name,
            by_ip,
        }
    }

    fn node(&self, name: &str) -> Option<&'a Node> {
        self.by_name.get(name).copied()
    }

    /// The routes of one planned probe; empty when no pod policy sees it. A probe of one family
    /// sees the agents, nodes and backends in that family (policies judge IPv6 flows by IPv6
    /// addresses).
    #[must_use]
    pub fn of(&self, path: PathClass, from: &AgentRef, to: &Target) -> Vec<Route> {
        if path == PathClass::NodeConfig {
            return Vec::new();
        }
        let address = to.address;
        let family = Family::of(address);
        let pod_ip = |name: &str| {
            self.node(name)
                .and_then(|n| n.agents.pod.as_ref())
                .and_then(|a| a.ip(family))
        };
        let mut out = Vec::new();
        for (peer, port) in self.backends(from, to, address) {
            let mut flows = Vec::new();
            let protocol = to.protocol;
            if from.agent == AgentKind::Pod
                && let Some(ip) = pod_ip(&from.node)
            {
                // A pod cannot block access to itself.
                if matches!(&peer, Peer::Agent { node, .. } if *node == from.node) {
                    out.push(Route { flows: Vec::new() });
                    continue;
                }
                flows.push(Flow {
                    dir: Dir::Egress,
                    node: from.node.clone(),
                    ip,
                    peer: peer.clone(),
                    protocol,
                    port: port_of(protocol, port),
                });
            }
            if let Peer::Agent { node: to_node, ip } = &peer {
                let Some(from_ip) = self.node(&from.node).and_then(|n| n.ip(family)) else {
                    continue;
                };
                let source = match from.agent {
                    AgentKind::Pod => Peer::Agent {
                        node: from.node.clone(),
                        ip: pod_ip(&from.node).unwrap_or(from_ip),
                    },
                    AgentKind::Host => Peer::Host {
                        node: from.node.clone(),
                        ip: from_ip,
                        local: from.node == *to_node,
                        apiserver: false,
                    },
                };
                flows.push(Flow {
                    dir: Dir::Ingress,
                    node: to_node.clone(),
                    ip: *ip,
                    peer: source,
                    protocol,
                    port: port_of(protocol, port),
                });
            }
            if !flows.is_empty() {
                out.push(Route { flows });
            }
        }
        out
    }

    /// The peers a probe's destination stands for, with the port each is reached on: a Service's
    /// backends, else the agent or address itself.
    fn backends(&self, from: &AgentRef, to: &Target, address: IpAddr) -> Vec<(Peer, Option<u16>)> {
        let mut backends: Vec<(Peer, Option<u16>)> = Vec::new();
        let inv = self.inv;
        let api = &inv.cluster.api;
        let is_api = |ip: IpAddr| api.endpoints.iter().any(|e| e.ip() == ip);
        let host_peer = |ip: IpAddr, local_to: &str| -> Peer {
            match self.by_ip.get(&ip) {
                Some(n) => Peer::Host {
                    node: n.name.clone(),
                    ip,
                    local: n.name == local_to,
                    apiserver: is_api(ip),
                },
                None if inv.nodes.iter().any(|n| n.holds_pod_ip(ip)) => Peer::Pod { ip },
                None => Peer::Outside {
                    ip,
                    apiserver: is_api(ip),
                },
            }
        };
        // A Service's address of one family is translated to its endpoints of that family.
        let same_family = |a: &std::net::SocketAddr| {
            (Family::of(a.ip()) == Family::of(address)).then(|| (a.ip(), a.port()))
        };
        match (to.agent, to.node.as_deref()) {
            (Some(AgentKind::Pod), Some(n)) => backends.push((
                Peer::Agent {
                    node: n.to_string(),
                    ip: address,
                },
                to.port,
            )),
            (Some(AgentKind::Host), _) => backends.push((host_peer(address, &from.node), to.port)),
            _ if api.cluster_ips().any(|s| s.ip() == address) => {
                for (ip, port) in api.endpoints.iter().filter_map(same_family) {
                    backends.push((host_peer(ip, &from.node), Some(port)));
                }
            }
            _ => match inv.cluster.dns.as_ref() {
                Some(dns) if dns.cluster_ips().any(|s| s.ip() == address) => {
                    for (ip, port) in dns.endpoints.iter().filter_map(same_family) {
                        backends.push((host_peer(ip, &from.node), Some(port)));
                    }
                }
                _ => backends.push((host_peer(address, &from.node), to.port)),
            },
        }
        backends
    }
}

fn port_of(protocol: Protocol, port: Option<u16>) -> Option<u16> {
    matches!(protocol, Protocol::Tcp | Protocol::Udp)
        .then_some(port)
        .flatten()
}
