//! Lab scenarios (YAML): the cluster to build, the faults to inject, and what must be observed.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::inventory::{Cni, Component};
use crate::model::{Direction, Protocol};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    #[serde(default = "default_name")]
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Number of nodes, named n1..nN; the first `controlPlanes` are control-plane nodes.
    #[serde(default = "default_nodes")]
    pub nodes: usize,
    #[serde(default = "default_control_planes")]
    pub control_planes: usize,
    /// Zones (each an L2 switch; zones are joined by a router). Nodes not listed join the first.
    #[serde(default)]
    pub zones: Vec<Zone>,
    /// Agent pods per node.
    #[serde(default = "default_pods")]
    pub pods_per_node: usize,
    /// The node whose pod network hosts the cluster DNS pod.
    #[serde(default = "default_dns_node")]
    pub dns_node: String,
    /// The CNI the inventory reports (the data path is always flannel-style VXLAN).
    #[serde(default = "default_cni")]
    pub cni: Cni,
    #[serde(default)]
    pub components: Vec<Component>,
    #[serde(default)]
    pub faults: Vec<Fault>,
    #[serde(default)]
    pub expect: Expect,
}

fn default_name() -> String {
    "lab".into()
}
fn default_nodes() -> usize {
    3
}
fn default_control_planes() -> usize {
    1
}
fn default_pods() -> usize {
    1
}
fn default_dns_node() -> String {
    "n1".into()
}
fn default_cni() -> Cni {
    Cni::Flannel
}

