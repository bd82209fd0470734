//! Where a firewall gap's packets died (`where` in the report): `network` or `host:NODE`, a list
//! written as one comma-separated string.

use serde::{Deserialize, Serialize};

/// Where a firewall gap's packets died. Written `network` or `host:NODE`, as the report's
/// `where` has always been.
///
/// `Host` is declared first so that sorting places sorts them as their strings sort
/// (`host:n1,host:n2,network`), the order the report lists them in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Where {
    /// The receiver's NIC saw the packet but its stack did not: the host's own firewall.
    Host(String),
    /// The packet never reached the receiver, or a router answered for it.
    Network,
}

/// A `where` that is neither `network` nor `host:NODE` with a node name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("finding field `where`: {0:?} is neither `network` nor `host:NODE`")]
pub struct BadWhere(pub String);

impl TryFrom<String> for Where {
    type Error = BadWhere;

    fn try_from(s: String) -> Result<Self, BadWhere> {
        if s == "network" {
            return Ok(Self::Network);
        }
        // A comma would not survive the comma-separated list the report writes.
        match s.strip_prefix("host:") {
            Some(node) if !node.is_empty() && !node.contains(',') => Ok(Self::Host(node.into())),
            _ => Err(BadWhere(s)),
        }
    }
}

impl From<Where> for String {
    fn from(w: Where) -> Self {
        w.to_string()
    }
}

impl std::fmt::Display for Where {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Network => f.write_str("network"),
            Self::Host(node) => write!(f, "host:{node}"),
        }
    }
}

/// The places as the report writes them: one string, comma-separated.
#[must_use]
pub fn places_text(places: &[Where]) -> String {
    places
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// `where` on the wire: a list of places as one comma-separated string.
pub(super) mod places {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};

    use super::Where;

    pub fn serialize<S: Serializer>(places: &[Where], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::places_text(places))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Where>, D::Error> {
        String::deserialize(d)?
            .split(',')
            .map(|p| Where::try_from(p.to_string()).map_err(D::Error::custom))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn where_round_trips_as_its_string() {
        let cases: &[(&str, Option<Where>)] = &[
            ("network", Some(Where::Network)),
            ("host:n3", Some(Where::Host("n3".into()))),
            (
                "host:worker-1.example",
                Some(Where::Host("worker-1.example".into())),
            ),
            ("host:", None),
            ("host", None),
            ("Network", None),
            ("", None),
            ("host:n1,network", None),
        ];
        for (text, want) in cases {
            let got: Result<Where, _> = serde_json::from_value(json!(text));
            assert_eq!(got.as_ref().ok(), want.as_ref(), "{text:?}: {got:?}");
            if let Some(w) = want {
                assert_eq!(serde_json::to_value(w).unwrap(), json!(text), "{text:?}");
                assert_eq!(Where::try_from(text.to_string()).as_ref(), Ok(w));
            } else {
                assert_eq!(
                    Where::try_from(text.to_string()),
                    Err(BadWhere(text.to_string()))
                );
            }
        }
    }

    #[test]
    fn where_in_a_finding_is_one_comma_separated_string() {
        use crate::diagnose::finding::{Finding, FirewallGap, Severity};
        use crate::model::{Direction, Protocol};
        let cases: &[(&str, Vec<Where>)] = &[
            ("network", vec![Where::Network]),
            ("host:n2", vec![Where::Host("n2".into())]),
            (
                "host:n1,host:n2,network",
                vec![
                    Where::Host("n1".into()),
                    Where::Host("n2".into()),
                    Where::Network,
                ],
            ),
        ];
        for (text, places) in cases {
            let f = Finding::new(
                FirewallGap {
                    protocol: Protocol::Tcp,
                    port: Some(1),
                    from: Vec::new(),
                    to: Vec::new(),
                    direction: Direction::One,
                    where_: places.clone(),
                    inferred: false,
                    hop: None,
                },
                Severity::Error,
                "x",
            );
            let json = serde_json::to_value(&f).unwrap();
            assert_eq!(json["where"], json!(text));
            let back: Finding = serde_json::from_value(json).unwrap();
            assert_eq!(back.facts().places(), &places[..], "{text:?}");
        }
        // The sorted order is the order of the strings.
        let mut sorted = vec![
            Where::Network,
            Where::Host("n2".into()),
            Where::Host("n1".into()),
        ];
        sorted.sort();
        assert_eq!(places_text(&sorted), "host:n1,host:n2,network");
        // A malformed place anywhere in the list rejects the finding.
        let bad = json!({"kind": "firewall-gap", "severity": "error", "summary": "x",
            "evidence": [], "consequences": [], "protocol": "tcp", "direction": "one",
            "where": "network,host:"});
        let err = serde_json::from_value::<Finding>(bad).unwrap_err();
        assert!(err.to_string().contains("host:"), "{err}");
    }
}
