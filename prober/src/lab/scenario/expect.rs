//! What a scenario must show: reachability rows and finding patterns (and the ones it must not).

use serde::{Deserialize, Serialize};

use super::Scenario;
pub use crate::diagnose::FindingPattern;

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
    /// The address that must have sent the ICMP error: an IP address, or `router` (the router's
    /// address in the source's zone, in the expectation's family).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icmp_from: Option<String>,
    /// For `tls`: send the bearer token of the source node's CNI kubeconfig.
    #[serde(default)]
    pub with_cni_token: bool,
    /// The family of the target's address (`ipv6`: a dual-stack or IPv6-only lab's IPv6 one; a
    /// `vtep`'s over the IPv6 underlay of an IPv6-only lab or an `overlay.ipv6Tunnel` alone).
    /// `ipv4` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<crate::inventory::Family>,
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
