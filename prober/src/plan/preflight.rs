//! Preflight: every port a joining node (the candidate) will need, both directions, before it
//! joins. The candidate runs stand-ins for what it will serve; the existing nodes' host agents
//! probe them, and the candidate probes the cluster. Pure, like the rest of the planner.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use probe_proto::{
    MtuProbe, NodeProbe, Port, Probe, TcpProbe, TlsProbe, VxlanProbe, WireguardProbe,
};

#[cfg(test)]
use super::PlannedProbe;
use super::node_ports::cni_port_served;
use super::overlay::{crafted, underlay_mtu_needed};
use super::{Builder, Filter, Planned, cni_tcp_ports, port, receipts, served_tcp_ports};
use crate::inventory::{Agent, Agents, Inventory, Node, NodeRole, Overlay};
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
    pub agent_port: Port,
    /// The candidate's `/`, for its node checks; `None` skips them.
    pub host_root: Option<PathBuf>,
}

/// A port the candidate's stand-in could not bind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortConflict {
    pub protocol: Protocol,
    pub port: u16,
    /// What holds it, as `ss -p` names it (`"nginx",pid=812`), when it can be read.
    pub process: Option<String>,
}

/// The etcd ports, between control planes only.
const ETCD: [u16; 2] = [2379, 2380];
const KUBELET: u16 = 10250;
const API: u16 = 6443;

/// The CNI ports the candidate will serve once joined, as discovery would then say: those every
/// node of the cluster serves today (BGP in a full mesh, Cilium's health port), not those only
/// some do (Typha runs on a few nodes, chosen by its `Deployment`). `None` when the inventory
/// does not say what its nodes serve: then every node, the candidate included, is assumed to
/// serve its CNI's ports, as the matrix assumes.
#[must_use]
pub fn candidate_serves(inv: &Inventory) -> Option<Vec<Port>> {
    let mut served = inv.nodes.iter().map(|n| n.serves.as_ref());
    let first = served.next()??.clone();
    let mut common = first;
    for s in served {
        let s = s?;
        common.retain(|p| s.contains(p));
    }
    Some(common)
}

/// The TCP ports the candidate's stand-ins must listen on: what a node of its role serves the
/// others (`served_tcp_ports`, the planner's one list), less the CNI ports it will not serve.
#[must_use]
pub fn standin_tcp_ports(inv: &Inventory, role: Role) -> Vec<u16> {
    let cni = cni_tcp_ports(inv.cluster.cni);
    let serves = candidate_serves(inv);
    served_tcp_ports(inv.cluster.cni, role == Role::ControlPlane)
        .into_iter()
        .filter(|p| {
            !cni.contains(p)
                || serves
                    .as_ref()
                    .is_none_or(|s| s.iter().any(|q| q.get() == *p))
        })
        .collect()
}

/// The UDP ports the candidate's stand-ins take: the overlay's, when its encapsulation has one
/// (`VXLAN`, Geneve, `WireGuard`), so a port already taken is a conflict before the join.
#[must_use]
pub fn standin_udp_ports(inv: &Inventory) -> Vec<u16> {
    inv.cluster
        .overlay
        .and_then(|ov| ov.port())
        .map(|p| vec![p.get()])
        .unwrap_or_default()
}

/// The inventory with the candidate as one more node whose only agent is its stand-in: the run
/// machinery reaches it through its exec prefix like any other host agent.
#[must_use]
pub fn with_candidate(inv: &Inventory, c: &Candidate) -> Inventory {
    let mut out = inv.clone();
    out.nodes.retain(|n| n.name != c.name);
    out.nodes.push(candidate_node(inv, c));
    out
}

fn candidate_node(inv: &Inventory, c: &Candidate) -> Node {
    Node {
        name: c.name.clone(),
        roles: match c.role {
            Role::Worker => Vec::new(),
            Role::ControlPlane => vec![NodeRole::ControlPlane],
        },
        address: c.address,
        address6: None,
        pod_cidr: None,
        pod_cidrs: Vec::new(),
        host_root: c.host_root.clone(),
        vtep: None,
        vtep6: None,
        zone: None,
        serves: candidate_serves(inv),
        agents: Agents {
            host: Some(Agent {
                exec: c.exec.clone(),
                address: c.address,
                address6: None,
                port: c.agent_port,
            }),
            pod: None,
        },
    }
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
            Probe::Tcp(TcpProbe {
                address: IpAddr::V4(address),
                port: port(p),
                echo: false,
            }),
        );
    }
}

