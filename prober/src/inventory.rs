//! The inventory (docs/design.md, "Contracts", "Inventory"): the cluster as runtimes without
//! discovery describe it, and the shape discovery produces. The lab writes one for what it built.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;

use probe_proto::{MacAddr, Port};
use serde::{Deserialize, Serialize};

mod cidr;
mod family;
mod overlay;
mod role;
mod validate;
mod yaml;

pub use cidr::{BadCidr, Cidr};
pub use family::{Family, NO_IPV4, some_ipv4};
pub use overlay::{BadOverlay, Overlay, OverlayMode};
pub use role::{ComponentRole, NodeRole};
pub use validate::{InvalidInventory, InventoryError, MAX_DNS_LABEL, check_component};
pub use yaml::{YamlError, from_yaml};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Inventory {
    pub cluster: Cluster,
    pub nodes: Vec<Node>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<Component>,
    /// How every exec prefix starts the agent: its binary as the prefix sees it (the lab writes
    /// the one it runs). `--agent-bin` overrides it; without either, `probe-pod` beside `prober`,
    /// else on the PATH.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_bin: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Cluster {
    pub cni: Cni,
    /// The cluster's pod range of its primary family (IPv6 in an IPv6-only cluster).
    #[serde(rename = "podCIDR")]
    pub pod_cidr: Cidr,
    /// Every pod range of the cluster when it has several, `podCIDR` first (a dual-stack
    /// cluster's IPv4 and IPv6 ranges, as kube-controller-manager's `--cluster-cidr` lists them).
    #[serde(rename = "podCIDRs", default, skip_serializing_if = "Vec::is_empty")]
    pub pod_cidrs: Vec<Cidr>,
    /// The Service range of the primary family.
    #[serde(rename = "serviceCIDR")]
    pub service_cidr: Cidr,
    /// Every Service range when there are several, `serviceCIDR` first (dual-stack).
    #[serde(
        rename = "serviceCIDRs",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub service_cidrs: Vec<Cidr>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlay: Option<Overlay>,
    pub api: Api,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns: Option<Dns>,
    /// Calico's BGP (BIRD), when it runs; absent when the CNI speaks no BGP (Calico in VXLAN
    /// mode, Canal, every other CNI). Which nodes run it is in each node's `serves`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bgp: Option<Bgp>,
    /// Where the node checks find the node's files on this distribution (host paths); absent
    /// means the kubeadm layout (`/etc/cni/net.d`, `/etc/kubernetes/kubelet.conf`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_files: Option<NodeFiles>,
    /// The network policies that can select the agents, as the API returned them (Kubernetes
    /// `NetworkPolicy`, `AdminNetworkPolicy`, Calico's and Cilium's): read by discovery, written by
    /// the lab, evaluated by diagnosis. Empty when none exist or none were readable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<PolicyObject>,
    /// The namespace the agents run in, whose namespaced policies `policies` holds and in which
    /// diagnosis judges them; absent: prober-system.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agents_namespace: Option<String>,
}

/// One policy object as the API serves it: only its identity is typed here; `spec` is kept as
/// read so every policy language is carried whole and evaluated where its rules live.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyObject {
    pub api_version: String,
    pub kind: String,
    pub metadata: PolicyMeta,
    #[serde(default)]
    pub spec: serde_json::Value,
}

/// The part of a policy's `metadata` diagnosis uses; everything else the API returns is dropped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct PolicyMeta {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
}

/// Calico's BGP: with the node-to-node mesh every BGP node peers with every other one on TCP
/// 179; without it the peers are the `BGPPeer` objects (route reflectors), not modelled here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Bgp {
    pub mesh: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_number: Option<u32>,
}

/// The node's own files the node checks read, as paths on the host. The host agent mounts them
/// (read-only) where the checks look: `cniConfDir` at `<root>/etc/cni/net.d` and
/// `kubeletKubeconfig` at `<root>/etc/kubernetes/kubelet.conf`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeFiles {
    /// `kubeadm`, `k3s`, `rke2`, `eks`, `gke`: the layout these paths come from.
    pub distribution: String,
    pub cni_conf_dir: PathBuf,
    pub kubelet_kubeconfig: PathBuf,
    /// The CNI plugin's own kubeconfig, for CNIs whose plugin calls the API server (Calico,
    /// Canal); absent when the plugin talks to a local agent instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cni_kubeconfig: Option<PathBuf>,
}

