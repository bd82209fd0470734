//! A finding expectation (a lab scenario's `findings`/`notFindings`, a diagnosis test's
//! shorthand): the fields it names must all hold, the others are free.

use serde::{Deserialize, Serialize};

use crate::model::{Direction, Family, Protocol};

use super::finding::{Finding, Hop, Kind, Severity, State, is_known_state, places_text};

/// A finding expectation: the fields it names must all hold (lists as sets), the others are free.
/// Unknown keys are an error, so a misspelled key cannot silently match nothing (or everything).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FindingPattern {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<Kind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Protocol>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<Direction>,
    /// `network` or `host:NODE`.
    #[serde(default, rename = "where", skip_serializing_if = "Option::is_none")]
    pub where_: Option<String>,
    /// A state some kind has: an unknown or misspelled one is an error, not a pattern that can
    /// never match.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "known_state"
    )]
    pub state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycle: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub components: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<String>>,
    /// Whether the cause was inferred from the pattern rather than probed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inferred: Option<bool>,
    /// The hop where the packets died: `{after: ADDRESS, hops: N}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hop: Option<Hop>,
    /// The one IP family the finding's cause holds over (`ipv6`: over IPv6 only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<Family>,
    /// Words the finding's summary contains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// A pattern's `state`, refused unless it is one of the states the diagnosis writes.
fn known_state<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    use serde::de::Error as _;
    let s = String::deserialize(d)?;
    if is_known_state(&s) {
        Ok(Some(s))
    } else {
        Err(D::Error::custom(format!(
            "state {s:?} is not a state any finding has (see docs/report.schema.json)"
        )))
    }
}

impl FindingPattern {
    /// Whether `f` has every field this pattern names with the same value; lists match as sets
    /// of the same length, and an absent list in the finding is an empty one.
    #[must_use]
    pub fn matches(&self, f: &Finding) -> bool {
        fn same<T: PartialEq>(want: Option<&T>, have: Option<&T>) -> bool {
            want.is_none_or(|w| have == Some(w))
        }
        fn set(want: Option<&Vec<String>>, have: &[String]) -> bool {
            want.is_none_or(|w| w.len() == have.len() && w.iter().all(|x| have.contains(x)))
        }
        let facts = f.facts();
        same(self.kind.as_ref(), Some(&f.kind()))
            && same(self.severity.as_ref(), Some(&f.severity))
            && same(self.protocol.as_ref(), facts.protocol().as_ref())
            && same(self.port.as_ref(), facts.port().as_ref())
            && set(self.from.as_ref(), facts.from())
            && set(self.to.as_ref(), facts.to())
            && same(self.direction.as_ref(), facts.direction().as_ref())
            && self
                .where_
                .as_ref()
                .is_none_or(|w| *w == places_text(facts.places()))
            && self
                .state
                .as_deref()
                .is_none_or(|w| facts.state().map(State::as_str) == Some(w))
            && set(self.cycle.as_ref(), facts.cycle())
            && set(self.components.as_ref(), facts.components())
            && set(self.nodes.as_ref(), facts.nodes())
            && same(self.inferred.as_ref(), Some(&facts.inferred()))
            && same(self.hop.as_ref(), facts.hop())
            && same(self.family.as_ref(), f.family.as_ref())
            && self
                .summary
                .as_deref()
                .is_none_or(|w| f.summary.contains(w))
    }

    /// Whether the pattern names no field (it would match every finding).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::finding::{Credential, CredentialState, FirewallGap, Where};

    fn pattern(yaml: &str) -> FindingPattern {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn finding_patterns_match_named_fields_and_lists_as_sets() {
        let f = Finding::new(
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
        let mut f = f;
        f.family = Some(Family::Ipv6);
        for yes in [
            "{kind: firewall-gap}",
            "{kind: firewall-gap, protocol: udp, port: 8472, to: [n2, n1], direction: both}",
            "{severity: error, where: network, from: [n3]}",
            "{nodes: []}",
            "{inferred: false}",
            "{kind: firewall-gap, family: ipv6}",
            "{summary: \"x\"}",
        ] {
            assert!(pattern(yes).matches(&f), "{yes} should match {f:?}");
        }
        for no in [
            "{kind: firewall-gap, port: 6443}",
            "{kind: firewall-gap, to: [n1]}",
            "{kind: firewall-gap, to: [n1, n2, n3]}",
            "{kind: bootstrap-cycle}",
            "{kind: firewall-gap, state: active}",
            "{protocol: tcp}",
            "{severity: warning}",
            "{direction: one}",
            "{where: \"host:n2\"}",
            "{nodes: [n1]}",
            "{inferred: true}",
            "{hop: {after: 192.168.64.2, hops: 2}}",
            "{family: ipv4}",
            "{summary: \"y\"}",
        ] {
            assert!(!pattern(no).matches(&f), "{no} should not match {f:?}");
        }
    }

    #[test]
    fn a_state_matches_the_kinds_own_state() {
        let f = Finding::new(
            Credential {
                state: CredentialState::NonExpiring,
                nodes: vec!["n2".into()],
            },
            Severity::Warning,
            "x",
        );
        assert!(pattern("{kind: credential, state: non-expiring, nodes: [n2]}").matches(&f));
        assert!(!pattern("{state: expired}").matches(&f));
        assert!(!pattern("{port: 6443}").matches(&f));
        let err = serde_saphyr::from_str::<FindingPattern>("{state: expird}").unwrap_err();
        assert!(err.to_string().contains("expird"), "{err}");
        let err =
            serde_saphyr::from_str::<FindingPattern>("{hop: {after: 10.0.0.1, hops: 2, via: r}}")
                .unwrap_err();
        assert!(err.to_string().contains("via"), "{err}");
    }
}
