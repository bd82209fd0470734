//! Preflight: every port a joining node (the candidate) will need, both directions, before it
//! joins. The candidate runs stand-ins for what it will serve; the existing nodes' host agents
//! probe them, and the candidate probes the cluster. Pure, like the rest of the planner.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use probe_proto::{MacAddr, Port, Probe, Vni};

use super::{Builder, Filter, PlannedProbe, cni_tcp_ports, port};
use crate::inventory::{Agent, Agents, Inventory, Node};
use crate::model::{AgentKind, AgentRef, PathClass, Protocol, Target};

/// The role the candidate will join with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Role {
    #[default]
    Worker,
    ControlPlane,
}

/// The machine about to join.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub name: String,
    pub address: Ipv4Addr,
    /// The command prefix that runs a program on the candidate (empty: here).
    pub exec: Vec<String>,
    pub role: Role,
    /// The port of the candidate's stand-in agent (its `/seen` and echo).
    pub agent_port: u16,
    /// The candidate's `/`, for its node checks; `None` skips them.
    pub host_root: Option<PathBuf>,
}

/// The etcd ports, between control planes only.
const ETCD: [u16; 2] = [2379, 2380];
const KUBELET: u16 = 10250;
const API: u16 = 6443;

/// The TCP ports the candidate's stand-ins must listen on: what it will serve once joined.
#[must_use]
pub fn standin_tcp_ports(inv: &Inventory, role: Role) -> Vec<u16> {
    let mut v = vec![KUBELET];
    v.extend(cni_tcp_ports(inv.cluster.cni));
    if role == Role::ControlPlane {
        v.push(API);
        v.extend(ETCD);
    }
    v
}

/// The UDP ports the candidate's stand-ins take: the overlay's, when it is VXLAN.
#[must_use]
pub fn standin_udp_ports(inv: &Inventory) -> Vec<u16> {
    match &inv.cluster.overlay {
        Some(ov) if ov.mode == "vxlan" && ov.port != 0 => vec![ov.port],
        _ => Vec::new(),
    }
}

/// The inventory with the candidate as one more node whose only agent is its stand-in: the run
/// machinery reaches it through its exec prefix like any other host agent.
#[must_use]
pub fn with_candidate(inv: &Inventory, c: &Candidate) -> Inventory {
    let mut out = inv.clone();
    out.nodes.retain(|n| n.name != c.name);
    out.nodes.push(Node {
        name: c.name.clone(),
        roles: match c.role {
            Role::Worker => Vec::new(),
            Role::ControlPlane => vec!["control-plane".into()],
        },
        address: c.address,
        pod_cidr: None,
        pod_cidrs: Vec::new(),
        host_root: c.host_root.clone(),
        vtep: None,
        zone: None,
        serves: Some(Vec::new()),
        agents: Agents {
            host: Some(Agent {
                exec: c.exec.clone(),
                address: c.address,
                port: c.agent_port,
            }),
            pod: None,
        },
    });
    out
}

fn host(node: &str) -> AgentRef {
    AgentRef {
        node: node.into(),
        agent: AgentKind::Host,
    }
}

fn tcp_target(node: &str, address: Ipv4Addr, p: u16) -> Target {
    Target {
        node: Some(node.into()),
        agent: None,
        service: None,
        address: IpAddr::V4(address),
        port: Some(p),
        protocol: Protocol::Tcp,
    }
}

/// Preflight's probes, through the planner's one builder (every cell wanted: preflight applies
/// no path or node filter).
impl Builder<'_> {
    fn tcp(&mut self, from: &str, to: &str, address: Ipv4Addr, p: u16) {
        self.push(
            PathClass::NodeToNode,
            host(from),
            tcp_target(to, address, p),
            &format!("{to}/host"),
            &format!("tcp/{p}"),
            Probe::Tcp {
                address: IpAddr::V4(address),
                port: port(p),
                echo: false,
            },
        );
    }
}

