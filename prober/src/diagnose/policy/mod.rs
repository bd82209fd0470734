//! Pure: the network policies that can select the prober's pod agents (Kubernetes `NetworkPolicy`,
//! `AdminNetworkPolicy` and `BaselineAdminNetworkPolicy`, Calico's and Cilium's), which of them
//! select the agents, and which planned probes they would deny.
//!
//! Each language compiles its objects into [`Compiled`] policies (one file each: `k8s`, `anp`,
//! `calico`, `cilium`); this file holds what they share and the order the engines apply them in:
//! `AdminNetworkPolicies` by priority (Allow and Deny decide, Pass skips to the next layer), then
//! the namespace layer (Kubernetes `NetworkPolicies` added up, or within Calico's tier by order, or
//! with Cilium's "deny wins"), then the `BaselineAdminNetworkPolicy`, else allowed.
//!
//! Only pods are subjects: host-network agents are outside pod policies (Calico host endpoints
//! and Cilium host policies can still apply to them; prober does not read those). A peer on the
//! host network is matched only by address rules (ipBlock, nets, CIDR, node and host entities),
//! never by a pod selector. A selector or field this evaluator cannot read is "cannot evaluate",
//! never a guess.

mod anp;
mod calico;
mod calico_selector;
mod cilium;
mod engine;
mod fix;
mod flows;
mod k8s;
mod rule;
mod selector;
#[cfg(test)]
pub(super) mod tests;
mod unread;

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::inventory::{Cidr, PolicyObject};
use crate::model::Protocol;
use crate::runtime::kube::manifests::{self, AgentSpec};

pub use engine::{Denial, Policies, Verdict};
pub use flows::{Route, Routes};
pub(super) use rule::denied_by_policy;
pub(super) use unread::unread_policy;

/// Which way a flow goes, seen from the pod agent the policy selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dir {
    Ingress,
    Egress,
}

impl Dir {
    fn index(self) -> usize {
        match self {
            Self::Ingress => 0,
            Self::Egress => 1,
        }
    }

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ingress => "ingress",
            Self::Egress => "egress",
        }
    }
}

/// Three-valued truth (Kleene): a selector or rule this evaluator cannot read is `Unknown`,
/// with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tri {
    Yes,
    No,
    Unknown(String),
}

impl Tri {
    fn from_bool(b: bool) -> Self {
        if b { Self::Yes } else { Self::No }
    }

    /// Every one holds: `No` wins, then `Unknown`.
    fn all(items: impl IntoIterator<Item = Tri>) -> Self {
        let mut unknown = None;
        for t in items {
            match t {
                Self::No => return Self::No,
                Self::Unknown(w) => unknown = unknown.or(Some(w)),
                Self::Yes => {}
            }
        }
        unknown.map_or(Self::Yes, Self::Unknown)
    }

    /// Some one holds: `Yes` wins, then `Unknown`.
    fn any(items: impl IntoIterator<Item = Tri>) -> Self {
        let mut unknown = None;
        for t in items {
            match t {
                Self::Yes => return Self::Yes,
                Self::Unknown(w) => unknown = unknown.or(Some(w)),
                Self::No => {}
            }
        }
        unknown.map_or(Self::No, Self::Unknown)
    }

    fn not(self) -> Self {
        match self {
            Self::Yes => Self::No,
            Self::No => Self::Yes,
            u @ Self::Unknown(_) => u,
        }
    }
}

/// What the policies see of the pod agents: their namespace (and its labels), their labels,
/// their service account, and their named port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agents {
    pub namespace: String,
    pub namespace_labels: BTreeMap<String, String>,
    pub labels: BTreeMap<String, String>,
    pub service_account: String,
    /// The container port name of the agent's port (`probe`) and its number.
    pub port_name: String,
    pub port: u16,
}

impl Agents {
    /// The agents as `deploy/base` and a run create them (`runtime::kube::manifests`).
    #[must_use]
    pub fn deployed() -> Self {
        Self::deployed_in(None)
    }

    /// The agents as a run creates them in `namespace` (None: the default, prober-system).
    #[must_use]
    pub fn deployed_in(namespace: Option<&str>) -> Self {
        let mut spec = AgentSpec::default();
        if let Some(ns) = namespace {
            spec.namespace = ns.to_string();
        }
        Self {
            namespace: spec.namespace.clone(),
            namespace_labels: manifests::namespace_labels(&spec),
            labels: manifests::pod_agent_labels(&spec),
            service_account: manifests::SERVICE_ACCOUNT.into(),
            port_name: "probe".into(),
            port: probe_proto::DEFAULT_AGENT_PORT,
        }
    }
}