impl NodeFiles {
    /// The kubeadm layout, which is also what a node check assumes without discovery.
    #[must_use]
    pub fn kubeadm() -> Self {
        Self {
            distribution: "kubeadm".into(),
            cni_conf_dir: "/etc/cni/net.d".into(),
            kubelet_kubeconfig: "/etc/kubernetes/kubelet.conf".into(),
            cni_kubeconfig: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cni {
    Flannel,
    Calico,
    Cilium,
    Canal,
    Weave,
    Antrea,
    KubeRouter,
    /// The AWS VPC CNI (EKS): pods take VPC addresses, no overlay.
    AwsVpc,
    Other,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Api {
    /// The `kubernetes` Service `ClusterIP` (of the primary family) and port.
    pub service: SocketAddr,
    /// Every `ClusterIP` of the Service when it has several (`spec.clusterIPs` of a dual-stack
    /// Service), `service` first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<SocketAddr>,
    /// The API servers themselves (typically :6443), of every family.
    pub endpoints: Vec<SocketAddr>,
}

impl Api {
    /// `service`, then the Service's other `ClusterIP`s.
    pub fn cluster_ips(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        one_then_rest(self.service, &self.services)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Dns {
    /// The DNS Service's `ClusterIP` (of the primary family) and port.
    pub service: SocketAddr,
    /// Every `ClusterIP` of the Service when it has several, `service` first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<SocketAddr>,
    /// The DNS pods, of every family.
    pub endpoints: Vec<SocketAddr>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    /// The DNS component's own configuration (e.g. the `CoreDNS` Corefile), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corefile: Option<String>,
}

impl Dns {
    /// `service`, then the Service's other `ClusterIP`s.
    pub fn cluster_ips(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        one_then_rest(self.service, &self.services)
    }
}

fn one_then_rest<T: Copy + PartialEq>(first: T, all: &[T]) -> impl Iterator<Item = T> + '_ {
    std::iter::once(first).chain(all.iter().copied().filter(move |x| *x != first))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Node {
    pub name: String,
    #[serde(default)]
    pub roles: Vec<NodeRole>,
    /// The node's IPv4 `InternalIP`; left out for an IPv6-only node ([`NO_IPV4`] here then:
    /// read it through [`Node::ipv4`]).
    #[serde(
        default = "family::no_ipv4",
        skip_serializing_if = "family::is_no_ipv4",
        deserialize_with = "family::ipv4_address"
    )]
    pub address: Ipv4Addr,
    /// The node's IPv6 `InternalIP` (dual-stack or IPv6-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address6: Option<Ipv6Addr>,
    #[serde(rename = "podCIDR", default, skip_serializing_if = "Option::is_none")]
    pub pod_cidr: Option<Cidr>,
    /// Every pod range of the node when it has several, `podCIDR` first (as the Node's own
    /// `spec.podCIDRs`): a Calico node owns as many IPAM blocks as its pods need, a dual-stack
    /// node one range per family.
    #[serde(rename = "podCIDRs", default, skip_serializing_if = "Vec::is_empty")]
    pub pod_cidrs: Vec<Cidr>,
    /// The node's `/` as its host agent sees it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_root: Option<PathBuf>,
    /// The tunnel endpoint over the IPv4 underlay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vtep: Option<Vtep>,
    /// The tunnel endpoint over the IPv6 underlay (flannel's `flannel-v6.1`, Calico's
    /// `vxlan-v6.calico`), when the CNI runs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vtep6: Option<Vtep<Ipv6Addr>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// The CNI's TCP ports this node listens on for the other nodes (Calico: 179 where BIRD
    /// runs, 5473 where a Typha pod runs; Cilium: 4240). Absent: unknown, assume the CNI's
    /// usual ports on every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serves: Option<Vec<Port>>,
    pub agents: Agents,
}

impl Node {
    /// Every pod range of the node: `podCIDR`, then the others of `podCIDRs`.
    pub fn pod_ranges(&self) -> impl Iterator<Item = Cidr> + '_ {
        self.pod_cidr.into_iter().chain(
            self.pod_cidrs
                .iter()
                .copied()
                .filter(move |c| Some(*c) != self.pod_cidr),
        )
    }

    /// Whether `ip` is in one of the node's pod ranges.
    #[must_use]
    pub fn holds_pod_ip(&self, ip: impl Into<IpAddr>) -> bool {
        let ip = ip.into();
        self.pod_ranges().any(|c| c.contains(ip))
    }

    /// The node's IPv4 address, `None` for an IPv6-only node.
    #[must_use]
    pub fn ipv4(&self) -> Option<Ipv4Addr> {
        some_ipv4(self.address)
    }

    /// The node's address in `family`.
    #[must_use]
    pub fn ip(&self, family: Family) -> Option<IpAddr> {
        family::pick(self.address, self.address6, family)
    }

    /// Every address of the node, IPv4 first.
    pub fn ips(&self) -> impl Iterator<Item = IpAddr> + '_ {
        Family::ALL.into_iter().filter_map(|f| self.ip(f))
    }

    /// Whether the node runs the control plane (by its roles).
    #[must_use]
    pub fn is_control_plane(&self) -> bool {
        self.roles.iter().any(NodeRole::is_control_plane)
    }
}

/// A tunnel endpoint: an IPv4 one (`vtep`) or, as `Vtep<Ipv6Addr>`, an IPv6 one (`vtep6`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Vtep<A = Ipv4Addr> {
    pub address: A,
    /// The tunnel device's MAC where the CNI publishes it (flannel, Calico VXLAN); absent for
    /// IP-in-IP and for Cilium, whose tunnel device takes any inner destination MAC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<MacAddr>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Agents {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<Agent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<Agent>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Agent {
    /// The command prefix that runs a program where the agent is (`ip netns exec NS`).
    pub exec: Vec<String>,
    /// Where the agent serves over IPv4; left out for an IPv6-only agent ([`NO_IPV4`] here
    /// then: read it through [`Agent::ipv4`]).
    #[serde(
        default = "family::no_ipv4",
        skip_serializing_if = "family::is_no_ipv4",
        deserialize_with = "family::ipv4_address"
    )]
    pub address: Ipv4Addr,
    /// Where the agent serves over IPv6 (dual-stack or IPv6-only), on the same port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address6: Option<Ipv6Addr>,
    pub port: Port,
}

