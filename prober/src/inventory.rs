//! The inventory (docs/design.md section 4): the cluster as runtimes without discovery describe it,
//! and the shape discovery produces. The lab writes one for what it built.

use std::collections::HashSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use probe_proto::MacAddr;
use serde::{Deserialize, Serialize};

mod overlay;
pub use overlay::{BadOverlay, Overlay, OverlayMode};

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
    #[serde(rename = "podCIDR")]
    pub pod_cidr: Cidr,
    #[serde(rename = "serviceCIDR")]
    pub service_cidr: Cidr,
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

/// An IPv4 network in CIDR notation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Cidr {
    pub addr: Ipv4Addr,
    pub len: u8,
}

impl Cidr {
    #[must_use]
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        let mask = if self.len == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(self.len))
        };
        u32::from(ip) & mask == u32::from(self.addr) & mask
    }
}

/// Text that is not an IPv4 network in CIDR notation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a CIDR (expected a.b.c.d/len, len 0-32)")]
pub struct BadCidr(pub String);

impl TryFrom<String> for Cidr {
    type Error = BadCidr;
    fn try_from(s: String) -> Result<Self, BadCidr> {
        let parsed = s.split_once('/').and_then(|(a, l)| {
            let addr: Ipv4Addr = a.parse().ok()?;
            let len: u8 = l.parse().ok().filter(|l| *l <= 32)?;
            Some(Self { addr, len })
        });
        parsed.ok_or(BadCidr(s))
    }
}

