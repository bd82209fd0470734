//! Pure: the topology becomes the matrix — every probe every agent must run, by path class.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use probe_proto::{DnsRecordType, MacAddr, Port, Probe, Transport, Vni};

use crate::inventory::{Agent, Cni, Inventory, Node};
use crate::model::{AgentKind, AgentRef, PathClass, Protocol, Target};

/// One cell of the matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedProbe {
    pub id: String,
    pub path: PathClass,
    pub from: AgentRef,
    pub to: Target,
    pub probe: Probe,
    /// The port of the receiving node's host agent, whose sniffer confirms a crafted overlay
    /// datagram (`seen`); `None` for probes that are answered directly.
    pub receipt_port: Option<Port>,
}

/// Which paths and nodes to plan.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only these path classes (all when empty).
    pub paths: Vec<PathClass>,
    pub skip_paths: Vec<PathClass>,
    /// Only probes from or to these nodes (all when empty).
    pub nodes: Vec<String>,
}

impl Filter {
    fn wants(&self, p: PathClass) -> bool {
        (self.paths.is_empty() || self.paths.contains(&p)) && !self.skip_paths.contains(&p)
    }

    fn touches(&self, from: &str, to: Option<&str>) -> bool {
        self.nodes.is_empty()
            || self
                .nodes
                .iter()
                .any(|n| n == from || Some(n.as_str()) == to)
    }
}

/// Ports between hosts that the cluster needs (DESIGN.md section 8), beyond the agent's own.
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

/// The TCP ports a node serves to the other nodes (DESIGN.md section 8): the lab's stand-ins
/// listen on exactly these.
#[must_use]
pub fn served_tcp_ports(cni: Cni, control_plane: bool) -> Vec<u16> {
    host_ports(cni)
        .into_iter()
        .filter(|h| control_plane || !h.to_control_plane_only)
        .map(|h| h.port)
        .collect()
}

/// The TCP ports a CNI's agents listen on between nodes (DESIGN.md section 8).
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

/// Stable, readable ids: `pod-to-pod:n1/pod->n3/pod:tcp/9917`.
fn id(path: PathClass, from: &AgentRef, to: &str, what: &str) -> String {
    format!("{path}:{from}->{to}:{what}")
}

struct Builder<'a> {
    inv: &'a Inventory,
    filter: &'a Filter,
    out: Vec<PlannedProbe>,
}

impl<'a> Builder<'a> {
    fn push(
        &mut self,
        path: PathClass,
        from: AgentRef,
        to: Target,
        label: &str,
        what: &str,
        probe: Probe,
    ) -> Option<&mut PlannedProbe> {
        if !self.filter.wants(path) || !self.filter.touches(&from.node, to.node.as_deref()) {
            return None;
        }
        let id = id(path, &from, label, what);
        self.out.push(PlannedProbe {
            id,
            path,
            from,
            to,
            probe,
            receipt_port: None,
        });
        self.out.last_mut()
    }

    fn agents(&self, kind: AgentKind) -> Vec<(&'a Node, &'a Agent)> {
        let inv: &'a Inventory = self.inv;
        inv.nodes
            .iter()
            .filter_map(|n| {
                let a = match kind {
                    AgentKind::Host => n.agents.host.as_ref(),
                    AgentKind::Pod => n.agents.pod.as_ref(),
                };
                a.map(|a| (n, a))
            })
            .collect()
    }

    /// Agent-to-agent TCP echo: the pod, node and pod/node matrices.
    fn agent_matrix(&mut self, path: PathClass, from_kind: AgentKind, to_kind: AgentKind) {
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
                    port: Some(tagent.port),
                    protocol: Protocol::Tcp,
                };
                let label = format!("{}/{}", tnode.name, to_kind.as_str());
                let probe = Probe::Tcp {
                    address: IpAddr::V4(tagent.address),
                    port: port(tagent.port),
                    echo: true,
                };
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

