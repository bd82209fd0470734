//! Node to node: the TCP ports between hosts that the cluster needs (docs/design.md section 8),
//! which the lab's stand-ins also serve.

use std::net::IpAddr;

use probe_proto::Probe;

use super::{Builder, port};
use crate::inventory::{Cni, Inventory};
use crate::model::{AgentKind, AgentRef, PathClass, Protocol, Target};

/// Ports between hosts that the cluster needs (docs/design.md section 8), beyond the agent's own.
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

/// The TCP ports a node serves to the other nodes (docs/design.md section 8): the lab's stand-ins
/// listen on exactly these.
#[must_use]
pub fn served_tcp_ports(cni: Cni, control_plane: bool) -> Vec<u16> {
    host_ports(cni)
        .into_iter()
        .filter(|h| control_plane || !h.to_control_plane_only)
        .map(|h| h.port)
        .collect()
}

/// The TCP ports a CNI's agents listen on between nodes (docs/design.md section 8).
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

impl<'a> Builder<'a> {
    /// Every host agent connects (no echo) to each required port of every other node.
    pub(super) fn node_to_node(&mut self) {
        let inv: &'a Inventory = self.inv;
        let ports = host_ports(inv.cluster.cni);
        for (fnode, _) in self.agents(AgentKind::Host) {
            for tnode in inv.nodes.iter().filter(|t| t.name != fnode.name) {
                for hp in &ports {
                    if (hp.to_control_plane_only && !tnode.is_control_plane())
                        || (hp.from_control_plane_only && !fnode.is_control_plane())
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
                        address: IpAddr::V4(tnode.address),
                        port: Some(hp.port),
                        protocol: Protocol::Tcp,
                    };
                    let probe = Probe::Tcp {
                        address: IpAddr::V4(tnode.address),
                        port: port(hp.port),
                        echo: false,
                    };
                    self.push(
                        PathClass::NodeToNode,
                        from,
                        to,
                        &format!("{}/host", tnode.name),
                        &format!("tcp/{}", hp.port),
                        probe,
                    );
                }
            }
        }
    }
}
