//! Cluster DNS: every pod asks the DNS Service and each DNS pod, over UDP and TCP, for each name.

use std::net::IpAddr;

use probe_proto::{DnsProbe, DnsRecordType, Probe, Transport};

use super::{Builder, family_suffix};
use crate::inventory::{Family, Inventory};
use crate::model::{AgentKind, AgentRef, PathClass, Protocol, Target};

impl<'a> Builder<'a> {
    pub(super) fn dns(&mut self) {
        let inv: &'a Inventory = self.inv;
        let Some(dns) = inv.cluster.dns.clone() else {
            return;
        };
        let names = if dns.names.is_empty() {
            vec!["kubernetes.default.svc.cluster.local".to_string()]
        } else {
            dns.names.clone()
        };
        let mut servers: Vec<_> = dns
            .cluster_ips()
            .map(|svc| {
                (
                    svc,
                    "svc/kube-dns".to_string(),
                    "kube-dns".to_string(),
                    None,
                )
            })
            .collect();
        for ep in &dns.endpoints {
            let node = inv
                .nodes
                .iter()
                .find(|n| n.holds_pod_ip(ep.ip()))
                .map(|n| n.name.clone());
            servers.push((
                *ep,
                format!("dns-pod/{}", ep.ip()),
                "dns-pod".to_string(),
                node,
            ));
        }
        // The record the names have: the `kubernetes` Service's family (single-stack, the
        // primary one), asked over either transport family.
        let record_type = match Family::of(inv.cluster.api.service.ip()) {
            Family::Ipv4 => DnsRecordType::A,
            Family::Ipv6 => DnsRecordType::Aaaa,
        };
        for (fnode, agent) in self.agents(AgentKind::Pod) {
            let from = AgentRef {
                node: fnode.name.clone(),
                agent: AgentKind::Pod,
            };
            let speaks = |ip: IpAddr| agent.ip(Family::of(ip)).is_some();
            for (server, label, service, node) in servers.iter().filter(|s| speaks(s.0.ip())) {
                let suffix = family_suffix(Family::of(server.ip()));
                for transport in [Transport::Udp, Transport::Tcp] {
                    for name in &names {
                        let (proto, p) = match transport {
                            Transport::Udp => ("udp", Protocol::Udp),
                            Transport::Tcp => ("tcp", Protocol::Tcp),
                        };
                        let to = Target {
                            node: node.clone(),
                            agent: None,
                            service: Some(service.clone()),
                            address: server.ip(),
                            port: Some(server.port()),
                            protocol: p,
                        };
                        let probe = Probe::Dns(DnsProbe {
                            name: name.clone(),
                            record_type,
                            protocol: transport,
                            server: Some(*server),
                            resolv_conf: None,
                        });
                        self.push(
                            PathClass::Dns,
                            from.clone(),
                            to,
                            label,
                            &format!("{proto}/{}/{name}{suffix}", server.port()),
                            probe,
                        );
                    }
                }
            }
        }
    }
}