impl Agent {
    /// The agent's IPv4 address, `None` for an IPv6-only one.
    #[must_use]
    pub fn ipv4(&self) -> Option<Ipv4Addr> {
        some_ipv4(self.address)
    }

    /// The agent's address in `family`.
    #[must_use]
    pub fn ip(&self, family: Family) -> Option<IpAddr> {
        family::pick(self.address, self.address6, family)
    }

    /// Its IPv4 address where it has one, else its IPv6 one.
    #[must_use]
    pub fn first_ip(&self) -> Option<IpAddr> {
        self.ip(Family::Ipv4).or_else(|| self.ip(Family::Ipv6))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApiAccess {
    Service,
    Direct,
    Kubeconfig,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Component {
    pub name: String,
    pub namespace: String,
    pub kind: String,
    pub role: ComponentRole,
    #[serde(default)]
    pub host_network: bool,
    pub api_access: ApiAccess,
    #[serde(default)]
    pub containers: Vec<String>,
    /// Nodes it runs on; all nodes when empty (a `DaemonSet`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
}

impl Cluster {
    /// Every pod range: `podCIDR`, then the others of `podCIDRs`.
    pub fn pod_ranges(&self) -> impl Iterator<Item = Cidr> + '_ {
        one_then_rest(self.pod_cidr, &self.pod_cidrs)
    }

    /// Every Service range: `serviceCIDR`, then the others of `serviceCIDRs`.
    pub fn service_ranges(&self) -> impl Iterator<Item = Cidr> + '_ {
        one_then_rest(self.service_cidr, &self.service_cidrs)
    }
}

impl Inventory {
    /// The IP families the cluster's nodes have addresses in, IPv4 first: what the planner
    /// probes each path class over.
    #[must_use]
    pub fn families(&self) -> Vec<Family> {
        Family::ALL
            .into_iter()
            .filter(|&f| self.nodes.iter().any(|n| n.ip(f).is_some()))
            .collect()
    }

    #[must_use]
    pub fn to_yaml(&self) -> String {
        serde_saphyr::to_string(self)
            .unwrap_or_else(|e| format!("# cannot serialise the inventory: {e}\n"))
    }

    /// Each node's host and pod agent as having run: the agents of a run in which every one
    /// answered (what a healthy run reports; the renderings' and the diagnosis tests build on it).
    #[must_use]
    pub fn every_agent_ran(&self) -> Vec<crate::model::AgentStatus> {
        use crate::model::{AgentKind, AgentStatus};
        self.nodes
            .iter()
            .flat_map(|n| {
                [AgentKind::Host, AgentKind::Pod].map(|agent| AgentStatus {
                    node: n.name.clone(),
                    agent,
                    ran: true,
                    detail: String::new(),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
