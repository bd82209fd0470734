//! Node configuration: each host agent reads its node's files (kubelet.conf, resolv.conf, the CNI
//! config) and asks the API server about the CNI's credentials.

use probe_proto::{NodeProbe, Probe};

use super::Builder;
use crate::model::{AgentKind, AgentRef, PathClass, Protocol, Target};

impl Builder<'_> {
    /// Each host agent reads its node's configuration (and asks the API server about the CNI's
    /// credentials).
    pub(super) fn node_config(&mut self) {
        for (node, agent) in self.agents(AgentKind::Host) {
            let (Some(root), Some(address)) = (&node.host_root, agent.first_ip()) else {
                continue;
            };
            let from = AgentRef {
                node: node.name.clone(),
                agent: AgentKind::Host,
            };
            let to = Target {
                node: Some(node.name.clone()),
                agent: Some(AgentKind::Host),
                service: Some("host-root".into()),
                address,
                port: None,
                protocol: Protocol::Tcp,
            };
            let probe = Probe::Node(NodeProbe {
                root: root.clone(),
                api_check: true,
            });
            self.push(
                PathClass::NodeConfig,
                from,
                to,
                &format!("{}/host", node.name),
                "files",
                probe,
            );
        }
    }
}
