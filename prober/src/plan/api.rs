//! The API server: the `kubernetes` Service and each API endpoint, from every node and every pod,
//! each over its own IP family.

use std::net::{IpAddr, SocketAddr};

use probe_proto::{Probe, TlsProbe};

use super::{Builder, family_suffix, port};
use crate::inventory::{Family, Inventory};
use crate::model::{AgentKind, AgentRef, PathClass, Protocol, Target};

impl<'a> Builder<'a> {
    pub(super) fn api(&mut self) {
        let inv: &'a Inventory = self.inv;
        let api = inv.cluster.api.clone();
        for kind in [AgentKind::Pod, AgentKind::Host] {
            let (svc_path, ep_path) = match kind {
                AgentKind::Pod => (PathClass::PodToService, PathClass::PodToApiserver),
                AgentKind::Host => (PathClass::NodeToService, PathClass::NodeToApiserver),
            };
            for (fnode, agent) in self.agents(kind) {
                let from = AgentRef {
                    node: fnode.name.clone(),
                    agent: kind,
                };
                // Each target over its own family, from agents that have that family.
                let speaks = |ip: IpAddr| agent.ip(Family::of(ip)).is_some();
                for svc in api.cluster_ips().filter(|s| speaks(s.ip())) {
                    let suffix = family_suffix(Family::of(svc.ip()));
                    self.push(
                        svc_path,
                        from.clone(),
                        tls_target(svc, None, "kubernetes"),
                        "svc/kubernetes",
                        &format!("tls/{}{suffix}", svc.port()),
                        tls(svc, Some("kubernetes.default.svc")),
                    );
                }
                for ep in api.endpoints.iter().filter(|e| speaks(e.ip())) {
                    let node = inv
                        .nodes
                        .iter()
                        .find(|n| n.ips().any(|ip| ip == ep.ip()))
                        .map(|n| n.name.clone());
                    let label = node
                        .as_ref()
                        .map_or_else(|| ep.ip().to_string(), |n| format!("{n}/apiserver"));
                    let suffix = family_suffix(Family::of(ep.ip()));
                    self.push(
                        ep_path,
                        from.clone(),
                        tls_target(*ep, node, "apiserver"),
                        &label,
                        &format!("tls/{}{suffix}", ep.port()),
                        tls(*ep, None),
                    );
                }
            }
        }
    }
}

fn tls_target(addr: SocketAddr, node: Option<String>, service: &str) -> Target {
    Target {
        node,
        agent: None,
        service: Some(service.into()),
        address: addr.ip(),
        port: Some(addr.port()),
        protocol: Protocol::Tcp,
    }
}

fn tls(addr: SocketAddr, server_name: Option<&str>) -> Probe {
    Probe::Tls(TlsProbe {
        address: addr.ip(),
        port: port(addr.port()),
        server_name: server_name.map(String::from),
        ca_file: None,
        require_verified: false,
        path: "/livez".into(),
        token_file: None,
    })
}
