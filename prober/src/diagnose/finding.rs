//! Findings (docs/design.md, section 3): what the diagnosis concludes, with the results that prove it
//! and the failed results it explains.

use serde::{Deserialize, Serialize};

use crate::model::{Direction, Protocol};

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
    /// A port the joining node must serve is already taken there (`prober preflight`).
    PortConflict,
    /// Paths that got through on some attempts but not others: packet loss, not a block.
    Loss,
    /// Refused on a path that otherwise works: nothing listens on that port of that node.
    NotListening,
    /// A node that nothing reaches and that reaches nothing, on every port probed.
    Partition,
    /// The agents' own port is not open on a node: a limit of this run, not a cluster fault.
    ProberPort,
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
    /// What the operator should know that is not a step to take ("the hosts' own firewalls are
    /// not the cause"), one per line: kept apart from `fix` so that every fix line can be run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Protocol>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<Direction>,
    /// Where the packets died; empty when unknown. One JSON string, comma-separated when the
    /// evidence names several places (`host:n1,network`).
    #[serde(
        default,
        rename = "where",
        skip_serializing_if = "Vec::is_empty",
        with = "places"
    )]
    pub where_: Vec<Where>,
    /// Which variety of its kind: `active`/`latent` for cycles, `expired`/`stale`/... for
    /// credentials, `loop`/`servfail`/... for DNS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<State>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cycle: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// The cause was read from the pattern of the failures, not probed directly (a tunnel no
    /// crafted packet could be sent through).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inferred: bool,
    /// The hop where a path placed on the network died, from TTL-limited probes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hop: Option<Hop>,
}

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

/// Which variety of its kind a finding is, written in kebab-case as the report always has.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// `bootstrap-cycle`: the cycle is broken now.
    Active,
    /// `bootstrap-cycle`: it works now but cannot recover if it breaks.
    Latent,
    /// `credential`: the token's expiry has passed.
    Expired,
    /// `credential`: a bound token older than an hour, never refreshed.
    Stale,
    /// `credential`: the API server answers 401 to it.
    Rejected,
    /// `credential`: a legacy token without an expiry.
    NonExpiring,
    /// `credential`: `insecure-skip-tls-verify`.
    Insecure,
    /// `credential`: the server is not the one the kubeconfig's CA vouches for.
    UntrustedServer,
    /// `credential`: nothing usable to verify the server against.
    UnverifiableServer,
    /// `credential` (a CNI kubeconfig) or `misconfiguration` (another node file): the host agent
    /// could not read or parse it.
    Unreadable,
    /// `dns`: a forward loop.
    Loop,
    /// `dns`: the cluster DNS does not answer.
    NoAnswer,
    /// `dns`: the server answered FORMERR.
    Formerr,
    /// `dns`: the server answered SERVFAIL.
    Servfail,
    /// `dns`: the server answered NXDOMAIN.
    Nxdomain,
    /// `dns`: the server answered NOTIMP.
    Notimp,
    /// `dns`: the server answered REFUSED.
    Refused,
    /// `partition`: a node nothing reaches.
    Unreachable,
    /// `misconfiguration` (preflight): the joining node's clock is off.
    ClockSkew,
    /// `loss`: paths that got through on some attempts only.
    Intermittent,
    /// Any other state, as written: a DNS response code without a name here (`rcode9`), or a
    /// state a newer prober wrote into a report this one reads.
    #[serde(untagged)]
    Other(String),
}

impl State {
    /// The state as the report writes it.
    #[must_use]
    pub fn as_str(&self) -> &str {
        match self {
            Self::Active => "active",
            Self::Latent => "latent",
            Self::Expired => "expired",
            Self::Stale => "stale",
            Self::Rejected => "rejected",
            Self::NonExpiring => "non-expiring",
            Self::Insecure => "insecure",
            Self::UntrustedServer => "untrusted-server",
            Self::UnverifiableServer => "unverifiable-server",
            Self::Unreadable => "unreadable",
            Self::Loop => "loop",
            Self::NoAnswer => "no-answer",
            Self::Formerr => "formerr",
            Self::Servfail => "servfail",
            Self::Nxdomain => "nxdomain",
            Self::Notimp => "notimp",
            Self::Refused => "refused",
            Self::Unreachable => "unreachable",
            Self::ClockSkew => "clock-skew",
            Self::Intermittent => "intermittent",
            Self::Other(s) => s,
        }
    }
}

/// A state from its report name: a known one as its variant, anything else as `Other`.
impl From<&str> for State {
    fn from(s: &str) -> Self {
        use serde::de::IntoDeserializer as _;
        let d: serde::de::value::StrDeserializer<'_, serde::de::value::Error> =
            s.into_deserializer();
        Self::deserialize(d).unwrap_or_else(|_| Self::Other(s.to_string()))
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

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
mod places {
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
            notes: Vec::new(),
            protocol: None,
            port: None,
            from: Vec::new(),
            to: Vec::new(),
            direction: None,
            where_: Vec::new(),
            state: None,
            cycle: Vec::new(),
            components: Vec::new(),
            nodes: Vec::new(),
            inferred: false,
            hop: None,
        }
    }

    /// Whether this finding has every field `want` names with the same value (arrays as sets): the
    /// diagnosis tests' shorthand (scenarios match through the lab's typed `FindingPattern`).
    #[cfg(test)]
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
        f.protocol = Some(Protocol::Udp);
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
        assert_eq!(json["protocol"], "udp");
    }

    #[test]
    fn a_state_is_written_as_the_report_always_wrote_it() {
        let named = [
            ("active", State::Active),
            ("latent", State::Latent),
            ("expired", State::Expired),
            ("stale", State::Stale),
            ("rejected", State::Rejected),
            ("non-expiring", State::NonExpiring),
            ("insecure", State::Insecure),
            ("untrusted-server", State::UntrustedServer),
            ("unverifiable-server", State::UnverifiableServer),
            ("unreadable", State::Unreadable),
            ("loop", State::Loop),
            ("no-answer", State::NoAnswer),
            ("formerr", State::Formerr),
            ("servfail", State::Servfail),
            ("nxdomain", State::Nxdomain),
            ("notimp", State::Notimp),
            ("refused", State::Refused),
            ("unreachable", State::Unreachable),
            ("clock-skew", State::ClockSkew),
            ("intermittent", State::Intermittent),
            ("rcode9", State::Other("rcode9".into())),
        ];
        for (text, state) in named {
            assert_eq!(serde_json::to_value(&state).unwrap(), json!(text));
            assert_eq!(state.as_str(), text);
            assert_eq!(State::from(text), state, "{text}");
            let back: State = serde_json::from_value(json!(text)).unwrap();
            assert_eq!(back, state, "{text}");
        }
        let mut f = Finding::new(Kind::Dns, Severity::Error, "x");
        f.state = Some(State::NoAnswer);
        assert_eq!(
            serde_json::to_value(&f).unwrap()["state"],
            json!("no-answer")
        );
    }

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
            let mut f = Finding::new(Kind::FirewallGap, Severity::Error, "x");
            f.where_.clone_from(places);
            let json = serde_json::to_value(&f).unwrap();
            assert_eq!(json["where"], json!(text));
            let back: Finding = serde_json::from_value(json).unwrap();
            assert_eq!(&back.where_, places, "{text:?}");
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
            "evidence": [], "consequences": [], "where": "network,host:"});
        let err = serde_json::from_value::<Finding>(bad).unwrap_err();
        assert!(err.to_string().contains("host:"), "{err}");
    }
}
