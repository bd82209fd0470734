//! What a scenario must show: reachability rows and finding patterns (and the ones it must not).

use serde::{Deserialize, Serialize};

use super::Scenario;
use crate::diagnose::{Finding, Kind, Severity, State};
use crate::model::{Direction, Protocol};

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

/// A finding expectation: the fields it names must all hold (lists as sets), the others are free.
/// Unknown keys are an error, so a misspelled key cannot silently match nothing (or everything).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FindingPattern {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<Kind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Protocol>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<Direction>,
    /// `network` or `host:NODE`.
    #[serde(default, rename = "where", skip_serializing_if = "Option::is_none")]
    pub where_: Option<String>,
    /// A state this prober names: an unknown or misspelled one is an error, not a pattern that
    /// can never match.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "known_state"
    )]
    pub state: Option<State>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycle: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub components: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<String>>,
    /// Whether the cause was inferred from the pattern rather than probed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inferred: Option<bool>,
}

/// A pattern's `state`, refused unless it is one of the states the diagnosis writes.
fn known_state<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<State>, D::Error> {
    use serde::de::Error as _;
    match State::deserialize(d)? {
        State::Other(s) => Err(D::Error::custom(format!(
            "state {s:?} is not a state any finding has (see docs/report.schema.json)"
        ))),
        known => Ok(Some(known)),
    }
}

impl FindingPattern {
    /// Whether `f` has every field this pattern names with the same value; lists match as sets
    /// of the same length, and an absent list in the finding is an empty one.
    #[must_use]
    pub fn matches(&self, f: &Finding) -> bool {
        fn same<T: PartialEq>(want: Option<&T>, have: Option<&T>) -> bool {
            want.is_none_or(|w| have == Some(w))
        }
        fn set(want: Option<&Vec<String>>, have: &[String]) -> bool {
            want.is_none_or(|w| w.len() == have.len() && w.iter().all(|x| have.contains(x)))
        }
        same(self.kind.as_ref(), Some(&f.kind))
            && same(self.severity.as_ref(), Some(&f.severity))
            && same(self.protocol.as_ref(), f.protocol.as_ref())
            && same(self.port.as_ref(), f.port.as_ref())
            && set(self.from.as_ref(), &f.from)
            && set(self.to.as_ref(), &f.to)
            && same(self.direction.as_ref(), f.direction.as_ref())
            && self.where_.as_ref().is_none_or(|w| {
                let have: Vec<String> = f.where_.iter().map(ToString::to_string).collect();
                *w == have.join(",")
            })
            && same(self.state.as_ref(), f.state.as_ref())
            && set(self.cycle.as_ref(), &f.cycle)
            && set(self.components.as_ref(), &f.components)
            && set(self.nodes.as_ref(), &f.nodes)
            && same(self.inferred.as_ref(), Some(&f.inferred))
    }

    /// Whether the pattern names no field (it would match every finding).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
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

impl Scenario {
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
}
