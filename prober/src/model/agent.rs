//! The agents: which one of a node's two, and whether it ran.

use serde::{Deserialize, Serialize};

/// Which of a node's two agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentKind {
    Host,
    Pod,
}

impl AgentKind {
    /// The kind named `s` (`host` or `pod`).
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Host, Self::Pod]
            .into_iter()
            .find(|k| k.as_str() == s)
    }

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Host => "host",
            Self::Pod => "pod",
        }
    }
}

/// One agent: a node and which of its agents.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AgentRef {
    pub node: String,
    pub agent: AgentKind,
}

impl std::fmt::Display for AgentRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.node, self.agent.as_str())
    }
}

/// Whether an agent ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentStatus {
    pub node: String,
    pub agent: AgentKind,
    pub ran: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}
