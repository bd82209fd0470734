//! Cilium (and GKE Dataplane V2, which runs it as `anetd`): the `cilium-config` keys that say
//! how pods reach each other, and where the pod ranges live.

use std::collections::BTreeMap;

use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::Node as K8sNode;
use kube::api::DynamicObject;

use super::{annotation, cidr};
use crate::inventory::{Cidr, Overlay, Vtep};
use probe_proto::{Port, Vni};

/// Cilium's defaults when `tunnel-port` is not set (`pkg/defaults`).
const VXLAN_PORT: Port = Port::new(8472).expect("non-zero");
const GENEVE_PORT: Port = Port::new(6081).expect("non-zero");
/// cilium-health between nodes.
pub const HEALTH_PORT: u16 = 4240;

/// `cilium-config`'s data.
pub type Config = BTreeMap<String, String>;

fn key<'a>(c: &'a Config, k: &str) -> Option<&'a str> {
    c.get(k).map(|v| v.trim()).filter(|v| !v.is_empty())
}

/// Tunnel or native routing. `routing-mode` wins: the chart renders `tunnel-protocol` even in
/// native mode. Configs before 1.14 say `tunnel: vxlan|geneve|disabled` instead.
#[must_use]
pub fn overlay(c: &Config) -> Option<Overlay> {
    let protocol = match (key(c, "routing-mode"), key(c, "tunnel")) {
        (Some("native"), _) | (None, Some("disabled")) => return None,
        (_, Some(t)) if key(c, "tunnel-protocol").is_none() => t,
        _ => key(c, "tunnel-protocol").unwrap_or("vxlan"),
    };
    let geneve = protocol == "geneve";
    let port = key(c, "tunnel-port")
        .and_then(|p| p.parse().ok())
        .and_then(Port::new)
        .unwrap_or(if geneve { GENEVE_PORT } else { VXLAN_PORT });
    // Cilium carries the source security identity in the VNI: no constant to send.
    let vni = Vni::new(0).expect("24 bits");
    let mtu = key(c, "mtu")
        .and_then(|m| m.parse().ok())
        .filter(|m| *m != 0);
    Some(if geneve {
        Overlay::Geneve { port, vni, mtu }
    } else {
        Overlay::Vxlan { port, vni, mtu }
    })
}

/// Whether the pod ranges are the nodes' `spec.podCIDR` (`ipam: kubernetes`) rather than
/// Cilium's own (`CiliumNode` objects, for cluster-pool and multi-pool).
#[must_use]
pub fn uses_node_pod_cidrs(c: &Config) -> bool {
    key(c, "ipam") == Some("kubernetes")
}

/// The cluster's IPv4 pod range as configured.
#[must_use]
pub fn cluster_pod_cidr(c: &Config) -> Option<Cidr> {
    key(c, "cluster-pool-ipv4-cidr")
        .or_else(|| key(c, "ipv4-native-routing-cidr"))
        .and_then(|s| s.split([' ', ',']).find_map(cidr::parse))
        .filter(|c| c.ipv4().is_some())
}

/// The cluster's IPv6 pod range as configured (`enable-ipv6`).
#[must_use]
pub fn cluster_pod_cidr6(c: &Config) -> Option<Cidr> {
    key(c, "cluster-pool-ipv6-cidr")
        .or_else(|| key(c, "ipv6-native-routing-cidr"))
        .and_then(|s| s.split([' ', ',']).find_map(cidr::parse))
        .filter(|c| c.ipv4().is_none())
}

/// Whether cilium-health answers other nodes on 4240.
#[must_use]
pub fn health_checking(c: &Config) -> bool {
    key(c, "enable-health-checking") != Some("false")
}

/// Each node's IPv4 pod ranges from its `CiliumNode` (`spec.ipam.podCIDRs`; same name as the
/// node).
#[must_use]
pub fn node_pod_cidrs(nodes: &[DynamicObject]) -> BTreeMap<String, Vec<Cidr>> {
    nodes
        .iter()
        .filter_map(|n| {
            let cidrs: Vec<Cidr> = n.data["spec"]["ipam"]["podCIDRs"]
                .as_array()?
                .iter()
                .filter_map(|c| c.as_str().and_then(cidr::parse))
                .collect();
            Some((n.metadata.name.clone()?, cidrs))
        })
        .collect()
}

/// Each node's tunnel endpoint from its `CiliumNode`: the `cilium_host` address, listed in
/// `spec.addresses` as type `CiliumInternalIP`.
#[must_use]
pub fn internal_ips(nodes: &[DynamicObject]) -> BTreeMap<String, Ipv4Addr> {
    nodes
        .iter()
        .filter_map(|n| {
            let ip = n.data["spec"]["addresses"]
                .as_array()?
                .iter()
                .filter(|a| a["type"].as_str() == Some("CiliumInternalIP"))
                .find_map(|a| a["ip"].as_str()?.parse::<Ipv4Addr>().ok())?;
            Some((n.metadata.name.clone()?, ip))
        })
        .collect()
}

/// Cilium's tunnel endpoint on a node: its `CiliumNode`'s `CiliumInternalIP`, else the node
/// annotation the agent writes (`network.cilium.io/ipv4-cilium-host`). No MAC: Cilium's tunnel
/// device is flow-based and takes any inner destination MAC.
#[must_use]
pub fn vtep(n: &K8sNode, internal: &BTreeMap<String, Ipv4Addr>) -> Option<Vtep> {
    let address = n
        .metadata
        .name
        .as_ref()
        .and_then(|name| internal.get(name).copied())
        .or_else(|| {
            annotation(n, "network.cilium.io/ipv4-cilium-host")?
                .parse()
                .ok()
        })?;
    Some(Vtep { address, mac: None })
}