impl Default for Scenario {
    fn default() -> Self {
        serde_saphyr::from_str("{}").expect("an empty scenario is valid")
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Zone {
    pub name: String,
    pub nodes: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Drop,
    Reject,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Place {
    /// On the path: the router between zones, or the zone's switch.
    #[default]
    Network,
    /// In the receiving node's own input chain.
    Host,
}

/// A port or an inclusive range, `8472` or `"2379-2380"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawPorts", into = "RawPorts")]
pub enum Ports {
    One(u16),
    Range((u16, u16)),
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum RawPorts {
    Number(u16),
    Text(String),
}

impl TryFrom<RawPorts> for Ports {
    type Error = String;
    fn try_from(raw: RawPorts) -> Result<Self, String> {
        let text = match raw {
            RawPorts::Number(0) => return Err("port 0 is not a port".into()),
            RawPorts::Number(p) => return Ok(Self::One(p)),
            RawPorts::Text(t) => t,
        };
        let bad = || format!("{text:?}: expected a port or a range like 2379-2380");
        if let Ok(p) = text.trim().parse::<u16>() {
            return Self::try_from(RawPorts::Number(p));
        }
        let (a, b) = text.split_once('-').ok_or_else(bad)?;
        let a: u16 = a.trim().parse().map_err(|_| bad())?;
        let b: u16 = b.trim().parse().map_err(|_| bad())?;
        if a == 0 || a > b {
            return Err(bad());
        }
        Ok(Self::Range((a, b)))
    }
}

impl From<Ports> for RawPorts {
    fn from(p: Ports) -> Self {
        match p {
            Ports::One(p) => Self::Number(p),
            Ports::Range((a, b)) => Self::Text(format!("{a}-{b}")),
        }
    }
}

impl Ports {
    /// nftables syntax.
    #[must_use]
    pub fn nft(&self) -> String {
        match self {
            Self::One(p) => p.to_string(),
            Self::Range((a, b)) => format!("{a}-{b}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Fault {
    #[serde(rename_all = "camelCase")]
    Firewall {
        action: Action,
        protocol: Protocol,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        port: Option<Ports>,
        /// Sending nodes; all other nodes when empty.
        #[serde(default)]
        from: Vec<String>,
        /// Receiving nodes; all other nodes when empty.
        #[serde(default)]
        to: Vec<String>,
        #[serde(default)]
        direction: Direction,
        #[serde(default)]
        place: Place,
    },
    KubeProxyMissing {
        node: String,
    },
    /// The underlay carries at most `mtu` bytes to and from the node: bigger frames vanish.
    Mtu {
        node: String,
        mtu: u16,
    },
    /// A share of the node's underlay frames is dropped (both directions).
    Loss {
        node: String,
        percent: u8,
    },
    /// The DNS stand-in forwards non-cluster names to itself.
    DnsLoop,
    CniTokenExpired {
        node: String,
    },
    CniTokenStale {
        node: String,
    },
    KubeletLocalhost {
        node: String,
    },
}

/// What the scenario must show.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expect {
    /// Checked by `lab run` with the agents' probes.
    #[serde(default)]
    pub reachability: Vec<Reach>,
    /// Findings the diagnosis must produce (kind plus key fields); checked once diagnosis exists.
    #[serde(default)]
    pub findings: Vec<serde_json::Value>,
    /// Findings it must not produce.
    #[serde(default)]
    pub not_findings: Vec<serde_json::Value>,
}

/// One reachability check: a probe from an agent to a target, and the outcome it must have.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Reach {
    /// `n1/host` or `n2/pod`.
    pub from: String,
    /// `n3/host`, `n3/pod`, `n3/vtep`, `service/kubernetes`, `service/kube-dns`, `dns-pod`,
    /// `upstream-dns`, `apiserver` (the first API endpoint), or `localhost`.
    pub to: String,
    pub probe: ReachProbe,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// For `dns`: the name to ask for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// For `dns`: `udp` or `tcp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
    /// For `mtu`: IPv4 packet size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u16>,
    pub outcome: probe_proto::Outcome,
    /// For `vxlan`: the interfaces of the target host that must have seen the datagram
    /// (exactly these).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen_on: Option<Vec<String>>,
    /// The address that must have sent the ICMP error: an IPv4 address, or `router` (the
    /// router's address in the source's zone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icmp_from: Option<String>,
    /// For `tls`: send the bearer token of the source node's CNI kubeconfig.
    #[serde(default)]
    pub with_cni_token: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReachProbe {
    Tcp,
    Udp,
    Icmp,
    Vtep,
    Mtu,
    Tls,
    Dns,
    Vxlan,
}

#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("cannot read scenario {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("scenario {path}: {message}")]
    Invalid { path: String, message: String },
}

impl Scenario {
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text).map_err(|message| ScenarioError::Invalid {
            path: path.display().to_string(),
            message,
        })
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        let s: Self = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
        s.validate()?;
        Ok(s)
    }

    /// Node names, n1..nN.
    #[must_use]
    pub fn node_names(&self) -> Vec<String> {
        (1..=self.nodes).map(|i| format!("n{i}")).collect()
    }

    /// Checks what the types cannot, naming the field.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=250).contains(&self.nodes) {
            return Err(format!("nodes: {} is out of range (1-250)", self.nodes));
        }
        if self.control_planes == 0 || self.control_planes > self.nodes {
            return Err(format!(
                "controlPlanes: {} must be 1..=nodes ({})",
                self.control_planes, self.nodes
            ));
        }
        if self.pods_per_node == 0 || self.pods_per_node > 40 {
            return Err(format!(
                "podsPerNode: {} is out of range (1-40)",
                self.pods_per_node
            ));
        }
        if self.zones.len() > 8 {
            return Err(format!(
                "zones: {} zones; the lab supports at most 8",
                self.zones.len()
            ));
        }
        let names = self.node_names();
        let known = |n: &String, field: String| {
            if names.contains(n) {
                Ok(())
            } else {
                Err(format!(
                    "{field}: unknown node {n:?} (nodes are n1..n{})",
                    self.nodes
                ))
            }
        };
        known(&self.dns_node, "dnsNode".into())?;
        let mut placed = std::collections::HashSet::new();
        for (z, zone) in self.zones.iter().enumerate() {
            for n in &zone.nodes {
                known(n, format!("zones[{z}].nodes"))?;
                if !placed.insert(n.clone()) {
                    return Err(format!("zones[{z}].nodes: {n:?} is in two zones"));
                }
            }
        }
        self.validate_faults(&known)?;
        for (i, r) in self.expect.reachability.iter().enumerate() {
            let (node, _) = r.from.split_once('/').ok_or_else(|| {
                format!(
                    "expect.reachability[{i}].from: {:?} must be NODE/host or NODE/pod",
                    r.from
                )
            })?;
            known(&node.to_string(), format!("expect.reachability[{i}].from"))?;
        }
        Ok(())
    }
}

impl Scenario {
    fn validate_faults(
        &self,
        known: &dyn Fn(&String, String) -> Result<(), String>,
    ) -> Result<(), String> {
        for (i, f) in self.faults.iter().enumerate() {
            let field = |name: &str| format!("faults[{i}].{name}");
            match f {
                Fault::Firewall {
                    from,
                    to,
                    protocol,
                    port,
                    ..
                } => {
                    for n in from {
                        known(n, field("from"))?;
                    }
                    for n in to {
                        known(n, field("to"))?;
                    }
                    if *protocol == Protocol::Icmp && port.is_some() {
                        return Err(format!("{}: icmp has no ports", field("port")));
                    }
                    if from.is_empty() && to.is_empty() {
                        return Err(format!(
                            "{}: name the nodes on at least one side",
                            field("from")
                        ));
                    }
                }
                Fault::KubeProxyMissing { node }
                | Fault::CniTokenExpired { node }
                | Fault::CniTokenStale { node }
                | Fault::KubeletLocalhost { node } => known(node, field("node"))?,
                Fault::Mtu { node, mtu } => {
                    known(node, field("node"))?;
                    if !(576..=9000).contains(mtu) {
                        return Err(format!(
                            "{}: {mtu} is out of range (576-9000)",
                            field("mtu")
                        ));
                    }
                }
                Fault::Loss { node, percent } => {
                    known(node, field("node"))?;
                    if !(1..=100).contains(percent) {
                        return Err(format!(
                            "{}: {percent} is out of range (1-100)",
                            field("percent")
                        ));
                    }
                }
                Fault::DnsLoop => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let s = Scenario::parse("{}").unwrap();
        assert_eq!((s.nodes, s.control_planes, s.pods_per_node), (3, 1, 1));
        assert_eq!(s.node_names(), ["n1", "n2", "n3"]);
    }

    #[test]
    fn full_scenario_parses() {
        let s = Scenario::parse(
            r#"
name: flannel-8472
nodes: 3
zones:
  - {name: office, nodes: [n1, n2]}
  - {name: dmz, nodes: [n3]}
faults:
  - {kind: firewall, action: drop, protocol: udp, port: 8472, from: [n3], direction: both}
  - {kind: firewall, action: reject, protocol: tcp, port: "2379-2380", to: [n1], place: host}
  - {kind: mtu, node: n2, mtu: 1400}
  - {kind: dns-loop}
expect:
  reachability:
    - {from: n1/pod, to: n3/pod, probe: tcp, outcome: timeout}
  findings:
    - {kind: firewall-gap, protocol: udp, port: 8472}
"#,
        )
        .unwrap();
        assert_eq!(s.zones.len(), 2);
        assert_eq!(s.faults.len(), 4);
        match &s.faults[1] {
            Fault::Firewall {
                port: Some(Ports::Range((2379, 2380))),
                place: Place::Host,
                ..
            } => {}
            f => panic!("unexpected {f:?}"),
        }
        assert_eq!(s.expect.findings[0]["port"], 8472);
    }

    #[test]
    fn bad_scenarios_name_the_field() {
        let cases = [
            ("nodes: 0", "nodes"),
            ("controlPlanes: 4", "controlPlanes"),
            (
                "faults: [{kind: mtu, node: n9, mtu: 1400}]",
                "faults[0].node",
            ),
            (
                "faults: [{kind: firewall, action: drop, protocol: icmp, port: 1, from: [n1]}]",
                "faults[0].port",
            ),
            (
                "faults: [{kind: firewall, action: drop, protocol: udp, port: \"9-1\", from: [n1]}]",
                "range",
            ),
            ("faults: [{kind: teleport}]", "teleport"),
            ("nodez: 3", "nodez"),
            (
                "zones: [{name: a, nodes: [n1]}, {name: b, nodes: [n1]}]",
                "two zones",
            ),
            (
                "expect: {reachability: [{from: n1, to: n2/pod, probe: tcp, outcome: ok}]}",
                "NODE/host",
            ),
        ];
        for (text, want) in cases {
            let err = Scenario::parse(text).unwrap_err();
            assert!(err.contains(want), "{text}: {err} should mention {want}");
        }
    }
}