impl From<Cidr> for String {
    fn from(c: Cidr) -> String {
        c.to_string()
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Api {
    /// The `kubernetes` Service `ClusterIP` and port.
    pub service: SocketAddr,
    /// The API servers themselves (typically :6443).
    pub endpoints: Vec<SocketAddr>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Dns {
    pub service: SocketAddr,
    pub endpoints: Vec<SocketAddr>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    /// The DNS component's own configuration (e.g. the `CoreDNS` Corefile), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corefile: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Node {
    pub name: String,
    #[serde(default)]
    pub roles: Vec<String>,
    pub address: Ipv4Addr,
    #[serde(rename = "podCIDR", default, skip_serializing_if = "Option::is_none")]
    pub pod_cidr: Option<Cidr>,
    /// Every pod range of the node when it has several, `podCIDR` first (as the Node's own
    /// `spec.podCIDRs`): a Calico node owns as many IPAM blocks as its pods need.
    #[serde(rename = "podCIDRs", default, skip_serializing_if = "Vec::is_empty")]
    pub pod_cidrs: Vec<Cidr>,
    /// The node's `/` as its host agent sees it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_root: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vtep: Option<Vtep>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// The CNI's TCP ports this node listens on for the other nodes (Calico: 179 where BIRD
    /// runs, 5473 where a Typha pod runs; Cilium: 4240). Absent: unknown, assume the CNI's
    /// usual ports on every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serves: Option<Vec<u16>>,
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
    pub fn holds_pod_ip(&self, ip: Ipv4Addr) -> bool {
        self.pod_ranges().any(|c| c.contains(ip))
    }

    /// Whether the node runs the control plane (by its roles).
    #[must_use]
    pub fn is_control_plane(&self) -> bool {
        self.roles
            .iter()
            .any(|r| r == "control-plane" || r == "master")
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Vtep {
    pub address: Ipv4Addr,
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
    pub address: Ipv4Addr,
    pub port: u16,
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
    pub role: String,
    #[serde(default)]
    pub host_network: bool,
    pub api_access: ApiAccess,
    #[serde(default)]
    pub containers: Vec<String>,
    /// Nodes it runs on; all nodes when empty (a `DaemonSet`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
}

/// YAML that is not the expected shape: the field serde was in (when it knows), the position in
/// the text and what was expected there.
#[derive(Debug, thiserror::Error)]
#[error("{}{source}", if field.is_empty() || field == "." { String::new() } else { format!("{field}: ") })]
pub struct YamlError {
    /// The field path, e.g. `expect.findings[0]`; `.` or empty at the top.
    pub field: String,
    /// Boxed: the parser's error carries the text around the position and is large.
    pub source: Box<serde_saphyr::Error>,
}

/// Parses YAML (or JSON, which is YAML) into `T`, naming the field of the first error.
pub fn from_yaml<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, YamlError> {
    let mut field = String::new();
    serde_saphyr::with_deserializer_from_str(text, |de| {
        serde_path_to_error::deserialize(de).map_err(|e| {
            field = e.path().to_string();
            e.into_inner()
        })
    })
    .map_err(|source| YamlError {
        field,
        source: Box::new(source),
    })
}

#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    #[error("inventory: {0}")]
    Read(#[source] crate::model::read::ReadError),
    #[error("inventory {}: {source}", path.display())]
    Parse { path: PathBuf, source: YamlError },
    #[error("inventory {}: {source}", path.display())]
    Invalid {
        path: PathBuf,
        source: InvalidInventory,
    },
}

/// A rule across fields that the inventory breaks: the field path and what it must be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidInventory {
    #[error("nodes: the inventory lists no node")]
    NoNodes,
    #[error("nodes[{index}].name: must not be empty")]
    EmptyName { index: usize },
    #[error("nodes[{index}].name: duplicate node name {name:?}")]
    DuplicateName { index: usize, name: String },
    #[error("nodes[{index}].agents.{agent}.exec: must name a command prefix")]
    NoExec { index: usize, agent: &'static str },
    /// A value the agents would refuse, or the planner would change or drop without a word.
    #[error("{field}: {message}")]
    Field { field: String, message: String },
}

/// The longest DNS label (a namespace, a container name).
pub const MAX_DNS_LABEL: usize = 63;
/// The longest DNS subdomain (a Kubernetes object name).
const MAX_DNS_SUBDOMAIN: usize = 253;

fn bad(field: impl Into<String>, message: impl Into<String>) -> InvalidInventory {
    InvalidInventory::Field {
        field: field.into(),
        message: message.into(),
    }
}

/// A DNS-1123 label (`max` 63) or subdomain (`max` 253): lowercase letters, digits, '-' (and
/// '.' between labels of a subdomain), starting and ending with a letter or digit.
fn dns_name(value: &str, max: usize) -> bool {
    let label = |l: &str| {
        !l.is_empty()
            && l.len() <= MAX_DNS_LABEL
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    !value.is_empty()
        && value.len() <= max
        && if max > MAX_DNS_LABEL {
            value.split('.').all(label)
        } else {
            label(value)
        }
}

/// A component's names go into the fix commands the report prints: each must be what
/// Kubernetes allows, so none can change the command. Returns the key and the value refused.
pub fn check_component(c: &Component) -> Result<(), (String, String)> {
    let refuse = |key: &str, value: &str| Err((key.to_string(), value.to_string()));
    if !dns_name(&c.name, MAX_DNS_SUBDOMAIN) {
        return refuse("name", &c.name);
    }
    if !dns_name(&c.namespace, MAX_DNS_LABEL) {
        return refuse("namespace", &c.namespace);
    }
    if !dns_name(&c.role, MAX_DNS_LABEL) {
        return refuse("role", &c.role);
    }
    let kind_ok = !c.kind.is_empty()
        && c.kind.len() <= MAX_DNS_LABEL
        && c.kind.bytes().all(|b| b.is_ascii_alphanumeric());
    if !kind_ok {
        return refuse("kind", &c.kind);
    }
    for (i, n) in c.containers.iter().enumerate() {
        if !dns_name(n, MAX_DNS_LABEL) {
            return refuse(&format!("containers[{i}]"), n);
        }
    }
    Ok(())
}

/// An address the agents would refuse as a target.
fn target(field: &str, ip: std::net::IpAddr) -> Result<(), InvalidInventory> {
    match probe_proto::unusable_target(ip) {
        Some(why) => Err(bad(field, format!("{ip} {why}"))),
        None => Ok(()),
    }
}

/// An address and port the agents would refuse as a target.
fn endpoint(field: &str, addr: SocketAddr) -> Result<(), InvalidInventory> {
    target(field, addr.ip())?;
    if addr.port() == 0 {
        return Err(bad(field, format!("{addr}: port 0 is not a port")));
    }
    Ok(())
}

impl Inventory {
    /// Reads YAML (or JSON, which is YAML) and checks what the types cannot.
    pub fn load(path: &std::path::Path) -> Result<Self, InventoryError> {
        use crate::model::read::{MAX_INVENTORY_BYTES, read_capped};
        let text =
            read_capped(path, MAX_INVENTORY_BYTES, "inventory").map_err(InventoryError::Read)?;
        let inv: Self = from_yaml(&text).map_err(|source| InventoryError::Parse {
            path: path.into(),
            source,
        })?;
        inv.validate().map_err(|source| InventoryError::Invalid {
            path: path.into(),
            source,
        })?;
        Ok(inv)
    }

    /// Checks cross-field rules; the error names the offending field.
    pub fn validate(&self) -> Result<(), InvalidInventory> {
        let mut names = HashSet::new();
        for (index, n) in self.nodes.iter().enumerate() {
            if n.name.is_empty() {
                return Err(InvalidInventory::EmptyName { index });
            }
            if !dns_name(&n.name, probe_proto::MAX_NODE_NAME_BYTES) {
                return Err(bad(
                    format!("nodes[{index}].name"),
                    format!(
                        "{:?} is not a Kubernetes node name (a DNS subdomain of at most {} characters: a-z, 0-9, '-' and '.')",
                        n.name,
                        probe_proto::MAX_NODE_NAME_BYTES
                    ),
                ));
            }
            if !names.insert(n.name.as_str()) {
                return Err(InvalidInventory::DuplicateName {
                    index,
                    name: n.name.clone(),
                });
            }
            target(&format!("nodes[{index}].address"), n.address.into())?;
            if let Some(v) = &n.vtep {
                target(&format!("nodes[{index}].vtep.address"), v.address.into())?;
            }
            for (agent, a) in [("host", &n.agents.host), ("pod", &n.agents.pod)] {
                let Some(a) = a else { continue };
                if a.exec.is_empty() {
                    return Err(InvalidInventory::NoExec { index, agent });
                }
                let at = format!("nodes[{index}].agents.{agent}");
                target(&format!("{at}.address"), a.address.into())?;
                if a.port == 0 {
                    return Err(bad(format!("{at}.port"), "0 is not a port (1-65535)"));
                }
            }
        }
        if self.nodes.is_empty() {
            return Err(InvalidInventory::NoNodes);
        }
        self.validate_cluster()?;
        for (i, c) in self.components.iter().enumerate() {
            check_component(c).map_err(|(key, value)| {
                bad(
                    format!("components[{i}].{key}"),
                    format!("{value:?} is not a Kubernetes name (a-z, 0-9, '-')"),
                )
            })?;
        }
        Ok(())
    }

    /// The cluster's services, DNS names and overlay, against what the agents accept.
    fn validate_cluster(&self) -> Result<(), InvalidInventory> {
        let c = &self.cluster;
        endpoint("cluster.api.service", c.api.service)?;
        for (i, e) in c.api.endpoints.iter().enumerate() {
            endpoint(&format!("cluster.api.endpoints[{i}]"), *e)?;
        }
        if let Some(dns) = &c.dns {
            endpoint("cluster.dns.service", dns.service)?;
            for (i, e) in dns.endpoints.iter().enumerate() {
                endpoint(&format!("cluster.dns.endpoints[{i}]"), *e)?;
            }
            for (i, name) in dns.names.iter().enumerate() {
                let ok = !name.is_empty()
                    && name.len() <= probe_proto::MAX_DNS_NAME_BYTES
                    && name.bytes().all(|b| b.is_ascii_graphic());
                if !ok {
                    return Err(bad(
                        format!("cluster.dns.names[{i}]"),
                        format!(
                            "not a DNS name of 1-{} printable characters",
                            probe_proto::MAX_DNS_NAME_BYTES
                        ),
                    ));
                }
            }
        }
        if let Some(mtu) = c.overlay.as_ref().and_then(Overlay::mtu)
            && mtu < probe_proto::MIN_MTU_PROBE_BYTES
        {
            return Err(bad(
                "cluster.overlay.mtu",
                format!(
                    "{mtu} is smaller than an IPv4 and ICMP header ({} bytes)",
                    probe_proto::MIN_MTU_PROBE_BYTES
                ),
            ));
        }
        Ok(())
    }

    #[must_use]
    pub fn to_yaml(&self) -> String {
        serde_saphyr::to_string(self)
            .unwrap_or_else(|e| format!("# cannot serialise the inventory: {e}\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::inventory;

    #[test]
    fn broken_rules_name_the_field() {
        let mut inv = inventory(2, 1, "flannel");
        inv.nodes[1].name = "n1".into();
        assert_eq!(
            inv.validate(),
            Err(InvalidInventory::DuplicateName {
                index: 1,
                name: "n1".into()
            })
        );
        inv.nodes[1].name = String::new();
        assert_eq!(
            inv.validate().unwrap_err().to_string(),
            "nodes[1].name: must not be empty"
        );
        inv.nodes[1].name = "n2".into();
        if let Some(a) = inv.nodes[1].agents.pod.as_mut() {
            a.exec.clear();
        }
        assert_eq!(
            inv.validate().unwrap_err().to_string(),
            "nodes[1].agents.pod.exec: must name a command prefix"
        );
        inv.nodes.clear();
        assert_eq!(inv.validate(), Err(InvalidInventory::NoNodes));
    }

    /// What the agents refuse, or the planner would change or drop without a word, is refused
    /// here, naming the field (each of these once ran, wrongly).
    #[test]
    fn values_the_agents_refuse_are_refused_naming_the_field() {
        type Case = (&'static str, fn(&mut Inventory));
        let cases: [Case; 9] = [
            ("nodes[1].name", |i| i.nodes[1].name = "a".repeat(254)),
            ("nodes[1].name", |i| i.nodes[1].name = "N2 x".into()),
            ("nodes[1].name", |i| i.nodes[1].name = "n2\nn3".into()),
            ("nodes[0].agents.pod.port", |i| {
                if let Some(a) = i.nodes[0].agents.pod.as_mut() {
                    a.port = 0;
                }
            }),
            ("nodes[0].address", |i| {
                i.nodes[0].address = "0.0.0.0".parse().unwrap();
            }),
            ("cluster.overlay.mtu", |i| {
                *i.cluster.overlay.as_mut().unwrap().mtu_mut() = Some(0);
            }),
            ("cluster.dns.names[0]", |i| {
                i.cluster.dns.as_mut().unwrap().names = vec!["a".repeat(255)];
            }),
            ("cluster.api.service", |i| {
                i.cluster.api.service = "10.96.0.1:0".parse().unwrap();
            }),
            ("components[0].name", |i| {
                i.components = vec![Component {
                    name: "calico; rm -rf /".into(),
                    namespace: "kube-system".into(),
                    kind: "DaemonSet".into(),
                    role: "cni".into(),
                    host_network: true,
                    api_access: ApiAccess::Service,
                    containers: vec![],
                    nodes: vec![],
                }];
            }),
        ];
        for (field, break_it) in cases {
            let mut inv = inventory(3, 1, "flannel");
            break_it(&mut inv);
            let e = inv.validate().unwrap_err().to_string();
            assert!(e.starts_with(&format!("{field}:")), "{field}: {e}");
        }
        // What Kubernetes allows is allowed: a 253-character node name, IP-in-IP without a port.
        let mut inv = inventory(3, 1, "flannel");
        let label = "a".repeat(63);
        inv.nodes[0].name = format!("{label}.{label}.{label}.{}", "a".repeat(61));
        inv.cluster.overlay = Some(Overlay::Ipip { mtu: Some(1480) });
        inv.validate().unwrap();
    }

    #[test]
    fn load_names_the_file_the_field_and_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("inventory.yaml");
        let mut text = inventory(1, 1, "flannel").to_yaml();
        text = text.replacen("roles:", "rolez:", 1);
        std::fs::write(&path, &text).unwrap();
        let err = Inventory::load(&path).unwrap_err();
        match &err {
            InventoryError::Parse { source, .. } => assert_eq!(source.field, "nodes[0].rolez"),
            e => panic!("want a parse error, got {e:?}"),
        }
        let msg = err.to_string();
        assert!(
            msg.contains(&path.display().to_string()) && msg.contains("rolez"),
            "{msg}"
        );
        std::fs::write(
            &path,
            text.replace("rolez:", "roles:")
                .replace("name: n1", "name: ''"),
        )
        .unwrap();
        let msg = Inventory::load(&path).unwrap_err().to_string();
        assert!(
            msg.contains(&path.display().to_string()) && msg.contains("nodes[0].name"),
            "{msg}"
        );
    }

    #[test]
    fn cidrs() {
        let c = Cidr::try_from("10.244.1.0/24".to_string()).unwrap();
        assert!(c.contains(Ipv4Addr::new(10, 244, 1, 200)));
        assert!(!c.contains(Ipv4Addr::new(10, 244, 2, 1)));
        for bad in ["10.244.1.0", "10.244.1/24", "10.244.1.0/33", "10.244.1.0/x"] {
            assert_eq!(
                Cidr::try_from(bad.to_string()),
                Err(BadCidr(bad.into())),
                "{bad}"
            );
        }
    }
}
