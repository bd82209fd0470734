//! Which flows at which pod agents a planned probe makes, as policies see them: a probe from a
//! pod agent leaves through its egress; a probe to a pod agent arrives through its ingress. A
//! Service's probe reaches one of its backends (policies judge the translated address): each
//! backend is a route. Probes between host agents make no flow (no pod policy sees them).

use std::net::{IpAddr, Ipv4Addr};

use super::{Dir, Flow, Peer};
use crate::inventory::Inventory;
use crate::model::{AgentKind, AgentRef, PathClass, Protocol, Target};

/// One way a probe can go: every flow on it must be allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub flows: Vec<Flow>,
}

/// The routes of one planned probe; empty when no pod policy sees it.
#[must_use]
pub fn routes(inv: &Inventory, path: PathClass, from: &AgentRef, to: &Target) -> Vec<Route> {
    if path == PathClass::NodeConfig {
        return Vec::new();
    }
    let IpAddr::V4(address) = to.address else {
        return Vec::new();
    };
    let node = |name: &str| inv.nodes.iter().find(|n| n.name == name);
    let pod_ip = |name: &str| {
        node(name)
            .and_then(|n| n.agents.pod.as_ref())
            .map(|a| a.address)
    };
    let mut out = Vec::new();
    for (peer, port) in backends(inv, from, to, address) {
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
            let Some(from_node) = node(&from.node) else {
                continue;
            };
            let source = match from.agent {
                AgentKind::Pod => Peer::Agent {
                    node: from.node.clone(),
                    ip: pod_ip(&from.node).unwrap_or(from_node.address),
                },
                AgentKind::Host => Peer::Host {
                    node: from.node.clone(),
                    ip: from_node.address,
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
fn backends(
    inv: &Inventory,
    from: &AgentRef,
    to: &Target,
    address: Ipv4Addr,
) -> Vec<(Peer, Option<u16>)> {
    let mut backends: Vec<(Peer, Option<u16>)> = Vec::new();
    let api = &inv.cluster.api;
    let is_api = |ip: Ipv4Addr| api.endpoints.iter().any(|e| e.ip() == IpAddr::V4(ip));
    let host_peer = |ip: Ipv4Addr, local_to: &str| -> Peer {
        match inv.nodes.iter().find(|n| n.address == ip) {
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
    let v4 = |a: &std::net::SocketAddr| match a.ip() {
        IpAddr::V4(ip) => Some((ip, a.port())),
        IpAddr::V6(_) => None,
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
        _ if IpAddr::V4(address) == api.service.ip() => {
            for (ip, port) in api.endpoints.iter().filter_map(v4) {
                backends.push((host_peer(ip, &from.node), Some(port)));
            }
        }
        _ => match inv.cluster.dns.as_ref() {
            Some(dns) if IpAddr::V4(address) == dns.service.ip() => {
                for (ip, port) in dns.endpoints.iter().filter_map(v4) {
                    backends.push((host_peer(ip, &from.node), Some(port)));
                }
            }
            _ => backends.push((host_peer(address, &from.node), to.port)),
        },
    }
    backends
}

fn port_of(protocol: Protocol, port: Option<u16>) -> Option<u16> {
    matches!(protocol, Protocol::Tcp | Protocol::Udp)
        .then_some(port)
        .flatten()
}
