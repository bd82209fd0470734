//! The roles of nodes and components: the ones the code acts on as variants, any other kept by name.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A node's role, from its `node-role.kubernetes.io/<role>` labels. Kubernetes allows any role
/// name, so one the code does not act on is kept as it was written (`Other`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum NodeRole {
    ControlPlane,
    /// The control plane's name before Kubernetes 1.20.
    Master,
    Other(String),
}

impl NodeRole {
    /// Whether the role marks a control-plane node.
    #[must_use]
    pub fn is_control_plane(&self) -> bool {
        matches!(self, Self::ControlPlane | Self::Master)
    }

    #[must_use]
    pub fn as_str(&self) -> &str {
        match self {
            Self::ControlPlane => "control-plane",
            Self::Master => "master",
            Self::Other(s) => s,
        }
    }
}

impl From<String> for NodeRole {
    fn from(s: String) -> Self {
        match s.as_str() {
            "control-plane" => Self::ControlPlane,
            "master" => Self::Master,
            _ => Self::Other(s),
        }
    }
}

impl From<&str> for NodeRole {
    fn from(s: &str) -> Self {
        Self::from(s.to_string())
    }
}

impl From<NodeRole> for String {
    fn from(r: NodeRole) -> String {
        match r {
            NodeRole::Other(s) => s,
            known => known.as_str().to_string(),
        }
    }
}

impl fmt::Display for NodeRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a component does in the cluster, as discovery names it. A role the code does not act
/// on (`other`, `cni-meta`, one an operator wrote) is kept as it was written (`Other`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum ComponentRole {
    /// The CNI's agent (or a meta-plugin such as Multus that runs the CNI).
    Cni,
    Dns,
    Typha,
    Proxy,
    Ingress,
    Gitops,
    Other(String),
}

impl ComponentRole {
    #[must_use]
    pub fn as_str(&self) -> &str {
        match self {
            Self::Cni => "cni",
            Self::Dns => "dns",
            Self::Typha => "typha",
            Self::Proxy => "proxy",
            Self::Ingress => "ingress",
            Self::Gitops => "gitops",
            Self::Other(s) => s,
        }
    }
}

impl From<String> for ComponentRole {
    fn from(s: String) -> Self {
        match s.as_str() {
            "cni" => Self::Cni,
            "dns" => Self::Dns,
            "typha" => Self::Typha,
            "proxy" => Self::Proxy,
            "ingress" => Self::Ingress,
            "gitops" => Self::Gitops,
            _ => Self::Other(s),
        }
    }
}

impl From<&str> for ComponentRole {
    fn from(s: &str) -> Self {
        Self::from(s.to_string())
    }
}

impl From<ComponentRole> for String {
    fn from(r: ComponentRole) -> String {
        match r {
            ComponentRole::Other(s) => s,
            known => known.as_str().to_string(),
        }
    }
}

impl fmt::Display for ComponentRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_keep_their_yaml_form() {
        for text in ["control-plane", "master", "worker", "infra"] {
            let r: NodeRole = serde_json::from_value(serde_json::json!(text)).unwrap();
            assert_eq!(serde_json::to_value(&r).unwrap(), text);
            assert_eq!(
                r.is_control_plane(),
                text == "control-plane" || text == "master"
            );
        }
        for text in [
            "cni", "dns", "typha", "proxy", "ingress", "gitops", "other", "cni-meta",
        ] {
            let r: ComponentRole = serde_json::from_value(serde_json::json!(text)).unwrap();
            assert_eq!(serde_json::to_value(&r).unwrap(), text);
            assert_eq!(r.as_str(), text);
        }
        assert_eq!(ComponentRole::from("cni"), ComponentRole::Cni);
        assert_eq!(
            ComponentRole::from("cni-meta"),
            ComponentRole::Other("cni-meta".into())
        );
    }
}
