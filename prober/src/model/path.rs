//! What a probe tests: the path class, the protocol, and which way a block applies.

use serde::{Deserialize, Serialize};

/// The path classes (docs/design.md, "Vocabulary"; also the JSON values).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum PathClass {
    PodToPod,
    NodeToPod,
    PodToNode,
    NodeToNode,
    PodToService,
    NodeToService,
    PodToApiserver,
    NodeToApiserver,
    Overlay,
    Dns,
    /// The node's own configuration, read by its host agent (not a network path).
    NodeConfig,
}

impl PathClass {
    pub const ALL: [PathClass; 11] = [
        Self::PodToPod,
        Self::NodeToPod,
        Self::PodToNode,
        Self::NodeToNode,
        Self::PodToService,
        Self::NodeToService,
        Self::PodToApiserver,
        Self::NodeToApiserver,
        Self::Overlay,
        Self::Dns,
        Self::NodeConfig,
    ];

    /// The class named `s` (its JSON value).
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PodToPod => "pod-to-pod",
            Self::NodeToPod => "node-to-pod",
            Self::PodToNode => "pod-to-node",
            Self::NodeToNode => "node-to-node",
            Self::PodToService => "pod-to-service",
            Self::NodeToService => "node-to-service",
            Self::PodToApiserver => "pod-to-apiserver",
            Self::NodeToApiserver => "node-to-apiserver",
            Self::Overlay => "overlay",
            Self::Dns => "dns",
            Self::NodeConfig => "node-config",
        }
    }
}

impl std::fmt::Display for PathClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The transport a probe or a block is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    Tcp,
    Udp,
    Icmp,
    /// IP-in-IP: IP protocol 4, which has no ports (Calico's default encapsulation).
    Ipip,
}

impl Protocol {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tcp => "tcp",
            Self::Udp => "udp",
            Self::Icmp => "icmp",
            Self::Ipip => "ipip",
        }
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether something holds one way (`from` -> `to`) or both ways.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Only from `from` to `to`.
    #[default]
    One,
    Both,
}