/// The other end of a flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    /// Another pod agent: the same namespace and labels as the subject.
    Agent { node: String, ip: IpAddr },
    /// A node's host network (a host agent, an API server on a node). `local`: the subject's
    /// own node, whose traffic to its pods is always allowed.
    Host {
        node: String,
        ip: IpAddr,
        local: bool,
        apiserver: bool,
    },
    /// A pod that is not an agent, whose labels prober does not know (a DNS pod).
    Pod { ip: IpAddr },
    /// An address that is neither a node nor a pod of the inventory (an API load balancer).
    Outside { ip: IpAddr, apiserver: bool },
}

impl Peer {
    #[must_use]
    pub fn ip(&self) -> IpAddr {
        match self {
            Self::Agent { ip, .. }
            | Self::Host { ip, .. }
            | Self::Pod { ip }
            | Self::Outside { ip, .. } => *ip,
        }
    }
}

/// One direction of one probe at one pod agent: what a policy selecting that agent judges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    pub dir: Dir,
    /// The pod agent's node and address.
    pub node: String,
    pub ip: IpAddr,
    pub peer: Peer,
    pub protocol: Protocol,
    /// The destination port (TCP and UDP).
    pub port: Option<u16>,
}

/// A policy by kind and name (and namespace for namespaced ones), as a sentence names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PolicyRef {
    /// The API group (`networking.k8s.io`, `crd.projectcalico.org`, ...), which tells
    /// Kubernetes' `NetworkPolicy` from Calico's.
    pub group: String,
    pub kind: String,
    pub name: String,
    pub namespace: Option<String>,
}

impl std::fmt::Display for PolicyRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// What a matching rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    Allow,
    Deny,
    /// ANP: skip the remaining `AdminNetworkPolicies`; Calico: skip to the next tier.
    Pass,
    /// Calico: record and go on to the next rule.
    Log,
}

/// Which engine layer a policy belongs to, with its rank there.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Family {
    K8s,
    Anp { priority: i64 },
    Banp,
    Calico { order: Option<f64>, tier: String },
    Cilium,
}

/// A rule: its action, its name (when the language names rules), and what it matches.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Rule {
    pub(super) action: Action,
    pub(super) name: Option<String>,
    pub(super) cond: Cond,
}

/// A policy in the evaluator's terms.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Compiled {
    pub(super) id: PolicyRef,
    pub(super) family: Family,
    /// Whether it selects the pod agents.
    pub(super) selects: Tri,
    /// Per direction: `Some` when it applies in that direction (Kubernetes `policyTypes`,
    /// Calico `types`, a Cilium or ANP section present), with its rules in order.
    pub(super) rules: [Option<Vec<Rule>>; 2],
    /// Per direction: whether selecting the agents puts them in default deny (Cilium's
    /// `enableDefaultDeny`; every other language: whenever it applies).
    pub(super) default_deny: [bool; 2],
}

impl Compiled {
    /// Whether it applies to the agents in `dir`.
    fn applies(&self, dir: Dir) -> Tri {
        if self.rules[dir.index()].is_none() {
            return Tri::No;
        }
        self.selects.clone()
    }

    fn rules(&self, dir: Dir) -> &[Rule] {
        self.rules[dir.index()].as_deref().unwrap_or(&[])
    }

    /// The rank a sentence gives (`order 1000`, `priority 10`), if any.
    #[must_use]
    fn rank(&self) -> Option<String> {
        match &self.family {
            Family::Anp { priority } => Some(format!("priority {priority}")),
            Family::Calico {
                order: Some(order), ..
            } => Some(format!("order {order}")),
            _ => None,
        }
    }
}

/// An endpoint's identity as selectors see it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Endpoint<'a> {
    pub(super) namespace: &'a str,
    pub(super) namespace_labels: &'a BTreeMap<String, String>,
    pub(super) labels: &'a BTreeMap<String, String>,
    pub(super) service_account: &'a str,
}

impl Agents {
    pub(super) fn endpoint(&self) -> Endpoint<'_> {
        Endpoint {
            namespace: &self.namespace,
            namespace_labels: &self.namespace_labels,
            labels: &self.labels,
            service_account: &self.service_account,
        }
    }
}

