//! Lab scenarios (YAML): the cluster to build, the faults to inject, and what must be observed.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::inventory::{Cni, Component, YamlError, from_yaml};
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
    /// The CNI the inventory reports.
    #[serde(default = "default_cni")]
    pub cni: Cni,
    /// The encapsulation the lab builds and the inventory reports: flannel's VXLAN on 8472 when
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlay: Option<LabOverlay>,
    #[serde(default)]
    pub components: Vec<Component>,
    #[serde(default)]
    pub faults: Vec<Fault>,
    #[serde(default)]
    pub expect: Expect,
    /// A machine about to join: `lab run` runs `prober preflight` for it instead of `matrix`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<CandidateSpec>,
}

/// The candidate: a host on a zone switch with an address and nothing else (no overlay device,
/// no pods, no kubelet), until `occupied` says a program already holds some ports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CandidateSpec {
    pub name: String,
    /// The zone whose switch it hangs on (the first zone when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// `worker` or `control-plane`.
    #[serde(default = "default_role")]
    pub role: String,
    /// Ports (TCP and UDP) a program already listens on there, for a port conflict.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub occupied: Vec<u16>,
    /// The nameservers its resolv.conf names (default: the lab's upstream resolver), e.g.
    /// 127.0.0.53 for a systemd-resolved stub that becomes a DNS forward loop once it joins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<std::net::Ipv4Addr>,
    /// Seconds its clock runs ahead of the API server's (negative: behind). The lab's hosts
    /// share one clock, so the API server's `Date` runs this much behind instead.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub clock_skew: i64,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde hands a reference
fn is_zero(n: &i64) -> bool {
    *n == 0
}

fn default_role() -> String {
    "worker".into()
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

/// The lab's overlay: kernel VXLAN (on `port`, 8472 by default), or a user-space tunnel standing
/// in for the devices this kind of kernel may lack: IP-in-IP (IP protocol 4) or Geneve (UDP 6081).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabOverlay {
    pub mode: OverlayMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Whether the inventory names each node's tunnel endpoint (default: yes). `false` is a CNI
    /// that publishes none discovery reads: the tunnel cannot be probed directly.
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub vteps_known: bool,
}

fn yes() -> bool {
    true
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's `skip_serializing_if` passes a reference
fn is_yes(b: &bool) -> bool {
    *b
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OverlayMode {
    Vxlan,
    Ipip,
    Geneve,
    /// The `WireGuard` port carrying the lab's tunnel in plaintext (no keys, no encryption): what
    /// the firewalls see is real UDP 51820.
    Wireguard,
}

impl OverlayMode {
    /// The inventory's `cluster.overlay.mode`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Vxlan => "vxlan",
            Self::Ipip => "ipip",
            Self::Geneve => "geneve",
            Self::Wireguard => "wireguard",
        }
    }
}

