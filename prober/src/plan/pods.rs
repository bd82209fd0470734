//! The pod mesh: agent-to-agent TCP echo between pods, from nodes to pods and from pods to nodes.

use probe_proto::{Probe, TcpProbe};

use super::{Builder, family_suffix};
use crate::model::{AgentKind, AgentRef, PathClass, Protocol, Target};

impl Builder<'_> {
    /// Agent-to-agent TCP echo: the pod, node and pod/node matrices, in each family the cluster
    /// has (IPv4 first), between agents that both have an address in it.
    pub(super) fn agent_matrix(
        &mut self,
        path: PathClass,
        from_kind: AgentKind,
        to_kind: AgentKind,
    ) {
        for family in self.inv.families() {
            for (fnode, _, _) in self.agents_in(from_kind, family) {
                for (tnode, tagent, address) in self.agents_in(to_kind, family) {
                    let from = AgentRef {
                        node: fnode.name.clone(),
                        agent: from_kind,
                    };
                    let to = Target {
                        node: Some(tnode.name.clone()),
                        agent: Some(to_kind),
                        service: None,
                        address,
                        port: Some(tagent.port.get()),
                        protocol: Protocol::Tcp,
                    };
                    let label = format!("{}/{}", tnode.name, to_kind.as_str());
                    let probe = Probe::Tcp(TcpProbe {
                        address,
                        port: tagent.port,
                        echo: true,
                    });
                    let what = format!("tcp/{}{}", tagent.port, family_suffix(family));
                    self.push(path, from, to, &label, &what, probe);
                }
            }
        }
    }
}