/// Every probe preflight runs for `c` joining the cluster `inv` describes. Ids are unique and
/// stable; `inv` must not already hold the candidate.
#[must_use]
pub fn preflight(inv: &Inventory, c: &Candidate) -> Vec<PlannedProbe> {
    let everything = Filter::default();
    let mut out = Builder {
        inv,
        filter: &everything,
        out: Vec::new(),
    };
    let cp = c.role == Role::ControlPlane;
    let others: Vec<&Node> = inv.nodes.iter().filter(|n| n.name != c.name).collect();
    // The candidate -> every API endpoint: TCP and the TLS handshake.
    for ep in &inv.cluster.api.endpoints {
        let node = others.iter().find(|n| IpAddr::V4(n.address) == ep.ip());
        let label = node.map_or_else(|| ep.ip().to_string(), |n| format!("{}/apiserver", n.name));
        out.push(
            PathClass::NodeToApiserver,
            host(&c.name),
            Target {
                node: node.map(|n| n.name.clone()),
                agent: None,
                service: Some("apiserver".into()),
                address: ep.ip(),
                port: Some(ep.port()),
                protocol: Protocol::Tcp,
            },
            &label,
            &format!("tls/{}", ep.port()),
            Probe::Tls {
                address: ep.ip(),
                port: port(ep.port()),
                server_name: None,
                ca_file: None,
                require_verified: false,
                path: "/livez".into(),
                token_file: None,
            },
        );
    }
    let cni = cni_tcp_ports(inv.cluster.cni);
    for n in &others {
        // The candidate -> the node: kubelet, the CNI's ports; etcd and 6443 when it will be a
        // control plane itself.
        out.tcp(&c.name, &n.name, n.address, KUBELET);
        for &p in cni {
            out.tcp(&c.name, &n.name, n.address, p);
        }
        if n.is_control_plane() && cp {
            for p in ETCD {
                out.tcp(&c.name, &n.name, n.address, p);
            }
        }
        // The node -> the candidate's stand-ins, from its host agent.
        if n.agents.host.is_none() {
            continue;
        }
        for p in std::iter::once(KUBELET).chain(cni.iter().copied()) {
            out.tcp(&n.name, &c.name, c.address, p);
        }
        if cp {
            out.tcp(&n.name, &c.name, c.address, API);
            if n.is_control_plane() {
                for p in ETCD {
                    out.tcp(&n.name, &c.name, c.address, p);
                }
            }
        }
    }
    overlay(inv, c, &others, &mut out);
    if let Some(root) = &c.host_root {
        out.push(
            PathClass::NodeConfig,
            host(&c.name),
            Target {
                node: Some(c.name.clone()),
                agent: Some(AgentKind::Host),
                service: Some("host-root".into()),
                address: IpAddr::V4(c.address),
                port: None,
                protocol: Protocol::Tcp,
            },
            &format!("{}/host", c.name),
            "files",
            Probe::Node {
                root: root.clone(),
                // No credentials on a machine that has not joined.
                api_check: false,
            },
        );
    }
    out.out
}