/// Every probe preflight runs for `c` joining the cluster `inv` describes. Ids are unique and
/// stable; `inv` must not already hold the candidate.
#[must_use]
pub fn preflight(inv: &Inventory, c: &Candidate) -> Planned {
    let everything = Filter::default();
    let mut out = Builder {
        inv,
        filter: &everything,
        out: Planned::new(),
    };
    let cp = c.role == Role::ControlPlane;
    let me = candidate_node(inv, c);
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
            Probe::Tls(TlsProbe {
                address: ep.ip(),
                port: port(ep.port()),
                server_name: None,
                ca_file: None,
                require_verified: false,
                path: "/livez".into(),
                token_file: None,
            }),
        );
    }
    let cni = cni_tcp_ports(inv.cluster.cni);
    for n in &others {
        // The candidate -> the node: kubelet, the CNI's ports where the node serves them; etcd
        // and 6443 when it will be a control plane itself.
        out.tcp(&c.name, &n.name, n.address, KUBELET);
        for &p in cni.iter().filter(|&&p| cni_port_served(inv, &me, n, p)) {
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
        out.tcp(&n.name, &c.name, c.address, KUBELET);
        for &p in cni.iter().filter(|&&p| cni_port_served(inv, n, &me, p)) {
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
    underlay_mtu(inv, c, &others, &mut out);
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
            Probe::Node(NodeProbe {
                root: root.clone(),
                // No credentials on a machine that has not joined.
                api_check: false,
            }),
        );
    }
    let mut planned = out.out;
    // A failed TCP probe gets its receiver's sniffer as witness, as in the matrix: the node's
    // host agent, or the candidate's stand-in.
    receipts(&with_candidate(inv, c), &mut planned);
    planned
}

/// Crafted datagrams of the cluster's encapsulation both ways: to each node (its sniffer
/// confirms, as in the matrix) and from each node to the candidate, where no tunnel device
/// exists yet: its stand-in socket confirms a VXLAN datagram, its sniffer the arrival of a
/// `WireGuard` one. Geneve and IP-in-IP toward the candidate are not planned: before the join
/// nothing there can say whether they would be decapsulated.
fn overlay(inv: &Inventory, c: &Candidate, others: &[&Node], out: &mut Builder<'_>) {
    let Some(ov) = inv.cluster.overlay.as_ref() else {
        return;
    };
    let kind = |port: Option<u16>| match port {
        Some(p) => format!("{}/{p}", ov.mode()),
        None => ov.mode().to_string(),
    };
    for n in others {
        let Some(vtep) = &n.vtep else { continue };
        let Some((protocol, p, probe)) = crafted(ov, n.address, None, vtep.address, vtep.mac)
        else {
            return;
        };
        let to_node = Target {
            node: Some(n.name.clone()),
            agent: Some(AgentKind::Host),
            service: None,
            address: IpAddr::V4(n.address),
            port: p,
            protocol,
        };
        let receipt = n.agents.host.as_ref().map(|a| a.port);
        if let Some(planned) = out.push(
            PathClass::Overlay,
            host(&c.name),
            to_node,
            &format!("{}/host", n.name),
            &kind(p),
            probe,
        ) {
            out.out.set_receipt_port(planned, receipt);
        }
        if n.agents.host.is_none() {
            continue;
        }
        let (probe, udp) = match *ov {
            Overlay::Vxlan { port, vni, .. } => (
                Probe::Vxlan(VxlanProbe {
                    address: c.address.into(),
                    port,
                    vni,
                    nonce: None,
                    inner_source: Some(vtep.address),
                    inner_destination: None,
                    destination_mac: None,
                }),
                port,
            ),
            Overlay::Wireguard { port, .. } => (
                Probe::Wireguard(WireguardProbe {
                    address: c.address,
                    port,
                    nonce: None,
                }),
                port,
            ),
            Overlay::Geneve { .. } | Overlay::Ipip { .. } | Overlay::None { .. } => continue,
        };
        let to_candidate = Target {
            node: Some(c.name.clone()),
            agent: Some(AgentKind::Host),
            service: None,
            address: IpAddr::V4(c.address),
            port: Some(udp.get()),
            protocol: Protocol::Udp,
        };
        if let Some(planned) = out.push(
            PathClass::Overlay,
            host(&n.name),
            to_candidate,
            &format!("{}/host", c.name),
            &kind(Some(udp.get())),
            probe,
        ) {
            out.out.set_receipt_port(planned, Some(c.agent_port));
        }
    }
}

