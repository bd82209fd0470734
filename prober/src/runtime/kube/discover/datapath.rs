//! The CNI's data path as discovery read it (overlay, BGP, per-node pod ranges, tunnel
//! endpoints, served ports), and the inventory's nodes built from it.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Node as K8sNode;

use super::{Raw, calico, cidr, cilium, cni, family, flannel};
use crate::inventory::{Agents, Cidr, Cni, Family, NO_IPV4, Node, Overlay, OverlayMode};

fn config<'a>(
    raw: &'a Raw,
    agent: Option<&DaemonSet>,
    name: &str,
) -> Option<&'a BTreeMap<String, String>> {
    let ns = agent
        .and_then(|d| d.metadata.namespace.clone())
        .unwrap_or_else(|| "kube-system".into());
    raw.configmaps.get(&(ns, name.to_string()))
}

/// The CNI's facts: overlay, BGP, per-node ranges, VTEPs and served ports, cluster pod range.
pub(super) struct DataPath {
    pub(super) overlay: Option<Overlay>,
    pub(super) bgp: Option<crate::inventory::Bgp>,
    /// Per node: pod ranges that replace `spec.podCIDR` (`CiliumNodes`, Calico blocks); `None`
    /// keeps `spec.podCIDR`; an empty list means "none" (EKS).
    pub(super) node_cidrs: Option<BTreeMap<String, Vec<Cidr>>>,
    pub(super) cluster_cidr: Option<Cidr>,
    /// The CNI's IPv6 pod range, when it runs IPv6.
    pub(super) cluster_cidr6: Option<Cidr>,
    pub(super) typha_nodes: Vec<String>,
    /// Cilium's tunnel endpoints by node, from the `CiliumNodes` (when read).
    pub(super) cilium_vteps: BTreeMap<String, Ipv4Addr>,
    /// The CNI ports every node serves, before Typha.
    pub(super) serves: Option<Vec<u16>>,
}

pub(super) fn data_path(raw: &Raw, cni: Cni, agent: Option<&DaemonSet>) -> DataPath {
    let mut dp = DataPath {
        overlay: None,
        bgp: None,
        node_cidrs: None,
        cluster_cidr: None,
        cluster_cidr6: None,
        typha_nodes: Vec::new(),
        cilium_vteps: BTreeMap::new(),
        serves: None,
    };
    match cni {
        Cni::Flannel | Cni::Canal => {
            let cm = agent
                .and_then(|d| cni::configmap_volume(d, "flannel-cfg"))
                .and_then(|name| config(raw, agent, &name));
            let conf = cm
                .and_then(|c| c.get("net-conf.json"))
                .and_then(|t| flannel::net_conf(t));
            let veth_mtu = cm
                .and_then(|c| c.get("veth_mtu"))
                .and_then(|m| m.trim().parse().ok())
                .filter(|m| *m != 0);
            dp.overlay = flannel::overlay(&raw.nodes, conf.as_ref(), veth_mtu);
            dp.cluster_cidr = conf.as_ref().and_then(|c| c.network);
            dp.cluster_cidr6 = conf.and_then(|c| c.network6);
            // flannel serves no TCP port to other nodes; Canal's calico-node runs no BIRD.
            dp.serves = Some(Vec::new());
        }
        Cni::Cilium => {
            let empty = BTreeMap::new();
            let c = config(raw, agent, "cilium-config").unwrap_or(&empty);
            let anetd = agent.and_then(|d| d.metadata.name.as_deref()) == Some("anetd");
            // Dataplane V2 needs VPC-native routing: never a tunnel.
            dp.overlay = if anetd { None } else { cilium::overlay(c) };
            dp.cluster_cidr = cilium::cluster_pod_cidr(c);
            dp.cluster_cidr6 = cilium::cluster_pod_cidr6(c);
            if !cilium::uses_node_pod_cidrs(c) && !raw.cilium_nodes.is_empty() {
                dp.node_cidrs = Some(cilium::node_pod_cidrs(&raw.cilium_nodes));
            }
            dp.cilium_vteps = cilium::internal_ips(&raw.cilium_nodes);
            // GKE does not document whether anetd runs cilium-health: probe no port there.
            dp.serves = Some(if !anetd && cilium::health_checking(c) {
                vec![cilium::HEALTH_PORT]
            } else {
                Vec::new()
            });
        }
        Cni::Calico => {
            let pod = agent.and_then(cni::pod_spec);
            let f = calico::facts(&raw.calico, pod);
            dp.overlay = f.overlay;
            dp.cluster_cidr = f.pool;
            dp.cluster_cidr6 = f.pool6;
            if !f.blocks.is_empty() {
                dp.node_cidrs = Some(f.blocks);
            }
            dp.serves = Some(if f.bgp.is_some() {
                vec![calico::BGP_PORT]
            } else {
                Vec::new()
            });
            dp.bgp = f.bgp;
            dp.typha_nodes = f.typha_nodes;
        }
        Cni::AwsVpc => {
            // Pods take secondary addresses of the node's VPC subnet: no per-node range.
            dp.node_cidrs = Some(BTreeMap::new());
            dp.serves = Some(Vec::new());
        }
        Cni::Weave | Cni::Antrea | Cni::KubeRouter | Cni::Other => {}
    }
    dp
}