/// A label selector in one of the languages, with the label view that language uses.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Selector {
    /// Kubernetes `LabelSelector` over the pod's (or namespace's) own labels.
    K8s(selector::LabelSelector),
    /// Calico selector expression over the endpoint's labels plus Calico's own
    /// (`projectcalico.org/namespace`, `pcns.*` namespace labels, ...).
    Calico(calico_selector::Expr),
    /// Kubernetes `LabelSelector` over Cilium's labels of an endpoint (`k8s:` prefixes
    /// dropped, `io.kubernetes.pod.namespace`, namespace labels as
    /// `io.cilium.k8s.namespace.labels.*`).
    Cilium(selector::LabelSelector),
}

impl Selector {
    /// Whether it selects every endpoint whatever its labels (`{}`, `all()`).
    fn matches_all(&self) -> bool {
        match self {
            Self::K8s(s) | Self::Cilium(s) => s.is_empty(),
            Self::Calico(e) => e.is_all(),
        }
    }

    /// Against a pod endpoint.
    fn pod(&self, e: &Endpoint<'_>) -> bool {
        match self {
            Self::K8s(s) => s.matches(e.labels),
            Self::Calico(x) => x.matches(&calico::pod_labels(e)),
            Self::Cilium(s) => s.matches(&cilium::pod_labels(e)),
        }
    }

    /// Against a namespace.
    fn namespace(&self, e: &Endpoint<'_>) -> bool {
        match self {
            Self::K8s(s) | Self::Cilium(s) => s.matches(e.namespace_labels),
            Self::Calico(x) => x.matches(&calico::namespace_labels(e)),
        }
    }
}

/// Which namespaces a pod peer may be in.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Namespaces {
    Any,
    Named(String),
    Selected(Selector),
}

/// A port condition: a number or range for a protocol, or a named container port.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum PortSpec {
    Range {
        protocol: Option<Protocol>,
        lo: u16,
        hi: u16,
    },
    Named {
        protocol: Option<Protocol>,
        name: String,
    },
}

/// What a rule matches, evaluated three-valued against a flow.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Cond {
    True,
    False,
    All(Vec<Cond>),
    AnyOf(Vec<Cond>),
    Not(Box<Cond>),
    /// Something this evaluator cannot read, with why.
    Unknown(String),
    /// The peer is a pod in these namespaces whose labels match (`None`: any labels).
    PeerPod {
        namespaces: Namespaces,
        pods: Option<Selector>,
    },
    /// The peer's address is in one of `nets` and none of `except`.
    PeerNet {
        nets: Vec<Cidr>,
        except: Vec<Cidr>,
    },
    /// The peer is a node's host network whose labels match (ANP `nodes`; node labels are
    /// unknown, so only an empty selector decides).
    PeerNode(Selector),
    /// A Cilium entity (`host`, `remote-node`, `cluster`, `world`, `all`, `kube-apiserver`).
    PeerEntity(String),
    /// The subject's own address is in one of `nets` (Calico's destination on ingress).
    LocalNet(Vec<Cidr>),
    /// The flow's transport.
    Protocol(Protocol),
    /// The flow's IP family: IPv6 (`true`) or IPv4 (Calico's `ipVersion`).
    Ipv6(bool),
    /// Any of these ports.
    Ports(Vec<PortSpec>),
}

impl Cond {
    fn eval(&self, flow: &Flow, agents: &Agents) -> Tri {
        match self {
            Self::True => Tri::Yes,
            Self::False => Tri::No,
            Self::All(v) => Tri::all(v.iter().map(|c| c.eval(flow, agents))),
            Self::AnyOf(v) => Tri::any(v.iter().map(|c| c.eval(flow, agents))),
            Self::Not(c) => c.eval(flow, agents).not(),
            Self::Unknown(w) => Tri::Unknown(w.clone()),
            Self::PeerPod { namespaces, pods } => peer_pod(namespaces, pods.as_ref(), flow, agents),
            Self::PeerNet { nets, except } => {
                let ip = flow.peer.ip();
                Tri::from_bool(
                    nets.iter().any(|n| n.contains(ip)) && !except.iter().any(|n| n.contains(ip)),
                )
            }
            Self::PeerNode(sel) => match &flow.peer {
                Peer::Host { .. } if sel.matches_all() => Tri::Yes,
                Peer::Host { node, .. } => Tri::Unknown(format!(
                    "a node selector other than {{}} (node {node}'s labels are not in the inventory)"
                )),
                _ => Tri::No,
            },
            Self::PeerEntity(e) => cilium::entity(e, &flow.peer),
            Self::LocalNet(nets) => Tri::from_bool(nets.iter().any(|n| n.contains(flow.ip))),
            Self::Protocol(p) => Tri::from_bool(flow.protocol == *p),
            Self::Ipv6(six) => Tri::from_bool(flow.ip.is_ipv6() == *six),
            Self::Ports(specs) => Tri::any(specs.iter().map(|s| port(s, flow, agents))),
        }
    }
}