impl Scenario {
    /// The overlay's mode and its port (0 for IP-in-IP, which has none).
    #[must_use]
    pub fn overlay(&self) -> (OverlayMode, u16) {
        match self.overlay {
            None => (OverlayMode::Vxlan, 8472),
            Some(LabOverlay { mode, port, .. }) => (
                mode,
                match mode {
                    OverlayMode::Vxlan => port.unwrap_or(8472),
                    OverlayMode::Geneve => port.unwrap_or(6081),
                    OverlayMode::Wireguard => port.unwrap_or(51820),
                    OverlayMode::Ipip => 0,
                },
            ),
        }
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
    /// ICMP administratively prohibited.
    Reject,
    /// A TCP reset, as `reject with tcp reset` answers (TCP only).
    Reset,
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
    type Error = BadPorts;
    fn try_from(raw: RawPorts) -> Result<Self, BadPorts> {
        let text = match raw {
            RawPorts::Number(0) => return Err(BadPorts("0".into())),
            RawPorts::Number(p) => return Ok(Self::One(p)),
            RawPorts::Text(t) => t,
        };
        let bad = || BadPorts(text.clone());
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
    /// Findings the diagnosis must produce (kind plus key fields).
    #[serde(default)]
    pub findings: Vec<FindingPattern>,
    /// Findings it must not produce.
    #[serde(default)]
    pub not_findings: Vec<FindingPattern>,
}

pub use crate::diagnose::FindingPattern;

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

/// A scenario file that cannot be used: the file, then what is wrong in it.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("scenario: {0}")]
    Read(#[source] crate::model::read::ReadError),
    #[error("scenario {}: {source}", path.display())]
    Invalid {
        path: PathBuf,
        source: InvalidScenario,
    },
}

/// What is wrong in a scenario: the field (its path, e.g. `faults[0].node`) and what it must be.
#[derive(Debug, thiserror::Error)]
pub enum InvalidScenario {
    /// Not YAML, or not the scenario's shape: a wrong type, a missing field, an unknown key or
    /// value (the message names it and where it is).
    #[error(transparent)]
    Shape(#[from] YamlError),
    #[error("{field}: {value} is out of range ({range})")]
    OutOfRange {
        field: String,
        value: usize,
        range: &'static str,
    },
    #[error("controlPlanes: {control_planes} must be 1..=nodes ({nodes})")]
    ControlPlanes { control_planes: usize, nodes: usize },
    #[error("zones: {0} zones; the lab supports at most 8")]
    TooManyZones(usize),
    #[error("{field}: unknown node {node:?} (nodes are n1..n{nodes})")]
    UnknownNode {
        field: String,
        node: String,
        nodes: usize,
    },
    #[error("{field}: {node:?} is in two zones")]
    TwoZones { field: String, node: String },
    #[error("{field}: icmp and ipip have no ports")]
    IcmpPort { field: String },
    #[error("{field}: name the nodes on at least one side")]
    NoSide { field: String },
    #[error("{field}: {value:?} must be NODE/host or NODE/pod")]
    Source { field: String, value: String },
    #[error("{field}: an empty pattern matches every finding; name at least one field")]
    EmptyPattern { field: String },
    /// A name that becomes a namespace, a file or a command argument: only what cannot change
    /// the command it goes into. The value is shown escaped (`{:?}`), never raw.
    #[error(
        "{field}: {value:?} must be 1-{max} characters of a-z, 0-9 and '-', starting and ending with a letter or digit"
    )]
    BadName {
        field: String,
        value: String,
        max: usize,
    },
    #[error("{field}: {value:?} is the name of one of the lab's own namespaces or nodes")]
    TakenName { field: String, value: String },
    #[error("{field}: {value:?} must be worker or control-plane")]
    Role { field: String, value: String },
    #[error("{field}: no zone is named {value:?}")]
    UnknownZone { field: String, value: String },
}

/// The longest scenario or zone name (a DNS label).
const MAX_NAME: usize = 63;
/// The longest candidate name: it becomes a namespace (`plab-LAB-NAME`) and a host-root directory.
const MAX_CANDIDATE_NAME: usize = 20;

/// Checks a name that reaches a namespace, a file or a command line: `[a-z0-9-]`, bounded, no
/// leading or trailing '-' (so it can never be read as an option).
fn plain_name(field: &str, value: &str, max: usize) -> Result<(), InvalidScenario> {
    let ok = !value.is_empty()
        && value.len() <= max
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !value.starts_with('-')
        && !value.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(InvalidScenario::BadName {
            field: field.to_string(),
            value: value.to_string(),
            max,
        })
    }
}

/// Whether `name`, put after the lab's prefix, is a namespace the lab itself builds: the router
/// (`rt`), a switch (`swN`), a node (`nN`), its pods (`nNpK`) or the DNS pod (`nNdns`).
fn lab_namespace(name: &str) -> bool {
    /// What follows a run of at least one digit at the start of `s`.
    fn digits_then(s: &str) -> Option<&str> {
        let rest = s.trim_start_matches(|c: char| c.is_ascii_digit());
        (rest.len() < s.len()).then_some(rest)
    }
    if name == "rt" {
        return true;
    }
    if let Some(rest) = name.strip_prefix("sw").and_then(digits_then) {
        return rest.is_empty();
    }
    match name.strip_prefix('n').and_then(digits_then) {
        Some("" | "dns") => true,
        Some(rest) => rest
            .strip_prefix('p')
            .and_then(digits_then)
            .is_some_and(str::is_empty),
        None => false,
    }
}

