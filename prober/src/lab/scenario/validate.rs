//! What the types cannot check in a scenario: ranges, known node and zone names, names safe to
//! become a namespace or a command argument; each error names its field.

use super::{Fault, FindingPattern, Scenario};
use crate::inventory::YamlError;
use crate::model::Protocol;

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
    #[error(
        "{field}: {value:?} must be NODE/host, NODE/pod, NODE/vtep, service/kubernetes, \
         service/kube-dns, dns-pod, upstream-dns, apiserver or localhost"
    )]
    Target { field: String, value: String },
    #[error("{field}: port 0 is not a port")]
    PortZero { field: String },
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
    #[error(
        "routers: 2 routers in a row need at least 2 zones (the second router joins the zones after the first)"
    )]
    RoutersWithoutZones,
    #[error("{field}: second-router needs `routers: 2`")]
    NoSecondRouter { field: String },
    #[error(
        "paths: a scenario with a candidate runs preflight, which probes every port a join needs"
    )]
    PathsWithCandidate,
    /// The families the lab can build.
    #[error(
        "ipFamilies: {0} is not one the lab builds: [ipv4], [ipv4, ipv6] (dual-stack) or [ipv6] (an IPv6-only cluster)"
    )]
    Families(String),
    #[error("ipFamilies: a lab with IPv6 has one router and no candidate (yet): {0}")]
    FamiliesWith(&'static str),
    #[error(
        "ipFamilies: [ipv6] runs the overlay over an IPv6 underlay, which the lab builds for VXLAN only, not overlay.mode {0}"
    )]
    Ipv6UnderlayMode(&'static str),
    /// `overlay.ipv6Tunnel` where the lab cannot build it: what it needs, and what it got.
    #[error("overlay.ipv6Tunnel: the IPv6 twin of the VXLAN device needs {0}")]
    Ipv6Tunnel(String),
    #[error("{field}: expected at least one ICMP type (2 is ICMPv6 Packet Too Big)")]
    NoIcmpType { field: String },
    #[error("{field}: {family} is not one of the lab's ipFamilies")]
    NotInLab {
        field: String,
        family: crate::inventory::Family,
    },
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

impl Scenario {
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
        if !(1..=2).contains(&self.routers) {
            return Err(InvalidScenario::OutOfRange {
                field: "routers".into(),
                value: self.routers,
                range: "1-2",
            });
        }
        if self.routers == 2 && self.zones.len() < 2 {
            return Err(InvalidScenario::RoutersWithoutZones);
        }
        self.validate_families()?;
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
        if !self.paths.is_empty() {
            return Err(InvalidScenario::PathsWithCandidate);
        }
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
        if let Some(i) = c.occupied.iter().position(|&p| p == 0) {
            return Err(InvalidScenario::PortZero {
                field: format!("candidate.occupied[{i}]"),
            });
        }
        Ok(())
    }

    /// A fault's `family` that defaults to ipv4 when absent (so an IPv6-only lab's faults need
    /// not say it): `ipv6` must be one the lab has, or the fault builds and blocks nothing.
    fn has_ipv6_if(
        &self,
        family: crate::inventory::Family,
        field: &str,
    ) -> Result<(), InvalidScenario> {
        if family == crate::inventory::Family::Ipv6 {
            self.has_family(family, field)?;
        }
        Ok(())
    }

    /// A fault's `family` must be one the lab has addresses in.
    fn has_family(
        &self,
        family: crate::inventory::Family,
        field: &str,
    ) -> Result<(), InvalidScenario> {
        if self.ip_families.contains(&family) {
            return Ok(());
        }
        Err(InvalidScenario::NotInLab {
            field: field.to_string(),
            family,
        })
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
                    place,
                    family,
                    ..
                } => {
                    self.has_ipv6_if(*family, &field("family"))?;
                    if *place == super::Place::SecondRouter && self.routers != 2 {
                        return Err(InvalidScenario::NoSecondRouter {
                            field: field("place"),
                        });
                    }
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
                Fault::KubeProxyMissing { node, family } => {
                    known(node, field("node"))?;
                    if let Some(f) = family {
                        self.has_family(*f, &field("family"))?;
                    }
                }
                Fault::CniTokenExpired { node }
                | Fault::CniTokenStale { node }
                | Fault::CniKubeconfigInsecure { node }
                | Fault::MultusTokenStale { node }
                | Fault::KubeletLocalhost { node } => known(node, field("node"))?,
                Fault::Mtu { node, mtu, family } => {
                    known(node, field("node"))?;
                    // Without `family` it is the link's, whatever the families over it.
                    self.has_ipv6_if(*family, &field("family"))?;
                    if !(576..=9000).contains(mtu) {
                        return Err(InvalidScenario::OutOfRange {
                            field: field("mtu"),
                            value: usize::from(*mtu),
                            range: "576-9000",
                        });
                    }
                }
                Fault::IcmpFilter {
                    nodes,
                    types,
                    family,
                } => {
                    for n in nodes {
                        known(n, field("nodes"))?;
                    }
                    if types.is_empty() {
                        return Err(InvalidScenario::NoIcmpType {
                            field: field("types"),
                        });
                    }
                    self.has_family(*family, &field("family"))?;
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
                Fault::Policy { drop, .. } => {
                    for (j, d) in drop.iter().enumerate() {
                        for n in &d.nodes {
                            known(n, field(&format!("drop[{j}].nodes")))?;
                        }
                        if d.port.is_some()
                            && !matches!(d.protocol, Some(Protocol::Tcp | Protocol::Udp))
                        {
                            return Err(InvalidScenario::IcmpPort {
                                field: field(&format!("drop[{j}].port")),
                            });
                        }
                    }
                }
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
            // What `lab::check` resolves, said now rather than after the lab is built.
            let field = format!("expect.reachability[{i}].to");
            let fixed = [
                "service/kubernetes",
                "service/kube-dns",
                "dns-pod",
                "upstream-dns",
                "apiserver",
                "localhost",
            ];
            if !fixed.contains(&r.to.as_str()) {
                let target = InvalidScenario::Target {
                    field: field.clone(),
                    value: r.to.clone(),
                };
                match r.to.split_once('/') {
                    Some((node, "host" | "pod" | "vtep")) => known(&node.to_string(), field)?,
                    _ => return Err(target),
                }
            }
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
