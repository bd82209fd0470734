//! Findings (docs/design.md, section 3): what the diagnosis concludes, with the results that prove it
//! and the failed results it explains.

use serde::{Deserialize, Serialize};

use crate::model::Direction;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    FirewallGap,
    BootstrapCycle,
    ServiceProxy,
    Overlay,
    Mtu,
    Dns,
    Credential,
    Misconfiguration,
    AgentMissing,
    Unexplained,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    pub kind: Kind,
    pub severity: Severity,
    pub summary: String,
    /// Ids of the results that prove it.
    pub evidence: Vec<String>,
    /// Ids of the failed results it explains.
    pub consequences: Vec<String>,
    /// What to do, one step per line.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fix: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<Direction>,
    /// `network`, or `host:NODE` when the receiver's NIC saw the packet but its stack did not.
    #[serde(default, rename = "where", skip_serializing_if = "Option::is_none")]
    pub where_: Option<String>,
    /// `active`/`latent` for cycles; `expired`/`stale`/`rejected` for credentials; `loop` for DNS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cycle: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
}

impl Finding {
    #[must_use]
    pub fn new(kind: Kind, severity: Severity, summary: impl Into<String>) -> Self {
        Self {
            kind,
            severity,
            summary: summary.into(),
            evidence: Vec::new(),
            consequences: Vec::new(),
            fix: Vec::new(),
            protocol: None,
            port: None,
            from: Vec::new(),
            to: Vec::new(),
            direction: None,
            where_: None,
            state: None,
            cycle: Vec::new(),
            components: Vec::new(),
            nodes: Vec::new(),
        }
    }

    /// Whether this finding has every field `want` names with the same value (arrays as sets):
    /// how scenario expectations are matched.
    #[must_use]
    pub fn matches(&self, want: &serde_json::Value) -> bool {
        let Ok(have) = serde_json::to_value(self) else {
            return false;
        };
        let Some(want) = want.as_object() else {
            return false;
        };
        want.iter().all(|(k, w)| {
            let h = have.get(k).cloned().unwrap_or(serde_json::Value::Null);
            match (w, &h) {
                (serde_json::Value::Array(w), serde_json::Value::Array(h)) => {
                    w.len() == h.len() && w.iter().all(|x| h.contains(x))
                }
                (serde_json::Value::Array(w), serde_json::Value::Null) => w.is_empty(),
                _ => *w == h,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn expectation_matching() {
        let mut f = Finding::new(Kind::FirewallGap, Severity::Error, "x");
        f.protocol = Some("udp".into());
        f.port = Some(8472);
        f.from = vec!["n3".into()];
        f.to = vec!["n1".into(), "n2".into()];
        f.direction = Some(Direction::Both);
        assert!(f.matches(&json!({"kind": "firewall-gap"})));
        assert!(f.matches(
            &json!({"kind": "firewall-gap", "port": 8472, "to": ["n2", "n1"], "direction": "both"})
        ));
        assert!(!f.matches(&json!({"kind": "firewall-gap", "port": 6443})));
        assert!(!f.matches(&json!({"kind": "firewall-gap", "to": ["n1"]})));
        assert!(!f.matches(&json!({"kind": "bootstrap-cycle"})));
        assert!(!f.matches(&json!({"kind": "firewall-gap", "state": "active"})));
        let json = serde_json::to_value(&f).unwrap();
        assert_eq!(json["kind"], "firewall-gap");
        assert!(json.get("where").is_none() && json.get("cycle").is_none());
    }
}