/// Crafted VXLAN datagrams both ways: to each node (its sniffer confirms) and from each node to
/// the candidate (its stand-in socket confirms).
fn overlay(inv: &Inventory, c: &Candidate, others: &[&Node], out: &mut Builder<'_>) {
    let Some(ov) = inv.cluster.overlay.as_ref().filter(|o| o.mode == "vxlan") else {
        return;
    };
    let what = format!("vxlan/{}", ov.port);
    for n in others {
        let Some(vtep) = &n.vtep else { continue };
        let receipt = n.agents.host.as_ref().and_then(|a| Port::new(a.port));
        let to_node = Target {
            node: Some(n.name.clone()),
            agent: Some(AgentKind::Host),
            service: None,
            address: IpAddr::V4(n.address),
            port: Some(ov.port),
            protocol: Protocol::Udp,
        };
        if let Some(p) = out.push(
            PathClass::Overlay,
            host(&c.name),
            to_node,
            &format!("{}/host", n.name),
            &what,
            Probe::Vxlan {
                address: n.address,
                port: port(ov.port),
                vni: Vni::new(ov.vni).unwrap_or_default(),
                nonce: None,
                inner_source: None,
                inner_destination: Some(vtep.address),
                destination_mac: vtep.mac.map(|m| MacAddr(m.0)),
            },
        ) {
            p.receipt_port = receipt;
        }
        if n.agents.host.is_none() {
            continue;
        }
        let to_candidate = Target {
            node: Some(c.name.clone()),
            agent: Some(AgentKind::Host),
            service: None,
            address: IpAddr::V4(c.address),
            port: Some(ov.port),
            protocol: Protocol::Udp,
        };
        if let Some(p) = out.push(
            PathClass::Overlay,
            host(&n.name),
            to_candidate,
            &format!("{}/host", c.name),
            &what,
            Probe::Vxlan {
                address: c.address,
                port: port(ov.port),
                vni: Vni::new(ov.vni).unwrap_or_default(),
                nonce: None,
                inner_source: Some(vtep.address),
                inner_destination: None,
                destination_mac: None,
            },
        ) {
            p.receipt_port = Port::new(c.agent_port);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::inventory;

    fn candidate(role: Role) -> Candidate {
        Candidate {
            name: "new".into(),
            address: "192.168.56.50".parse().unwrap(),
            exec: vec!["ip".into(), "netns".into(), "exec".into(), "labnew".into()],
            role,
            agent_port: 9917,
            host_root: None,
        }
    }

    fn count(v: &[PlannedProbe], from_candidate: bool, what: &str) -> usize {
        v.iter()
            .filter(|p| (p.from.node == "new") == from_candidate && p.id.ends_with(what))
            .count()
    }

    #[test]
    fn a_worker_is_probed_both_ways_on_every_required_port() {
        let inv = inventory(3, 1, "flannel");
        let v = preflight(&inv, &candidate(Role::Worker));
        let ids: std::collections::HashSet<&str> = v.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids.len(), v.len(), "ids are unique");
        assert_eq!(count(&v, true, "tls/6443"), inv.cluster.api.endpoints.len());
        assert_eq!(count(&v, true, "tcp/10250"), 3);
        assert_eq!(count(&v, false, "tcp/10250"), 3);
        assert_eq!(count(&v, true, "vxlan/8472"), 3);
        assert_eq!(count(&v, false, "vxlan/8472"), 3);
        assert_eq!(
            count(&v, true, "tcp/2379") + count(&v, false, "tcp/6443"),
            0
        );
        // The candidate's stand-in confirms datagrams sent to it.
        assert!(
            v.iter()
                .filter(|p| p.to.node.as_deref() == Some("new") && p.id.ends_with("vxlan/8472"))
                .all(|p| p.receipt_port == Port::new(9917))
        );
    }

    #[test]
    fn a_control_plane_adds_etcd_both_ways_and_6443_from_every_node() {
        let inv = inventory(3, 1, "calico");
        let v = preflight(&inv, &candidate(Role::ControlPlane));
        assert_eq!(count(&v, true, "tcp/2379"), 1);
        assert_eq!(count(&v, false, "tcp/2380"), 1);
        assert_eq!(count(&v, false, "tcp/6443"), 3);
        assert_eq!(
            count(&v, false, "tcp/179"),
            3,
            "calico's BGP to the stand-in"
        );
        assert_eq!(
            standin_tcp_ports(&inv, Role::ControlPlane),
            [10250, 179, 5473, 6443, 2379, 2380]
        );
    }

    #[test]
    fn the_candidate_joins_the_inventory_as_a_host_agent_only() {
        let inv = inventory(2, 1, "flannel");
        let c = candidate(Role::Worker);
        let with = with_candidate(&inv, &c);
        let n = with.nodes.iter().find(|n| n.name == "new").unwrap();
        assert!(n.agents.pod.is_none() && n.vtep.is_none());
        assert_eq!(n.agents.host.as_ref().unwrap().exec, c.exec);
    }
}