    fn node_to_node(&mut self) {
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

    fn overlay(&mut self) {
        let inv: &'a Inventory = self.inv;
        let Some(ov) = inv.cluster.overlay.clone() else {
            return;
        };
        if ov.mode != "vxlan" {
            return;
        }
        for (fnode, _) in self.agents(AgentKind::Host) {
            for tnode in inv.nodes.iter().filter(|t| t.name != fnode.name) {
                let Some(vtep) = &tnode.vtep else { continue };
                let from = AgentRef {
                    node: fnode.name.clone(),
                    agent: AgentKind::Host,
                };
                let label = format!("{}/host", tnode.name);
                let vtep_target = Target {
                    node: Some(tnode.name.clone()),
                    agent: None,
                    service: Some("vtep".into()),
                    address: IpAddr::V4(vtep.address),
                    port: None,
                    protocol: Protocol::Icmp,
                };
                self.push(
                    PathClass::Overlay,
                    from.clone(),
                    vtep_target,
                    &format!("{}/vtep", tnode.name),
                    "icmp",
                    Probe::Vtep {
                        address: vtep.address,
                    },
                );
                let vx_target = Target {
                    node: Some(tnode.name.clone()),
                    agent: Some(AgentKind::Host),
                    service: None,
                    address: IpAddr::V4(tnode.address),
                    port: Some(ov.port),
                    protocol: Protocol::Udp,
                };
                let probe = Probe::Vxlan {
                    address: tnode.address,
                    port: port(ov.port),
                    vni: Vni::new(ov.vni).unwrap_or_default(),
                    nonce: None,
                    inner_source: fnode.vtep.as_ref().map(|v| v.address),
                    inner_destination: Some(vtep.address),
                    destination_mac: Some(MacAddr(vtep.mac.0)),
                };
                let receipt_port = tnode.agents.host.as_ref().and_then(|a| Port::new(a.port));
                if let Some(p) = self.push(
                    PathClass::Overlay,
                    from,
                    vx_target,
                    &label,
                    &format!("vxlan/{}", ov.port),
                    probe,
                ) {
                    p.receipt_port = receipt_port;
                }
            }
        }
        // Full-size packets between pods: small ones passing while these vanish is an MTU hole.
        let Some(size) = ov.mtu else { return };
        for (fnode, _) in self.agents(AgentKind::Pod) {
            for (tnode, tagent) in self
                .agents(AgentKind::Pod)
                .into_iter()
                .filter(|(t, _)| t.name != fnode.name)
            {
                let from = AgentRef {
                    node: fnode.name.clone(),
                    agent: AgentKind::Pod,
                };
                let to = Target {
                    node: Some(tnode.name.clone()),
                    agent: Some(AgentKind::Pod),
                    service: None,
                    address: IpAddr::V4(tagent.address),
                    port: None,
                    protocol: Protocol::Icmp,
                };
                let probe = Probe::Mtu {
                    address: tagent.address,
                    size,
                };
                self.push(
                    PathClass::Overlay,
                    from,
                    to,
                    &format!("{}/pod", tnode.name),
                    &format!("mtu/{size}"),
                    probe,
                );
            }
        }
    }

    fn api(&mut self) {
        let inv: &'a Inventory = self.inv;
        let api = inv.cluster.api.clone();
        for kind in [AgentKind::Pod, AgentKind::Host] {
            let (svc_path, ep_path) = match kind {
                AgentKind::Pod => (PathClass::PodToService, PathClass::PodToApiserver),
                AgentKind::Host => (PathClass::NodeToService, PathClass::NodeToApiserver),
            };
            for (fnode, _) in self.agents(kind) {
                let from = AgentRef {
                    node: fnode.name.clone(),
                    agent: kind,
                };
                self.push(
                    svc_path,
                    from.clone(),
                    tls_target(api.service, None, "kubernetes"),
                    "svc/kubernetes",
                    &format!("tls/{}", api.service.port()),
                    tls(api.service, Some("kubernetes.default.svc")),
                );
                for ep in &api.endpoints {
                    let node = inv
                        .nodes
                        .iter()
                        .find(|n| IpAddr::V4(n.address) == ep.ip())
                        .map(|n| n.name.clone());
                    let label = node
                        .as_ref()
                        .map_or_else(|| ep.ip().to_string(), |n| format!("{n}/apiserver"));
                    self.push(
                        ep_path,
                        from.clone(),
                        tls_target(*ep, node, "apiserver"),
                        &label,
                        &format!("tls/{}", ep.port()),
                        tls(*ep, None),
                    );
                }
            }
        }
    }

    /// Each host agent reads its node's configuration (and asks the API server about the CNI's
    /// credentials).
    fn node_config(&mut self) {
        for (node, agent) in self.agents(AgentKind::Host) {
            let Some(root) = &node.host_root else {
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
                address: IpAddr::V4(agent.address),
                port: None,
                protocol: Protocol::Tcp,
            };
            let probe = Probe::Node {
                root: root.clone(),
                api_check: true,
            };
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

    fn dns(&mut self) {
        let inv: &'a Inventory = self.inv;
        let Some(dns) = inv.cluster.dns.clone() else {
            return;
        };
        let names = if dns.names.is_empty() {
            vec!["kubernetes.default.svc.cluster.local".to_string()]
        } else {
            dns.names.clone()
        };
        let mut servers = vec![(
            dns.service,
            "svc/kube-dns".to_string(),
            "kube-dns".to_string(),
            None,
        )];
        for ep in &dns.endpoints {
            let node = inv
                .nodes
                .iter()
                .find(|n| {
                    n.pod_cidr
                        .is_some_and(|c| matches!(ep.ip(), IpAddr::V4(a) if c.contains(a)))
                })
                .map(|n| n.name.clone());
            servers.push((
                *ep,
                format!("dns-pod/{}", ep.ip()),
                "dns-pod".to_string(),
                node,
            ));
        }
        for (fnode, _) in self.agents(AgentKind::Pod) {
            let from = AgentRef {
                node: fnode.name.clone(),
                agent: AgentKind::Pod,
            };
            for (server, label, service, node) in &servers {
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
                        let probe = Probe::Dns {
                            name: name.clone(),
                            record_type: DnsRecordType::A,
                            protocol: transport,
                            server: Some(*server),
                            resolv_conf: None,
                        };
                        self.push(
                            PathClass::Dns,
                            from.clone(),
                            to,
                            label,
                            &format!("{proto}/{}/{name}", server.port()),
                            probe,
                        );
                    }
                }
            }
        }
    }
}

fn port(p: u16) -> Port {
    Port::new(p).unwrap_or_else(|| Port::new(1).expect("non-zero"))
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
    Probe::Tls {
        address: addr.ip(),
        port: port(addr.port()),
        server_name: server_name.map(String::from),
        ca_file: None,
        require_verified: false,
        path: "/livez".into(),
        token_file: None,
    }
}

/// The full matrix for `inv`, filtered. Pure; ids are unique and stable.
#[must_use]
pub fn plan(inv: &Inventory, filter: &Filter) -> Vec<PlannedProbe> {
    let mut b = Builder {
        inv,
        filter,
        out: Vec::new(),
    };
    b.agent_matrix(PathClass::PodToPod, AgentKind::Pod, AgentKind::Pod);
    b.agent_matrix(PathClass::NodeToPod, AgentKind::Host, AgentKind::Pod);
    b.agent_matrix(PathClass::PodToNode, AgentKind::Pod, AgentKind::Host);
    b.node_to_node();
    b.overlay();
    b.api();
    b.dns();
    b.node_config();
    b.out
}

/// The probes grouped by the agent that runs them.
#[must_use]
pub fn by_agent(probes: &[PlannedProbe]) -> BTreeMap<AgentRef, Vec<&PlannedProbe>> {
    let mut m: BTreeMap<AgentRef, Vec<&PlannedProbe>> = BTreeMap::new();
    for p in probes {
        m.entry(p.from.clone()).or_default().push(p);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::inventory;

    fn count(probes: &[PlannedProbe], path: PathClass) -> usize {
        probes.iter().filter(|p| p.path == path).count()
    }

    #[test]
    fn matrix_sizes_by_path_class() {
        // (nodes, control planes, cni) -> expected counts per class
        let table: &[(usize, usize, &str, [usize; 10])] = &[
            // pod-pod, node-pod, pod-node, node-node, pod-svc, node-svc, pod-api, node-api, overlay, dns
            (3, 1, "flannel", [9, 9, 9, 2 + 6, 3, 3, 3, 3, 12 + 6, 12]),
            (1, 1, "flannel", [1, 1, 1, 0, 1, 1, 1, 1, 0, 4]),
            // 3 control planes: 6443 to 3 cps from 4 others each (minus self): 12; 10250: 20;
            // etcd 2379/2380 between cps: 3*2*2 = 12.
            (
                5,
                3,
                "flannel",
                [25, 25, 25, 12 + 20 + 12, 5, 5, 15, 15, 40 + 20, 20],
            ),
            // calico adds 179 and 5473 between every ordered pair.
            (
                3,
                1,
                "calico",
                [9, 9, 9, 2 + 6 + 12, 3, 3, 3, 3, 12 + 6, 12],
            ),
        ];
        for (nodes, cps, cni, want) in table {
            let probes = plan(&inventory(*nodes, *cps, cni), &Filter::default());
            let got: Vec<usize> = PathClass::ALL[..10]
                .iter()
                .map(|p| count(&probes, *p))
                .collect();
            assert_eq!(
                count(&probes, PathClass::NodeConfig),
                0,
                "no host roots in this inventory"
            );
            assert_eq!(got, want, "{nodes} nodes, {cps} control planes, {cni}");
        }
    }

    #[test]
    fn ids_are_unique_and_readable() {
        let probes = plan(&inventory(4, 1, "flannel"), &Filter::default());
        let mut ids: Vec<&str> = probes.iter().map(|p| p.id.as_str()).collect();
        assert!(
            ids.contains(&"pod-to-pod:n1/pod->n3/pod:tcp/9917"),
            "{ids:?}"
        );
        assert!(ids.contains(&"overlay:n2/host->n4/host:vxlan/8472"));
        assert!(ids.contains(&"node-to-node:n2/host->n1/host:tcp/6443"));
        assert!(
            ids.contains(&"dns:n2/pod->svc/kube-dns:tcp/53/kubernetes.default.svc.cluster.local")
        );
        assert!(ids.contains(&"pod-to-apiserver:n3/pod->n1/apiserver:tls/6443"));
        let n = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), n, "unique ids");
    }