pub(super) fn nodes_of(raw: &Raw, cni: Cni, dp: &DataPath) -> Vec<Node> {
    let mut nodes = Vec::new();
    for n in &raw.nodes {
        // The agents run on Linux nodes only (their node selector): a Windows node has none.
        let os = n
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("kubernetes.io/os"));
        if os.is_some_and(|os| os != "linux") {
            continue;
        }
        let ips = family::node_ips(n);
        if ips.is_empty() {
            continue;
        }
        let name = n.metadata.name.clone().unwrap_or_default();
        // Every range, in order: a Calico node owns several IPAM blocks.
        let mut ranges: Vec<Cidr> = match &dp.node_cidrs {
            Some(map) => map.get(&name).cloned().unwrap_or_default(),
            None => n
                .spec
                .as_ref()
                .map(|s| {
                    s.pod_cidr
                        .iter()
                        .chain(s.pod_cidrs.iter().flatten())
                        .filter_map(|c| cidr::parse(c))
                        .collect()
                })
                .unwrap_or_default(),
        };
        ranges.dedup();
        let pod_cidr = ranges.first().copied();
        let range_of = |f: Family| ranges.iter().copied().find(|c| c.family() == f);
        let (vtep, vtep6) = match (cni, dp.overlay.as_ref().map(Overlay::mode)) {
            (Cni::Flannel | Cni::Canal, Some(OverlayMode::Vxlan)) => (
                flannel::vtep(n, range_of(Family::Ipv4)),
                flannel::vtep6(n, range_of(Family::Ipv6)),
            ),
            (Cni::Calico, Some(mode)) => (calico::vtep(n, mode), calico::vtep6(n, mode)),
            (Cni::Cilium, Some(_)) => (cilium::vtep(n, &dp.cilium_vteps), None),
            _ => (None, None),
        };
        let serves = dp.serves.clone().map(|mut ports| {
            if dp.typha_nodes.contains(&name) {
                ports.push(calico::TYPHA_PORT);
            }
            ports
        });
        nodes.push(Node {
            roles: roles(n)
                .into_iter()
                .map(crate::inventory::NodeRole::from)
                .collect(),
            address: ips.v4.unwrap_or(NO_IPV4),
            address6: ips.v6,
            pod_cidr,
            pod_cidrs: if ranges.len() > 1 { ranges } else { Vec::new() },
            host_root: Some(PathBuf::from("/host")),
            vtep,
            vtep6,
            zone: n
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("topology.kubernetes.io/zone").cloned()),
            serves: serves.map(|p| p.into_iter().filter_map(probe_proto::Port::new).collect()),
            agents: Agents {
                host: None,
                pod: None,
            },
            name,
        });
    }
    nodes
}

fn roles(n: &K8sNode) -> Vec<String> {
    let mut r: Vec<String> = n
        .metadata
        .labels
        .iter()
        .flatten()
        .filter_map(|(k, _)| k.strip_prefix("node-role.kubernetes.io/").map(String::from))
        .collect();
    r.sort();
    r
}