/// One full-size packet with DF set from the candidate to each node: exactly the underlay path
/// MTU the overlay needs (its MTU plus the encapsulation's overhead, 1450 + 50 for VXLAN). A
/// path that cannot carry it drops the overlay's full-size packets once the node has joined.
fn underlay_mtu(inv: &Inventory, c: &Candidate, others: &[&Node], out: &mut Builder<'_>) {
    let Some(size) = inv.cluster.overlay.as_ref().and_then(underlay_mtu_needed) else {
        return;
    };
    for n in others {
        out.push(
            PathClass::Overlay,
            host(&c.name),
            Target {
                node: Some(n.name.clone()),
                agent: Some(AgentKind::Host),
                service: None,
                address: IpAddr::V4(n.address),
                port: None,
                protocol: Protocol::Icmp,
            },
            &format!("{}/host", n.name),
            &format!("mtu/{size}"),
            Probe::Mtu(MtuProbe {
                address: n.address.into(),
                size: Some(size),
            }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::inventory;
    use probe_proto::Vni;

    fn candidate(role: Role) -> Candidate {
        Candidate {
            name: "new".into(),
            address: "192.168.56.50".parse().unwrap(),
            exec: vec!["ip".into(), "netns".into(), "exec".into(), "labnew".into()],
            role,
            agent_port: probe_proto::Port::new(9917).unwrap(),
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
        let v = preflight(&inv, &candidate(Role::Worker)).to_vec();
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
        let v = preflight(&inv, &candidate(Role::ControlPlane)).to_vec();
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
            [6443, 10250, 2379, 2380, 179, 5473]
        );
        assert_eq!(standin_tcp_ports(&inv, Role::Worker), [10250, 179, 5473]);
    }

    #[test]
    fn cni_ports_only_where_served_typha_on_one_node_bgp_in_the_mesh() {
        let mut inv = inventory(3, 1, "calico");
        // Typha on n2 only, BGP on every node of a full mesh.
        for n in &mut inv.nodes {
            n.serves = Some(if n.name == "n2" {
                crate::testutil::ports(&[179, 5473])
            } else {
                crate::testutil::ports(&[179])
            });
        }
        inv.cluster.bgp = Some(crate::inventory::Bgp {
            mesh: true,
            as_number: Some(64512),
        });
        let v = preflight(&inv, &candidate(Role::Worker)).to_vec();
        let typha: Vec<&str> = v
            .iter()
            .filter(|p| p.id.ends_with("tcp/5473"))
            .map(|p| p.id.as_str())
            .collect();
        assert_eq!(
            typha,
            ["node-to-node:new/host->n2/host:tcp/5473"],
            "Typha only toward the node that runs it, never toward the candidate"
        );
        assert_eq!(
            count(&v, true, "tcp/179"),
            3,
            "the candidate joins the mesh"
        );
        assert_eq!(count(&v, false, "tcp/179"), 3);
        assert_eq!(standin_tcp_ports(&inv, Role::Worker), [10250, 179]);
        // Without a mesh the peers are unknown: no BGP either way.
        inv.cluster.bgp = None;
        let v = preflight(&inv, &candidate(Role::Worker)).to_vec();
        assert_eq!(count(&v, true, "tcp/179") + count(&v, false, "tcp/179"), 0);
    }

    #[test]
    fn tcp_probes_get_their_receivers_sniffer_as_witness() {
        let inv = inventory(2, 1, "flannel");
        let v = preflight(&inv, &candidate(Role::Worker)).to_vec();
        let tcp: Vec<&PlannedProbe> = v
            .iter()
            .filter(|p| matches!(p.probe, Probe::Tcp(_)))
            .collect();
        assert_eq!(tcp.len(), 4);
        assert!(
            tcp.iter().all(|p| p.receipt_port == Port::new(9917)),
            "{tcp:#?}"
        );
    }

    #[test]
    fn one_df_packet_per_node_at_the_underlay_mtu_the_overlay_needs() {
        let mut inv = inventory(3, 1, "flannel");
        let v = preflight(&inv, &candidate(Role::Worker)).to_vec();
        let mtu: Vec<&PlannedProbe> = v
            .iter()
            .filter(|p| matches!(p.probe, Probe::Mtu(_)))
            .collect();
        assert_eq!(mtu.len(), 3, "one per node");
        assert!(mtu.iter().all(|p| p.from.node == "new"
            && matches!(
                p.probe,
                Probe::Mtu(MtuProbe {
                    size: Some(1500),
                    ..
                })
            )
            && p.id.ends_with("mtu/1500")
            && p.to.protocol == Protocol::Icmp));
        // IP-in-IP adds 20 bytes; an unknown overlay MTU plans nothing.
        if let Some(ov) = inv.cluster.overlay.as_mut() {
            *ov = Overlay::Ipip { mtu: Some(1480) };
        }
        let v = preflight(&inv, &candidate(Role::Worker)).to_vec();
        assert_eq!(count(&v, true, "mtu/1500"), 3);
        if let Some(ov) = inv.cluster.overlay.as_mut() {
            *ov.mtu_mut() = None;
        }
        let v = preflight(&inv, &candidate(Role::Worker)).to_vec();
        assert!(!v.iter().any(|p| matches!(p.probe, Probe::Mtu(_))));
        // Native routing encapsulates nothing: no overlay need to check the underlay against.
        if let Some(ov) = inv.cluster.overlay.as_mut() {
            *ov = Overlay::None { mtu: Some(1500) };
        }
        let v = preflight(&inv, &candidate(Role::Worker)).to_vec();
        assert!(!v.iter().any(|p| matches!(p.probe, Probe::Mtu(_))));
    }

    #[test]
    fn the_overlay_probes_follow_the_clusters_encapsulation() {
        let mut inv = inventory(3, 1, "cilium");
        if let Some(ov) = inv.cluster.overlay.as_mut() {
            *ov = Overlay::Geneve {
                port: Port::new(6081).unwrap(),
                vni: Vni::new(2).unwrap(),
                mtu: ov.mtu(),
            };
        }
        let v = preflight(&inv, &candidate(Role::Worker)).to_vec();
        assert_eq!(count(&v, true, "geneve/6081"), 3);
        assert_eq!(
            count(&v, false, "geneve/6081"),
            0,
            "no tunnel device on the candidate yet to decapsulate it"
        );
        assert!(!v.iter().any(|p| matches!(p.probe, Probe::Vxlan(_))));
        assert_eq!(standin_udp_ports(&inv), [6081]);
        if let Some(ov) = inv.cluster.overlay.as_mut() {
            *ov = Overlay::Wireguard {
                port: Port::new(51871).unwrap(),
                mtu: ov.mtu(),
            };
        }
        let v = preflight(&inv, &candidate(Role::Worker)).to_vec();
        assert_eq!(count(&v, true, "wireguard/51871"), 3);
        assert_eq!(count(&v, false, "wireguard/51871"), 3, "arrival at its NIC");
        if let Some(ov) = inv.cluster.overlay.as_mut() {
            *ov = Overlay::Ipip { mtu: ov.mtu() };
        }
        let v = preflight(&inv, &candidate(Role::Worker)).to_vec();
        assert_eq!(count(&v, true, ":ipip"), 3);
        assert!(standin_udp_ports(&inv).is_empty());
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
