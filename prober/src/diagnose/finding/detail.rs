//! What each kind of finding says beyond the shared part: one struct per kind with exactly its
//! fields, and the flat read-only view ([`Facts`]) that readers not caring for the kind use.

use serde::{Deserialize, Serialize};

use crate::model::{Direction, Protocol};

use super::place::{Where, places};
use super::state::{
    CredentialState, CycleState, DnsState, LossState, MisconfigurationState, PartitionState,
    PolicyState, State,
};

/// Where on the way a blocked path died: the last router that answered a TTL-limited probe, and
/// how many hops from the sender that is; the packets die just after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Hop {
    /// The last hop that answered (ICMP time exceeded).
    pub after: std::net::IpAddr,
    /// Its distance from the sender, in hops.
    pub hops: u8,
}

/// `firewall-gap`: a port blocked between hosts that otherwise reach each other.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FirewallGap {
    pub protocol: Protocol,
    /// None for IP-in-IP (IP protocol 4 has no port).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<String>,
    pub direction: Direction,
    /// Where the packets died; empty when unknown. One JSON string, comma-separated when the
    /// evidence names several places (`host:n1,network`).
    #[serde(
        default,
        rename = "where",
        skip_serializing_if = "Vec::is_empty",
        with = "places"
    )]
    pub where_: Vec<Where>,
    /// The cause was read from the pattern of the failures, not probed directly (a tunnel no
    /// crafted packet could be sent through).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inferred: bool,
    /// The hop where a path placed on the network died, from TTL-limited probes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hop: Option<Hop>,
}

/// `bootstrap-cycle`: a component that builds the network reaches the API server through a path
/// that needs that network.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BootstrapCycle {
    pub state: CycleState,
    /// The cycle, component and path by path, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cycle: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
}

/// `credential`: a node's kubeconfig token or server trust is wrong.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Credential {
    pub state: CredentialState,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
}

/// `dns`: DNS failures no path explains.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Dns {
    pub state: DnsState,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
}

/// `misconfiguration`: a node file or setting that is wrong (a kubelet pointed at localhost,
/// an unreadable file, a joining node's clock).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Misconfiguration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<MisconfigurationState>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
}

/// `partition`: a node that nothing reaches and that reaches nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Partition {
    pub state: PartitionState,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
}

/// `loss`: paths that got through on some attempts but not others.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Loss {
    pub state: LossState,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
}

/// `policy`: a network policy denies probes to or from the pod agents, so those paths are
/// untested, not broken.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    pub state: PolicyState,
    /// The policy, as `Kind name` or `Kind namespace/name`; absent when no readable policy
    /// explains the failures (`unreadable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// What it denies, as `tcp/9917`, `udp/9917`, `icmp`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denies: Vec<String>,
    /// The nodes whose pod agents it denies at.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// Read from the failures' pattern, not from a policy.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inferred: bool,
}

impl Facts for Policy {
    fn state(&self) -> Option<&dyn State> {
        Some(&self.state)
    }
    fn nodes(&self) -> &[String] {
        &self.nodes
    }
    fn inferred(&self) -> bool {
        self.inferred
    }
}

/// A port and its nodes: `not-listening` (refused on a path that otherwise works),
/// `port-conflict` (preflight: a port the joining node must serve is taken there) and
/// `prober-port` (the agents' own port not open on a node).
macro_rules! port_kind {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase")]
        pub struct $name {
            pub protocol: Protocol,
            pub port: u16,
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            pub from: Vec<String>,
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            pub to: Vec<String>,
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            pub nodes: Vec<String>,
        }

        impl Facts for $name {
            fn protocol(&self) -> Option<Protocol> {
                Some(self.protocol)
            }
            fn port(&self) -> Option<u16> {
                Some(self.port)
            }
            fn from(&self) -> &[String] {
                &self.from
            }
            fn to(&self) -> &[String] {
                &self.to
            }
            fn nodes(&self) -> &[String] {
                &self.nodes
            }
        }
    };
}

port_kind! {
    /// `not-listening`: connections refused on a path that otherwise works.
    NotListening
}
port_kind! {
    /// `port-conflict`: preflight, a port the joining node must serve is already taken there.
    PortConflict
}
port_kind! {
    /// `prober-port`: the agents' own port is not open on a node; a limit of this run.
    ProberPort
}

/// Kinds whose only field is the nodes they concern.
macro_rules! nodes_kind {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase")]
        pub struct $name {
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            pub nodes: Vec<String>,
        }

        impl Facts for $name {
            fn nodes(&self) -> &[String] {
                &self.nodes
            }
        }
    )*};
}

nodes_kind! {
    /// `service-proxy`: the `ClusterIP` fails on a node while its backends answer directly.
    ServiceProxy;
    /// `overlay`: the overlay fails while its underlay port is open.
    Overlay;
    /// `mtu`: small packets pass, large ones vanish.
    Mtu;
    /// `agent-missing`: no agent ran on a node, so its paths are unknown, not failed.
    AgentMissing;
    /// `starved`: an agent kept from running while its probes waited (CPU starvation), so
    /// their paths are unknown, not failed.
    Starved;
    /// `unexplained`: failures no rule explains.
    Unexplained;
}

/// The fields of the flat report every kind may have, read without knowing the kind: what a
/// kind lacks reads as absent or empty.
pub trait Facts {
    fn protocol(&self) -> Option<Protocol> {
        None
    }
    fn port(&self) -> Option<u16> {
        None
    }
    fn from(&self) -> &[String] {
        &[]
    }
    fn to(&self) -> &[String] {
        &[]
    }
    fn direction(&self) -> Option<Direction> {
        None
    }
    fn places(&self) -> &[Where] {
        &[]
    }
    fn state(&self) -> Option<&dyn State> {
        None
    }
    fn cycle(&self) -> &[String] {
        &[]
    }
    fn components(&self) -> &[String] {
        &[]
    }
    fn nodes(&self) -> &[String] {
        &[]
    }
    fn inferred(&self) -> bool {
        false
    }
    fn hop(&self) -> Option<&Hop> {
        None
    }
}

impl Facts for FirewallGap {
    fn protocol(&self) -> Option<Protocol> {
        Some(self.protocol)
    }
    fn port(&self) -> Option<u16> {
        self.port
    }
    fn from(&self) -> &[String] {
        &self.from
    }
    fn to(&self) -> &[String] {
        &self.to
    }
    fn direction(&self) -> Option<Direction> {
        Some(self.direction)
    }
    fn places(&self) -> &[Where] {
        &self.where_
    }
    fn inferred(&self) -> bool {
        self.inferred
    }
    fn hop(&self) -> Option<&Hop> {
        self.hop.as_ref()
    }
}

impl Facts for BootstrapCycle {
    fn state(&self) -> Option<&dyn State> {
        Some(&self.state)
    }
    fn cycle(&self) -> &[String] {
        &self.cycle
    }
    fn components(&self) -> &[String] {
        &self.components
    }
    fn nodes(&self) -> &[String] {
        &self.nodes
    }
}

/// Kinds with a state and nodes.
macro_rules! state_facts {
    ($($name:ident),*) => {$(
        impl Facts for $name {
            fn state(&self) -> Option<&dyn State> {
                Some(&self.state)
            }
            fn nodes(&self) -> &[String] {
                &self.nodes
            }
        }
    )*};
}

state_facts!(Credential, Dns, Partition, Loss);

impl Facts for Misconfiguration {
    fn state(&self) -> Option<&dyn State> {
        self.state.as_ref().map(|s| s as &dyn State)
    }
    fn nodes(&self) -> &[String] {
        &self.nodes
    }
}
