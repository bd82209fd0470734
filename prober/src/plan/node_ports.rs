//! Node to node: the TCP ports between hosts that the cluster needs, which the lab's stand-ins
//! also serve (docs/design.md, "Ports the cluster needs").

use probe_proto::{Probe, TcpProbe};

use super::{Builder, family_suffix, port};
use crate::inventory::{Cni, Inventory, Node};
use crate::model::{AgentKind, AgentRef, PathClass, Protocol, Target};

/// Ports between hosts that the cluster needs (docs/design.md, "Ports the cluster needs"),
/// beyond the agent's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct HostPort {
    port: u16,
    to_control_plane_only: bool,
    from_control_plane_only: bool,
}

fn host_ports(cni: Cni) -> Vec<HostPort> {
    let any = |port| HostPort {
        port,
        to_control_plane_only: false,
        from_control_plane_only: false,
    };
    let mut v = vec![
        HostPort {
            port: 6443,
            to_control_plane_only: true,
            from_control_plane_only: false,
        },
        any(10250),
        HostPort {
            port: 2379,
            to_control_plane_only: true,
            from_control_plane_only: true,
        },
        HostPort {
            port: 2380,
            to_control_plane_only: true,
            from_control_plane_only: true,
        },
    ];
    v.extend(cni_tcp_ports(cni).iter().map(|&p| any(p)));
    v
}

/// The TCP ports a node serves to the other nodes (docs/design.md, "Ports the cluster needs"):
/// the lab's stand-ins listen on exactly these.
#[must_use]
pub fn served_tcp_ports(cni: Cni, control_plane: bool) -> Vec<u16> {
    host_ports(cni)
        .into_iter()
        .filter(|h| control_plane || !h.to_control_plane_only)
        .map(|h| h.port)
        .collect()
}

/// The TCP ports a CNI's agents listen on between nodes (docs/design.md, "Ports the cluster
/// needs").
#[must_use]
pub fn cni_tcp_ports(cni: Cni) -> &'static [u16] {
    match cni {
        Cni::Calico => &[179, 5473],
        Cni::Cilium => &[4240],
        Cni::Weave => &[6783],
        Cni::KubeRouter => &[179],
        Cni::Flannel | Cni::Canal | Cni::Antrea | Cni::AwsVpc | Cni::Other => &[],
    }
}

/// The CNI ports only some nodes serve (Calico's Typha runs on a few nodes, chosen by its
/// `Deployment`): where the inventory does not say which (`serves`), nothing listening there on
/// a node is no fault.
#[must_use]
pub fn optional_cni_ports(cni: Cni) -> &'static [u16] {
    match cni {
        Cni::Calico => &[5473],
        _ => &[],
    }
}

/// Whether a CNI port is probed from `from` to `to`. Where discovery says which node serves which
/// CNI port (`serves`), a port is probed only toward the nodes that serve it (Typha runs on a
/// few nodes), and BGP only between two speakers of a full mesh; without that knowledge (an
/// inventory that does not say), every node is assumed to serve its CNI's ports.
pub(super) fn cni_port_served(inv: &Inventory, from: &Node, to: &Node, port: u16) -> bool {
    if !cni_tcp_ports(inv.cluster.cni).contains(&port) {
        return true;
    }
    let Some(served) = &to.serves else {
        return true;
    };
    if !served.iter().any(|p| p.get() == port) {
        return false;
    }
    if port == BGP_PORT {
        let mesh = inv.cluster.bgp.as_ref().is_some_and(|b| b.mesh);
        let speaks = from
            .serves
            .as_ref()
            .is_some_and(|s| s.iter().any(|p| p.get() == BGP_PORT));
        return mesh && speaks;
    }
    true
}

/// BGP, between the nodes of a full mesh.
const BGP_PORT: u16 = 179;

impl<'a> Builder<'a> {
    /// Every host agent connects (no echo) to each required port of every other node.
    pub(super) fn node_to_node(&mut self) {
        let inv: &'a Inventory = self.inv;
        let ports = host_ports(inv.cluster.cni);
        for family in inv.families() {
            for (fnode, _, _) in self.agents_in(AgentKind::Host, family) {
                for tnode in inv.nodes.iter().filter(|t| t.name != fnode.name) {
                    let Some(address) = tnode.ip(family) else {
                        continue;
                    };
                    for hp in &ports {
                        if (hp.to_control_plane_only && !tnode.is_control_plane())
                            || (hp.from_control_plane_only && !fnode.is_control_plane())
                            || !cni_port_served(inv, fnode, tnode, hp.port)
                        {
                            continue;
                        }
                        let from = AgentRef {
                            node: fnode.name.clone(),
                            agent: AgentKind::Host,
                        };
                        let to = Target {
                            node: Some(tnode.name.clone()),
                            agent: None,
                            service: None,
                            address,
                            port: Some(hp.port),
                            protocol: Protocol::Tcp,
                        };
                        let probe = Probe::Tcp(TcpProbe {
                            address,
                            port: port(hp.port),
                            echo: false,
                        });
                        self.push(
                            PathClass::NodeToNode,
                            from,
                            to,
                            &format!("{}/host", tnode.name),
                            &format!("tcp/{}{}", hp.port, family_suffix(family)),
                            probe,
                        );
                    }
                }
            }
        }
    }
}
