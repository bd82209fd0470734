//! The faults a scenario injects: firewall rules, a missing kube-proxy, a small MTU, loss, a DNS
//! loop, bad CNI tokens, a kubelet pointed at localhost.

use serde::{Deserialize, Serialize};

use crate::model::{Direction, Protocol};

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
    /// On the second of two routers in a row (`routers: 2`), whichever zones it joins.
    #[serde(rename = "second-router")]
    SecondRouter,
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
        /// The rule's IP family (`ipv4` or `ipv6`): one family blocked while the other passes.
        /// `ipv4` when absent.
        #[serde(default = "ipv4", skip_serializing_if = "is_ipv4")]
        family: crate::inventory::Family,
    },
    /// The node has no kube-proxy rules: its Service IPs lead nowhere. With `family`, only that
    /// family's (kube-proxy's `ip6tables` half never programmed while its `iptables` half is);
    /// both when absent.
    KubeProxyMissing {
        node: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        family: Option<crate::inventory::Family>,
    },
    /// The underlay carries at most `mtu` bytes to and from the node: bigger frames vanish. With
    /// `family: ipv6`, the IPv6 path alone: the routes toward the node's IPv6 pods on the other
    /// nodes, and its own toward theirs, carry at most `mtu` bytes (as an IPv6 tunnel or link on
    /// the way would), so the node forwarding a bigger IPv6 packet answers it with `ICMPv6`
    /// Packet Too Big, as a router does; IPv4 is untouched.
    #[serde(rename_all = "camelCase")]
    Mtu {
        node: String,
        mtu: u16,
        #[serde(default = "ipv4", skip_serializing_if = "is_ipv4")]
        family: crate::inventory::Family,
    },
    /// The nodes' own firewalls drop these ICMP types (`ICMPv6` ones with `family: ipv6`) on
    /// every hook, what the node receives, forwards and sends alike: a host firewall that lets
    /// echo and neighbour discovery through and nothing else of ICMP.
    #[serde(rename_all = "camelCase")]
    IcmpFilter {
        /// Every node when empty.
        #[serde(default)]
        nodes: Vec<String>,
        types: Vec<u8>,
        #[serde(default = "ipv4", skip_serializing_if = "is_ipv4")]
        family: crate::inventory::Family,
    },
    /// A share of the node's underlay IP packets is dropped (both directions, both families;
    /// ARP and IPv6 neighbour discovery pass).
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
    /// The CNI kubeconfig (Calico's) on the node trusts any server: `insecure-skip-tls-verify`
    /// instead of the cluster's CA; its token is fresh.
    CniKubeconfigInsecure {
        node: String,
    },
    /// A Multus kubeconfig (`multus.d/multus.kubeconfig`) on the node holds a token of Multus's
    /// own service account written three hours ago and never refreshed (docs/incidents.md,
    /// incident 4), beside the CNI's own.
    MultusTokenStale {
        node: String,
    },
    KubeletLocalhost {
        node: String,
    },
    /// A network policy: its object goes into the lab's inventory (`cluster.policies`) as
    /// discovery would read it, and the drops the CNI's policy engine would make for it are
    /// installed on the pods' own path (their namespace's input or output), stateful (only new
    /// connections) and never for the pod's own node, as the engines do. A policy that denies
    /// nothing the agents send (an allow policy) has no `drop`.
    Policy {
        object: crate::inventory::PolicyObject,
        #[serde(default)]
        drop: Vec<PolicyDrop>,
    },
}

/// One drop a policy makes at the pod agents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyDrop {
    /// `ingress` (to the pod agents) or `egress` (from them).
    #[serde(default)]
    pub direction: PolicyDirection,
    /// Every protocol when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Protocol>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<Ports>,
    /// The nodes whose pod agents drop; every node's when empty.
    #[serde(default)]
    pub nodes: Vec<String>,
    /// Whose packets: `all`, or `pods` only (the lab's pod addresses; hosts still pass).
    #[serde(default)]
    pub peers: PolicyPeers,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicyDirection {
    #[default]
    Ingress,
    Egress,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicyPeers {
    #[default]
    All,
    Pods,
}

/// A `port` that is neither a port nor a range.
#[derive(Debug, thiserror::Error)]
#[error("{0:?}: expected a port (1-65535) or a range like 2379-2380")]
pub struct BadPorts(String);

fn ipv4() -> crate::inventory::Family {
    crate::inventory::Family::Ipv4
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's `skip_serializing_if` passes a reference
fn is_ipv4(f: &crate::inventory::Family) -> bool {
    *f == crate::inventory::Family::Ipv4
}
