//! Findings (docs/design.md, "Findings"): what the diagnosis concludes, with the results that
//! prove it and the failed results it explains. The shared part (severity, summary, evidence,
//! consequences, fix, notes) wraps the kind's [`Detail`], one variant per kind with exactly its
//! fields; the report writes it flat, `kind` first, as it always has.

mod detail;
mod place;
mod state;

use serde::{Deserialize, Serialize, Serializer};

use crate::model::Family;

pub use detail::{
    AgentMissing, BootstrapCycle, Credential, Dns, Facts, FirewallGap, Hop, Loss, Misconfiguration,
    Mtu, NotListening, Overlay, Partition, Policy, PortConflict, ProberPort, ServiceProxy, Starved,
    Unexplained,
};
pub use place::{BadWhere, Where, places_text};
pub use state::{
    CredentialState, CycleState, DnsState, LossState, MisconfigurationState, PartitionState,
    PolicyState, State, is_known as is_known_state,
};

/// Declares the kinds: [`Kind`] (the name alone) and [`Detail`] (the name with its fields),
/// variant for variant, so that neither can gain a kind the other lacks.
macro_rules! kinds {
    ($($(#[$doc:meta])* $variant:ident,)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "kebab-case")]
        pub enum Kind {
            $($(#[$doc])* $variant,)*
        }

        /// A finding's kind with what that kind says: `kind` and its fields in the report.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "kind", rename_all = "kebab-case")]
        pub enum Detail {
            $($(#[$doc])* $variant($variant),)*
        }

        impl Detail {
            #[must_use]
            pub fn kind(&self) -> Kind {
                match self {
                    $(Self::$variant(_) => Kind::$variant,)*
                }
            }

            /// The kind's fields, read without knowing the kind.
            #[must_use]
            pub fn facts(&self) -> &dyn Facts {
                match self {
                    $(Self::$variant(d) => d,)*
                }
            }
        }

        /// The kind's fields without its tag, for the report to write after the shared part.
        struct Fields<'a>(&'a Detail);

        impl Serialize for Fields<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self.0 {
                    $(Detail::$variant(d) => d.serialize(s),)*
                }
            }
        }

        $(
            impl From<$variant> for Detail {
                fn from(d: $variant) -> Self {
                    Self::$variant(d)
                }
            }
        )*
    };
}

kinds! {
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
    /// A network policy denies probes to or from the pod agents: untested, not broken.
    Policy,
    /// An agent kept from running while its probes waited: their paths are unknown.
    Starved,
    Unexplained,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Finding {
    /// The kind and its fields.
    #[serde(flatten)]
    pub detail: Detail,
    pub severity: Severity,
    pub summary: String,
    /// Ids of the results that prove it.
    pub evidence: Vec<String>,
    /// Ids of the failed results it explains.
    pub consequences: Vec<String>,
    /// What to do, one step per line.
    #[serde(default)]
    pub fix: Vec<String>,
    /// What the operator should know that is not a step to take ("the hosts' own firewalls are
    /// not the cause"), one per line: kept apart from `fix` so that every fix line can be run.
    #[serde(default)]
    pub notes: Vec<String>,
    /// The one IP family every failed result it cites went over (`ipv6`: blocked over IPv6
    /// only); absent when its failures span both families (the cause is not family-specific)
    /// or it cites no failed probe of a network path.
    #[serde(default)]
    pub family: Option<Family>,
}

/// The report's order: `kind`, the shared part, then the kind's fields.
impl Serialize for Finding {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Wire<'a> {
            kind: Kind,
            severity: Severity,
            summary: &'a str,
            evidence: &'a [String],
            consequences: &'a [String],
            #[serde(skip_serializing_if = "<[String]>::is_empty")]
            fix: &'a [String],
            #[serde(skip_serializing_if = "<[String]>::is_empty")]
            notes: &'a [String],
            #[serde(skip_serializing_if = "Option::is_none")]
            family: Option<Family>,
            #[serde(flatten)]
            fields: Fields<'a>,
        }
        Wire {
            kind: self.kind(),
            severity: self.severity,
            summary: &self.summary,
            evidence: &self.evidence,
            consequences: &self.consequences,
            fix: &self.fix,
            notes: &self.notes,
            family: self.family,
            fields: Fields(&self.detail),
        }
        .serialize(s)
    }
}

impl Finding {
    #[must_use]
    pub fn new(detail: impl Into<Detail>, severity: Severity, summary: impl Into<String>) -> Self {
        Self {
            detail: detail.into(),
            severity,
            summary: summary.into(),
            evidence: Vec::new(),
            consequences: Vec::new(),
            fix: Vec::new(),
            notes: Vec::new(),
            family: None,
        }
    }

    #[must_use]
    pub fn kind(&self) -> Kind {
        self.detail.kind()
    }

    /// The kind's fields, read without knowing the kind.
    #[must_use]
    pub fn facts(&self) -> &dyn Facts {
        self.detail.facts()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Direction, Protocol};
    use serde_json::json;

    fn gap() -> Finding {
        let mut f = Finding::new(
            FirewallGap {
                protocol: Protocol::Udp,
                port: Some(8472),
                from: vec!["n3".into()],
                to: vec!["n1".into(), "n2".into()],
                direction: Direction::Both,
                where_: vec![Where::Network],
                inferred: false,
                hop: None,
            },
            Severity::Error,
            "x",
        );
        f.evidence = vec!["e1".into()];
        f.fix = vec!["open it".into()];
        f.notes = vec!["mind this".into()];
        f
    }

    #[test]
    fn the_report_writes_kind_then_the_shared_part_then_the_kinds_fields() {
        assert_eq!(
            serde_json::to_string(&gap()).unwrap(),
            r#"{"kind":"firewall-gap","severity":"error","summary":"x","evidence":["e1"],"consequences":[],"fix":["open it"],"notes":["mind this"],"protocol":"udp","port":8472,"from":["n3"],"to":["n1","n2"],"direction":"both","where":"network"}"#
        );
        let mut cycle = Finding::new(
            BootstrapCycle {
                state: CycleState::Active,
                cycle: vec!["a".into(), "b".into()],
                components: vec!["calico-node".into()],
                nodes: vec!["n1".into()],
            },
            Severity::Error,
            "y",
        );
        cycle.consequences = vec!["c1".into()];
        assert_eq!(
            serde_json::to_string(&cycle).unwrap(),
            r#"{"kind":"bootstrap-cycle","severity":"error","summary":"y","evidence":[],"consequences":["c1"],"state":"active","cycle":["a","b"],"components":["calico-node"],"nodes":["n1"]}"#
        );
        let dns = Finding::new(
            Dns {
                state: DnsState::NoAnswer,
                nodes: Vec::new(),
            },
            Severity::Warning,
            "z",
        );
        assert_eq!(
            serde_json::to_string(&dns).unwrap(),
            r#"{"kind":"dns","severity":"warning","summary":"z","evidence":[],"consequences":[],"state":"no-answer"}"#
        );
    }

    #[test]
    fn a_finding_reads_back_as_written() {
        for f in [
            gap(),
            Finding::new(Overlay::default(), Severity::Error, "o"),
            Finding::new(
                Misconfiguration {
                    state: None,
                    nodes: vec!["n2".into()],
                },
                Severity::Error,
                "m",
            ),
            Finding::new(
                Dns {
                    state: DnsState::Other("rcode9".into()),
                    nodes: Vec::new(),
                },
                Severity::Error,
                "d",
            ),
        ] {
            let text = serde_json::to_string(&f).unwrap();
            let back: Finding = serde_json::from_str(&text).unwrap();
            assert_eq!(back, f, "{text}");
        }
        // A field of another kind is not this kind's: a reader ignores it, as it ignores any
        // field a newer prober wrote.
        let back: Finding = serde_json::from_value(json!({"kind": "overlay", "severity": "error",
            "summary": "x", "evidence": [], "consequences": [], "port": 8472}))
        .unwrap();
        assert_eq!(back.detail, Detail::Overlay(Overlay::default()));
        // A kind without the field that makes it is refused, as an unknown kind is.
        for bad in [
            json!({"kind": "firewall-gap", "severity": "error", "summary": "x", "evidence": [],
                "consequences": [], "port": 1}),
            json!({"kind": "warp-drive", "severity": "error", "summary": "x", "evidence": [],
                "consequences": []}),
        ] {
            assert!(
                serde_json::from_value::<Finding>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_finding_of_one_family_says_which_after_its_shared_part() {
        let mut f = gap();
        f.family = Some(Family::Ipv6);
        let text = serde_json::to_string(&f).unwrap();
        assert!(
            text.contains(r#""notes":["mind this"],"family":"ipv6","protocol":"udp""#),
            "{text}"
        );
        let back: Finding = serde_json::from_str(&text).unwrap();
        assert_eq!(back, f);
        // Both families (or none): no claim, and no field.
        assert!(!serde_json::to_string(&gap()).unwrap().contains("family"));
    }

    #[test]
    fn kind_and_detail_name_every_kind_alike() {
        let each: Vec<Detail> = vec![
            gap().detail,
            BootstrapCycle {
                state: CycleState::Latent,
                cycle: Vec::new(),
                components: Vec::new(),
                nodes: Vec::new(),
            }
            .into(),
            ServiceProxy::default().into(),
            Overlay::default().into(),
            Mtu::default().into(),
            Dns {
                state: DnsState::Loop,
                nodes: Vec::new(),
            }
            .into(),
            Credential {
                state: CredentialState::Stale,
                nodes: Vec::new(),
            }
            .into(),
            Misconfiguration {
                state: None,
                nodes: Vec::new(),
            }
            .into(),
            AgentMissing::default().into(),
            PortConflict {
                protocol: Protocol::Tcp,
                port: 10250,
                from: Vec::new(),
                to: Vec::new(),
                nodes: Vec::new(),
            }
            .into(),
            Loss {
                state: LossState::Intermittent,
                nodes: Vec::new(),
            }
            .into(),
            NotListening {
                protocol: Protocol::Tcp,
                port: 1,
                from: Vec::new(),
                to: Vec::new(),
                nodes: Vec::new(),
            }
            .into(),
            Partition {
                state: PartitionState::Unreachable,
                nodes: Vec::new(),
            }
            .into(),
            ProberPort {
                protocol: Protocol::Tcp,
                port: 9917,
                from: Vec::new(),
                to: Vec::new(),
                nodes: Vec::new(),
            }
            .into(),
            Policy {
                state: PolicyState::Denied,
                policy: Some("NetworkPolicy prober-system/default-deny".into()),
                denies: vec!["tcp/9917".into()],
                nodes: Vec::new(),
                inferred: false,
            }
            .into(),
            Starved::default().into(),
            Unexplained::default().into(),
        ];
        let mut kinds = std::collections::BTreeSet::new();
        for d in each {
            let json = serde_json::to_value(&d).unwrap();
            assert_eq!(
                json["kind"],
                serde_json::to_value(d.kind()).unwrap(),
                "{json}"
            );
            kinds.insert(d.kind());
        }
        assert_eq!(kinds.len(), 17, "every kind once");
    }

    #[test]
    fn facts_read_what_the_kind_has_and_nothing_else() {
        let f = gap();
        let facts = f.facts();
        assert_eq!(
            (facts.protocol(), facts.port(), facts.direction()),
            (Some(Protocol::Udp), Some(8472), Some(Direction::Both))
        );
        assert_eq!(
            (facts.from(), facts.places()),
            (&["n3".to_string()][..], &[Where::Network][..])
        );
        assert!(facts.state().is_none() && facts.nodes().is_empty());
        let c = Finding::new(
            Credential {
                state: CredentialState::Expired,
                nodes: vec!["n1".into()],
            },
            Severity::Error,
            "c",
        );
        assert_eq!(c.facts().state().map(State::as_str), Some("expired"));
        assert_eq!(c.facts().nodes(), ["n1"]);
        assert!(c.facts().port().is_none() && c.facts().to().is_empty());
    }
}