fn peer_pod(namespaces: &Namespaces, pods: Option<&Selector>, flow: &Flow, agents: &Agents) -> Tri {
    match &flow.peer {
        // Host-network peers carry no pod identity a pod selector could match.
        Peer::Host { .. } | Peer::Outside { .. } => Tri::No,
        Peer::Agent { .. } => {
            let e = agents.endpoint();
            let ns = match namespaces {
                Namespaces::Any => true,
                Namespaces::Named(n) => *n == agents.namespace,
                Namespaces::Selected(s) => s.namespace(&e),
            };
            Tri::from_bool(ns && pods.is_none_or(|s| s.pod(&e)))
        }
        Peer::Pod { ip } => {
            let ns_all = matches!(namespaces, Namespaces::Any)
                || matches!(namespaces, Namespaces::Selected(s) if s.matches_all());
            if ns_all && pods.is_none_or(Selector::matches_all) {
                Tri::Yes
            } else {
                Tri::Unknown(format!(
                    "a pod selector on the pod at {ip}, whose labels are not in the inventory"
                ))
            }
        }
    }
}

fn port(spec: &PortSpec, flow: &Flow, agents: &Agents) -> Tri {
    let Some(port) = flow
        .port
        .filter(|_| matches!(flow.protocol, Protocol::Tcp | Protocol::Udp))
    else {
        // ICMP has no ports: a rule limited to ports does not match it.
        return Tri::No;
    };
    let proto_ok = |p: &Option<Protocol>| p.is_none_or(|p| p == flow.protocol);
    match spec {
        PortSpec::Range { protocol, lo, hi } => {
            Tri::from_bool(proto_ok(protocol) && (*lo..=*hi).contains(&port))
        }
        PortSpec::Named { protocol, name } => {
            // A named port is the destination pod's: the agent's own is known.
            let agent_is_destination = match flow.dir {
                Dir::Ingress => true,
                Dir::Egress => matches!(flow.peer, Peer::Agent { .. }),
            };
            if agent_is_destination {
                Tri::from_bool(
                    proto_ok(protocol)
                        && flow.protocol == Protocol::Tcp
                        && *name == agents.port_name
                        && port == agents.port,
                )
            } else {
                Tri::Unknown(format!(
                    "the named port {name:?} of a peer whose ports are not in the inventory"
                ))
            }
        }
    }
}

/// The objects of a spec's list field, numbered (none when absent).
pub(super) fn items<'a>(
    spec: &'a serde_json::Value,
    name: &str,
) -> impl Iterator<Item = (usize, &'a serde_json::Value)> {
    spec.get(name)
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
}

/// A policy's identity from its object.
pub(super) fn policy_ref(o: &PolicyObject) -> PolicyRef {
    PolicyRef {
        group: o
            .api_version
            .split('/')
            .next()
            .unwrap_or_default()
            .to_string(),
        kind: o.kind.clone(),
        name: o.metadata.name.clone(),
        namespace: o.metadata.namespace.clone(),
    }
}

/// A CIDR list from a policy, of either family (a bare address is one host); `Err` naming the
/// first entry that is not one.
pub(super) fn cidrs(v: Option<&serde_json::Value>, field: &str) -> Result<Vec<Cidr>, String> {
    let mut out = Vec::new();
    for item in v
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
    {
        // Both families: an IPv6 range judges the IPv6 flows (and never an IPv4 one).
        let s = item.as_str().unwrap_or_default();
        let s = match (s.contains('/'), s.contains(':')) {
            (true, _) => s.to_string(),
            (false, true) => format!("{s}/128"),
            (false, false) => format!("{s}/32"),
        };
        out.push(Cidr::try_from(s.clone()).map_err(|_| format!("{field}: {s:?} is not a CIDR"))?);
    }
    Ok(out)
}

/// A protocol name as the policy languages write it (`TCP`, `udp`, `ICMP`); `None` for one
/// no probe uses (SCTP, numbers).
pub(super) fn protocol(s: &str) -> Option<Protocol> {
    match s.to_ascii_lowercase().as_str() {
        "tcp" | "6" => Some(Protocol::Tcp),
        "udp" | "17" => Some(Protocol::Udp),
        "icmp" | "1" => Some(Protocol::Icmp),
        _ => None,
    }
}
