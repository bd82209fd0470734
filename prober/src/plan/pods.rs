//! The pod mesh: agent-to-agent TCP echo between pods, from nodes to pods and from pods to nodes.

use std::net::IpAddr;

use probe_proto::{Probe, TcpProbe};

use super::Builder;
use crate::model::{AgentKind, AgentRef, PathClass, Protocol, Target};

impl Builder<'_> {
    /// Agent-to-agent TCP echo: the pod, node and pod/node matrices.
    pub(super) fn agent_matrix(
        &mut self,
        path: PathClass,
        from_kind: AgentKind,
        to_kind: AgentKind,
    ) {
        for (fnode, _) in self.agents(from_kind) {
            for (tnode, tagent) in self.agents(to_kind) {
                let from = AgentRef {
                    node: fnode.name.clone(),
                    agent: from_kind,
                };
                let to = Target {
                    node: Some(tnode.name.clone()),
                    agent: Some(to_kind),
                    service: None,
                    address: IpAddr::V4(tagent.address),
                    port: Some(tagent.port.get()),
                    protocol: Protocol::Tcp,
                };
                let label = format!("{}/{}", tnode.name, to_kind.as_str());
                let probe = Probe::Tcp(TcpProbe {
                    address: IpAddr::V4(tagent.address),
                    port: tagent.port,
                    echo: true,
                });
                self.push(
                    path,
                    from,
                    to,
                    &label,
                    &format!("tcp/{}", tagent.port),
                    probe,
                );
            }
        }
    }
}