    #[test]
    fn filters() {
        let inv = inventory(3, 1, "flannel");
        let only = plan(
            &inv,
            &Filter {
                paths: vec![PathClass::Overlay, PathClass::Dns],
                ..Filter::default()
            },
        );
        assert!(
            only.iter()
                .all(|p| matches!(p.path, PathClass::Overlay | PathClass::Dns))
        );
        let skip = plan(
            &inv,
            &Filter {
                skip_paths: vec![PathClass::PodToPod],
                ..Filter::default()
            },
        );
        assert_eq!(count(&skip, PathClass::PodToPod), 0);
        assert_eq!(count(&skip, PathClass::NodeToPod), 9);
        let n3 = plan(
            &inv,
            &Filter {
                nodes: vec!["n3".into()],
                ..Filter::default()
            },
        );
        assert_eq!(
            count(&n3, PathClass::PodToPod),
            5,
            "n3->n1,n2,n3 and n1,n2->n3"
        );
        assert!(
            n3.iter()
                .all(|p| p.from.node == "n3" || p.to.node.as_deref() == Some("n3"))
        );
    }

    #[test]
    fn vxlan_probes_carry_the_peer_vtep() {
        let probes = plan(&inventory(2, 1, "flannel"), &Filter::default());
        let vx = probes
            .iter()
            .find(|p| p.id == "overlay:n1/host->n2/host:vxlan/8472")
            .unwrap();
        match &vx.probe {
            Probe::Vxlan {
                address,
                inner_source,
                inner_destination,
                destination_mac,
                ..
            } => {
                assert_eq!(address.to_string(), "192.168.56.11");
                assert_eq!(inner_source.unwrap().to_string(), "10.244.1.0");
                assert_eq!(inner_destination.unwrap().to_string(), "10.244.2.0");
                assert_eq!(destination_mac.unwrap().to_string(), "02:00:0a:f4:02:00");
            }
            p => panic!("{p:?}"),
        }
    }

    #[test]
    fn twenty_nodes_is_about_four_hundred_pod_pairs() {
        let probes = plan(&inventory(20, 3, "flannel"), &Filter::default());
        assert_eq!(count(&probes, PathClass::PodToPod), 400);
        assert!(probes.len() < 4000, "{}", probes.len());
        assert_eq!(by_agent(&probes).len(), 40);
    }
}