/// A `port` that is neither a port nor a range.
#[derive(Debug, thiserror::Error)]
#[error("{0:?}: expected a port (1-65535) or a range like 2379-2380")]
pub struct BadPorts(String);

impl Scenario {
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        use crate::model::read::{MAX_SCENARIO_BYTES, read_capped};
        let text =
            read_capped(path, MAX_SCENARIO_BYTES, "scenario").map_err(ScenarioError::Read)?;
        Self::parse(&text).map_err(|source| ScenarioError::Invalid {
            path: path.into(),
            source,
        })
    }

    pub fn parse(text: &str) -> Result<Self, InvalidScenario> {
        let s: Self = from_yaml(text)?;
        s.validate()?;
        Ok(s)
    }

    /// The expectations with `others` (or `rest`) in a finding pattern's `to` or `nodes` replaced
    /// by every node the pattern's `from` does not name: so that a scenario written for three
    /// nodes still holds at `--nodes 20`.
    #[must_use]
    pub fn expanded_expect(&self) -> Expect {
        let names = self.node_names();
        let expand = |p: &FindingPattern| {
            let mut p = p.clone();
            let from = p.from.clone().unwrap_or_default();
            let rest = || names.iter().filter(|n| !from.contains(n)).cloned();
            for list in [&mut p.to, &mut p.nodes].into_iter().flatten() {
                if list.iter().any(|n| n == "others" || n == "rest") {
                    let mut kept: Vec<String> = list
                        .iter()
                        .filter(|n| *n != "others" && *n != "rest")
                        .cloned()
                        .collect();
                    kept.extend(rest().filter(|n| !kept.contains(n)).collect::<Vec<_>>());
                    *list = kept;
                }
            }
            p
        };
        let mut e = self.expect.clone();
        e.findings = e.findings.iter().map(expand).collect();
        e.not_findings = e.not_findings.iter().map(expand).collect();
        e
    }

    /// Node names, n1..nN.
    #[must_use]
    pub fn node_names(&self) -> Vec<String> {
        (1..=self.nodes).map(|i| format!("n{i}")).collect()
    }

    /// Checks what the types cannot, naming the field.
    pub fn validate(&self) -> Result<(), InvalidScenario> {
        if !(1..=250).contains(&self.nodes) {
            return Err(InvalidScenario::OutOfRange {
                field: "nodes".into(),
                value: self.nodes,
                range: "1-250",
            });
        }
        if self.control_planes == 0 || self.control_planes > self.nodes {
            return Err(InvalidScenario::ControlPlanes {
                control_planes: self.control_planes,
                nodes: self.nodes,
            });
        }
        if self.pods_per_node == 0 || self.pods_per_node > 40 {
            return Err(InvalidScenario::OutOfRange {
                field: "podsPerNode".into(),
                value: self.pods_per_node,
                range: "1-40",
            });
        }
        if self.zones.len() > 8 {
            return Err(InvalidScenario::TooManyZones(self.zones.len()));
        }
        self.validate_names()?;
        let mut names = self.node_names();
        // Faults and expectations may name the candidate too.
        names.extend(self.candidate.iter().map(|c| c.name.clone()));
        let known = |n: &String, field: String| {
            if names.contains(n) {
                Ok(())
            } else {
                Err(InvalidScenario::UnknownNode {
                    field,
                    node: n.clone(),
                    nodes: self.nodes,
                })
            }
        };
        known(&self.dns_node, "dnsNode".into())?;
        let mut placed = std::collections::HashSet::new();
        for (z, zone) in self.zones.iter().enumerate() {
            for n in &zone.nodes {
                known(n, format!("zones[{z}].nodes"))?;
                if !placed.insert(n.clone()) {
                    return Err(InvalidScenario::TwoZones {
                        field: format!("zones[{z}].nodes"),
                        node: n.clone(),
                    });
                }
            }
        }
        self.validate_faults(&known)?;
        self.validate_expect(&known)
    }

    /// Every name that becomes a namespace, a directory or a command argument.
    fn validate_names(&self) -> Result<(), InvalidScenario> {
        plain_name("name", &self.name, MAX_NAME)?;
        for (z, zone) in self.zones.iter().enumerate() {
            plain_name(&format!("zones[{z}].name"), &zone.name, MAX_NAME)?;
        }
        for (i, c) in self.components.iter().enumerate() {
            crate::inventory::check_component(c).map_err(|(key, value)| {
                InvalidScenario::BadName {
                    field: format!("components[{i}].{key}"),
                    value,
                    max: crate::inventory::MAX_DNS_LABEL,
                }
            })?;
        }
        let Some(c) = &self.candidate else {
            return Ok(());
        };
        plain_name("candidate.name", &c.name, MAX_CANDIDATE_NAME)?;
        if lab_namespace(&c.name) {
            return Err(InvalidScenario::TakenName {
                field: "candidate.name".into(),
                value: c.name.clone(),
            });
        }
        if c.role != "worker" && c.role != "control-plane" {
            return Err(InvalidScenario::Role {
                field: "candidate.role".into(),
                value: c.role.clone(),
            });
        }
        // Without zones the lab has one, `default`.
        let known_zone = |z: &String| {
            self.zones.iter().any(|zone| &zone.name == z)
                || (self.zones.is_empty() && z == "default")
        };
        if let Some(z) = c.zone.as_ref().filter(|z| !known_zone(z)) {
            return Err(InvalidScenario::UnknownZone {
                field: "candidate.zone".into(),
                value: z.clone(),
            });
        }
        Ok(())
    }

    fn validate_faults(
        &self,
        known: &dyn Fn(&String, String) -> Result<(), InvalidScenario>,
    ) -> Result<(), InvalidScenario> {
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
                    if matches!(protocol, Protocol::Icmp | Protocol::Ipip) && port.is_some() {
                        return Err(InvalidScenario::IcmpPort {
                            field: field("port"),
                        });
                    }
                    if from.is_empty() && to.is_empty() {
                        return Err(InvalidScenario::NoSide {
                            field: field("from"),
                        });
                    }
                }
                Fault::KubeProxyMissing { node }
                | Fault::CniTokenExpired { node }
                | Fault::CniTokenStale { node }
                | Fault::KubeletLocalhost { node } => known(node, field("node"))?,
                Fault::Mtu { node, mtu } => {
                    known(node, field("node"))?;
                    if !(576..=9000).contains(mtu) {
                        return Err(InvalidScenario::OutOfRange {
                            field: field("mtu"),
                            value: usize::from(*mtu),
                            range: "576-9000",
                        });
                    }
                }
                Fault::Loss { node, percent } => {
                    known(node, field("node"))?;
                    if !(1..=100).contains(percent) {
                        return Err(InvalidScenario::OutOfRange {
                            field: field("percent"),
                            value: usize::from(*percent),
                            range: "1-100",
                        });
                    }
                }
                Fault::DnsLoop => {}
            }
        }
        Ok(())
    }

    fn validate_expect(
        &self,
        known: &dyn Fn(&String, String) -> Result<(), InvalidScenario>,
    ) -> Result<(), InvalidScenario> {
        for (i, r) in self.expect.reachability.iter().enumerate() {
            let field = format!("expect.reachability[{i}].from");
            let Some((node, _)) = r.from.split_once('/') else {
                return Err(InvalidScenario::Source {
                    field,
                    value: r.from.clone(),
                });
            };
            known(&node.to_string(), field)?;
        }
        let patterns = [
            ("findings", &self.expect.findings),
            ("notFindings", &self.expect.not_findings),
        ];
        for (list, patterns) in patterns {
            if let Some(i) = patterns.iter().position(FindingPattern::is_empty) {
                return Err(InvalidScenario::EmptyPattern {
                    field: format!("expect.{list}[{i}]"),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::Kind;

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
        assert_eq!(s.expect.findings[0].port, Some(8472));
        assert_eq!(s.expect.findings[0].kind, Some(Kind::FirewallGap));
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
            let err = Scenario::parse(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text}: {err} should mention {want}");
        }
    }

    #[test]
    fn misspelled_keys_are_errors_naming_the_key() {
        // (scenario, the key or value the error names, the field path it names)
        let cases = [
            (
                "expect: {findings: [{kimd: firewall-gap}]}",
                "kimd",
                "expect.findings[0]",
            ),
            (
                "expect: {notFindings: [{kimd: firewall-gap}]}",
                "kimd",
                "expect.notFindings[0]",
            ),
            (
                "expect: {notFindings: [{kind: dns}, {kind: bootstrap-cycle, sate: active}]}",
                "sate",
                "expect.notFindings[1]",
            ),
            (
                "expect: {notFindngs: [{kind: firewall-gap}]}",
                "notFindngs",
                "expect",
            ),
            (
                "expect: {reachability: [{from: n1/pod, to: n2/pod, probe: tcp, outcome: ok, icmpFrm: router}]}",
                "icmpFrm",
                "expect.reachability[0]",
            ),
            (
                "faults: [{kind: mtu, node: n2, mtu: 1400, mut: 1}]",
                "mut",
                "faults[0]",
            ),
            (
                "faults: [{kind: firewall, action: drop, protocol: udp, from: [n1], plase: host}]",
                "plase",
                "faults[0]",
            ),
            ("zones: [{name: a, nodez: [n1]}]", "nodez", "zones[0]"),
            // A misspelled value is as silent as a misspelled key.
            (
                "expect: {findings: [{kind: firewall-gapp}]}",
                "firewall-gapp",
                "expect.findings[0].kind",
            ),
            (
                "expect: {findings: [{kind: dns, protocol: udpp}]}",
                "udpp",
                "expect.findings[0].protocol",
            ),
            (
                "expect: {notFindings: [{kind: bootstrap-cycle, state: actve}]}",
                "actve",
                "expect.notFindings[0].state",
            ),
        ];
        for (text, key, path) in cases {
            match Scenario::parse(text) {
                Err(InvalidScenario::Shape(e)) => {
                    assert!(e.field.starts_with(path), "{text}: {e} should be at {path}");
                    let e = e.to_string();
                    assert!(e.contains(key), "{text}: {e} should name {key}");
                }
                other => panic!("{text}: want a shape error naming {key}, got {other:?}"),
            }
        }
    }

    #[test]
    fn an_empty_pattern_is_an_error() {
        let err = Scenario::parse("expect: {notFindings: [{kind: dns}, {}]}").unwrap_err();
        assert!(
            matches!(&err, InvalidScenario::EmptyPattern { field } if field == "expect.notFindings[1]"),
            "{err:?}"
        );
    }

    #[test]
    fn every_checked_in_scenario_parses() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios");
        let mut files = Vec::new();
        for dir in [root.clone(), root.join("faults")] {
            for e in std::fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p.extension().is_some_and(|x| x == "yaml") {
                    files.push(p);
                }
            }
        }
        assert!(files.len() >= 14, "the scenarios are checked in: {files:?}");
        for p in &files {
            let s = Scenario::load(p).unwrap_or_else(|e| panic!("{e}"));
            assert!(
                !s.expect.reachability.is_empty(),
                "{}: expects nothing",
                p.display()
            );
            // The lab saves the scenario it built; the copy must read back as the same scenario.
            let saved = serde_saphyr::to_string(&s).unwrap();
            assert_eq!(Scenario::parse(&saved).unwrap(), s, "{saved}");
        }
    }

    #[test]
    fn others_means_every_node_not_in_from() {
        let mut s = Scenario::load(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../tests/scenarios/flannel-8472.yaml"),
        )
        .unwrap();
        s.nodes = 6;
        let e = s.expanded_expect();
        assert_eq!(
            e.findings[0].to.as_deref(),
            Some(&["n1", "n2", "n4", "n5", "n6"].map(String::from)[..])
        );
    }
}
