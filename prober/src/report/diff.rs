//! Pure: two diagnoses -> what is new, what was resolved, what persists. Findings are matched by
//! kind and subject (what is blocked, between which nodes, which state), never by result ids,
//! summary wording or evidence, which change from run to run for the same fault.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

use crate::diagnose::{Finding, Severity};
use crate::runtime::kube::events::Notice;

use super::{EXIT_FAILURES, EXIT_OK};

/// What changed between an old and a new diagnosis.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Diff {
    /// In the new diagnosis only.
    pub new: Vec<Finding>,
    /// In the old diagnosis only.
    pub resolved: Vec<Finding>,
    /// In both (as the new diagnosis words them).
    pub persisting: Vec<Finding>,
}

/// The fields that say what a finding is about. Lists are sets: the same gap found from
/// `[n1, n2]` one run and `[n2, n1]` the next is the same gap. `where` is left out: it says
/// where a packet died, which is how the fault was seen rather than which fault it is.
const SUBJECT: [&str; 10] = [
    "kind",
    "severity",
    "protocol",
    "port",
    "from",
    "to",
    "direction",
    "state",
    "nodes",
    "components",
];

/// A finding's kind and subject as one comparable value. Read from the finding's JSON so that it
/// holds for reports saved by any version that writes the same schema.
fn subject(f: &Finding) -> String {
    let Ok(Value::Object(json)) = serde_json::to_value(f) else {
        return String::new();
    };
    let mut key = serde_json::Map::new();
    for field in SUBJECT {
        let v = match json.get(field) {
            None | Some(Value::Null) => continue,
            Some(Value::Array(a)) if a.is_empty() => continue,
            Some(Value::Array(a)) => {
                let set: BTreeSet<String> = a.iter().map(Value::to_string).collect();
                Value::Array(set.into_iter().map(Value::String).collect())
            }
            Some(v) => v.clone(),
        };
        key.insert(field.to_string(), v);
    }
    Value::Object(key).to_string()
}

/// A finding's kind and subject in a few bytes: its kind, then the first 64 bits of the SHA-256
/// of its subject. What the scheduled mode's memory keeps of a finding whose body it had to
/// drop, so that the next run does not announce it as new again.
#[must_use]
pub fn key(f: &Finding) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, subject(f).as_bytes());
    let mut out = crate::report::kebab(f.kind);
    out.push(':');
    for b in &digest.as_ref()[..8] {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Compares two diagnoses. Findings with the same subject pair up one to one, in order, so two
/// unexplained findings yesterday and one today leave one resolved.
#[must_use]
pub fn diff(old: &[Finding], new: &[Finding]) -> Diff {
    let mut unmatched: BTreeMap<String, Vec<&Finding>> = BTreeMap::new();
    for f in old {
        unmatched.entry(subject(f)).or_default().push(f);
    }
    // Reverse so that `pop` takes the first of each subject.
    for list in unmatched.values_mut() {
        list.reverse();
    }
    let mut out = Diff::default();
    for f in new {
        match unmatched.get_mut(&subject(f)).and_then(Vec::pop) {
            Some(_) => out.persisting.push(f.clone()),
            None => out.new.push(f.clone()),
        }
    }
    // Resolved in the old diagnosis's order.
    let mut left: BTreeMap<String, usize> = unmatched
        .into_iter()
        .map(|(k, list)| (k, list.len()))
        .collect();
    let mut resolved_rev = Vec::new();
    for f in old.iter().rev() {
        if let Some(n) = left.get_mut(&subject(f))
            && *n > 0
        {
            *n -= 1;
            resolved_rev.push(f.clone());
        }
    }
    resolved_rev.reverse();
    out.resolved = resolved_rev;
    out
}

impl Diff {
    /// 1 when something new is an error, else 0: a run that only resolved or kept problems does
    /// not page anyone.
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        if self.new.iter().any(|f| f.severity == Severity::Error) {
            EXIT_FAILURES
        } else {
            EXIT_OK
        }
    }

    #[must_use]
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// The three lists, most urgent first, one finding per line.
    #[must_use]
    pub fn table(&self) -> String {
        let mut out = String::new();
        for (name, list) in [
            ("new", &self.new),
            ("resolved", &self.resolved),
            ("persisting", &self.persisting),
        ] {
            let _ = writeln!(out, "{name} ({}):", list.len());
            for f in list {
                // A saved report is outside text: shown escaped, never obeyed by the terminal.
                let line = format!("  [{}] {}: {}", severity(f.severity), kind(f), f.summary);
                let _ = writeln!(out, "{}", super::safe::text(&line));
            }
        }
        out
    }

    /// One Kubernetes Event per change: a warning for each new finding, a normal event for each
    /// resolved one. Persisting findings were announced when they appeared.
    #[must_use]
    pub fn notices(&self) -> Vec<Notice> {
        let mut out: Vec<Notice> = self
            .new
            .iter()
            .map(|f| Notice {
                reason: reason(f),
                message: format!("{}: {}", severity(f.severity), f.summary),
                warning: true,
            })
            .collect();
        out.extend(self.resolved.iter().map(|f| Notice {
            reason: format!("{}Resolved", reason(f)),
            message: format!("resolved: {}", f.summary),
            warning: false,
        }));
        out
    }
}

fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

/// `firewall-gap`.
fn kind(f: &Finding) -> String {
    super::kebab(f.kind)
}

/// `firewall-gap` -> `FirewallGap`.
fn camel(s: &str) -> String {
    s.split(['-', '_', ' '])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|first| first.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// The Event reason of a finding: its kind in `CamelCase`, and for credentials their state too,
/// since an expired token and a stale one call for different urgency (`CredentialExpired`).
#[must_use]
pub fn reason(f: &Finding) -> String {
    let mut r = camel(&kind(f));
    if f.kind == crate::diagnose::Kind::Credential
        && let Some(state) = &f.state
    {
        r.push_str(&camel(state.as_str()));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::Kind;
    use crate::model::Direction;

    fn gap(port: u16, from: &[&str], to: &[&str]) -> Finding {
        let mut f = Finding::new(Kind::FirewallGap, Severity::Error, format!("udp/{port}"));
        f.protocol = Some(crate::model::Protocol::Udp);
        f.port = Some(port);
        f.from = from.iter().map(ToString::to_string).collect();
        f.to = to.iter().map(ToString::to_string).collect();
        f.direction = Some(Direction::Both);
        f
    }

    fn cycle(state: &str, severity: Severity) -> Finding {
        let mut f = Finding::new(Kind::BootstrapCycle, severity, format!("{state} cycle"));
        f.state = Some(state.into());
        f.components = vec!["kube-flannel-ds".into()];
        f
    }

    fn credential(state: &str, node: &str) -> Finding {
        let mut f = Finding::new(Kind::Credential, Severity::Error, "token");
        f.state = Some(state.into());
        f.nodes = vec![node.into()];
        f
    }

    fn kinds(list: &[Finding]) -> Vec<(Kind, Option<u16>, Option<crate::diagnose::State>)> {
        list.iter()
            .map(|f| (f.kind, f.port, f.state.clone()))
            .collect()
    }

    #[test]
    fn matches_by_kind_and_subject() {
        // (case, old, new, want new, want resolved, want persisting)
        type Row = (
            &'static str,
            Vec<Finding>,
            Vec<Finding>,
            usize,
            usize,
            usize,
        );
        let mut reworded = gap(8472, &["n3"], &["n1", "n2"]);
        reworded.summary = "a different summary".into();
        reworded.evidence = vec!["overlay:n1/host->n3/host:udp/8472".into()];
        reworded.consequences = vec!["x".into()];
        reworded.where_ = vec![crate::diagnose::Where::Host("n3".into())];
        let cases: Vec<Row> = vec![
            ("nothing", vec![], vec![], 0, 0, 0),
            (
                "healthy to broken",
                vec![],
                vec![gap(8472, &["n3"], &["n1", "n2"])],
                1,
                0,
                0,
            ),
            (
                "broken to healthy",
                vec![gap(8472, &["n3"], &["n1", "n2"])],
                vec![],
                0,
                1,
                0,
            ),
            (
                "same gap, nodes in another order",
                vec![gap(8472, &["n3"], &["n1", "n2"])],
                vec![gap(8472, &["n3"], &["n2", "n1"])],
                0,
                0,
                1,
            ),
            (
                "same gap, other wording, evidence and place",
                vec![gap(8472, &["n3"], &["n1", "n2"])],
                vec![reworded],
                0,
                0,
                1,
            ),
            (
                "another port is another gap",
                vec![gap(8472, &["n3"], &["n1", "n2"])],
                vec![gap(6443, &["n3"], &["n1", "n2"])],
                1,
                1,
                0,
            ),
            (
                "the gap spread to another node",
                vec![gap(8472, &["n3"], &["n1", "n2"])],
                vec![gap(8472, &["n3", "n4"], &["n1", "n2"])],
                1,
                1,
                0,
            ),
            (
                "a latent cycle turned active",
                vec![cycle("latent", Severity::Warning)],
                vec![cycle("active", Severity::Error)],
                1,
                1,
                0,
            ),
            (
                "an expired token on another node",
                vec![credential("expired", "n2")],
                vec![credential("expired", "n2"), credential("expired", "n3")],
                1,
                0,
                1,
            ),
            (
                "duplicates pair one to one",
                vec![
                    Finding::new(Kind::Unexplained, Severity::Error, "a"),
                    Finding::new(Kind::Unexplained, Severity::Error, "b"),
                ],
                vec![Finding::new(Kind::Unexplained, Severity::Error, "c")],
                0,
                1,
                1,
            ),
        ];
        for (case, old, new, n, r, p) in cases {
            let d = diff(&old, &new);
            assert_eq!(
                (d.new.len(), d.resolved.len(), d.persisting.len()),
                (n, r, p),
                "{case}: {d:?}"
            );
        }
    }

    #[test]
    fn persisting_findings_are_worded_as_today_and_resolved_as_before() {
        let old = gap(8472, &["n3"], &["n1"]);
        let mut today = old.clone();
        today.summary = "today's words".into();
        let d = diff(std::slice::from_ref(&old), &[today]);
        assert_eq!(d.persisting[0].summary, "today's words");
        let d = diff(&[old], &[]);
        assert_eq!(d.resolved[0].summary, "udp/8472");
    }

    #[test]
    fn a_saved_reports_text_is_shown_escaped() {
        let mut evil = gap(8472, &["n3"], &["n1"]);
        evil.summary = "gap\n\x1b[32mFAKE resolved (0):\u{202e}".into();
        let text = diff(&[], &[evil]).table();
        assert!(
            !text.contains('\x1b') && !text.contains('\u{202e}'),
            "raw control characters:\n{text}"
        );
        assert!(
            !text
                .lines()
                .any(|l| l.contains("FAKE") && !l.contains("[error]")),
            "a line was injected:\n{text}"
        );
    }

    #[test]
    fn exit_code_follows_new_errors_only() {
        let broken = vec![gap(8472, &["n3"], &["n1"])];
        assert_eq!(diff(&[], &broken).exit_code(), EXIT_FAILURES);
        assert_eq!(diff(&broken, &[]).exit_code(), EXIT_OK);
        assert_eq!(diff(&broken, &broken).exit_code(), EXIT_OK);
        let latent = vec![cycle("latent", Severity::Warning)];
        assert_eq!(diff(&[], &latent).exit_code(), EXIT_OK);
    }

    #[test]
    fn json_has_the_three_lists() {
        let d = diff(&[], &[gap(8472, &["n3"], &["n1"])]);
        let v: Value = serde_json::from_str(&d.to_json()).unwrap();
        assert_eq!(v["new"][0]["kind"], "firewall-gap");
        assert_eq!(v["new"][0]["port"], 8472);
        assert!(v["resolved"].as_array().unwrap().is_empty());
        assert!(v["persisting"].as_array().unwrap().is_empty());
        let t = d.table();
        assert!(
            t.contains("new (1):\n  [error] firewall-gap: udp/8472"),
            "{t}"
        );
        assert!(t.contains("resolved (0):"), "{t}");
    }

    #[test]
    fn notices_name_the_reason() {
        let old = vec![cycle("latent", Severity::Warning)];
        let new = vec![
            gap(8472, &["n3"], &["n1"]),
            credential("expired", "n2"),
            cycle("active", Severity::Error),
        ];
        let d = diff(&old, &new);
        assert_eq!(
            kinds(&d.new),
            [
                (Kind::FirewallGap, Some(8472), None),
                (
                    Kind::Credential,
                    None,
                    Some(crate::diagnose::State::Expired)
                ),
                (Kind::BootstrapCycle, None, Some("active".into())),
            ]
        );
        let reasons: Vec<(String, bool)> = d
            .notices()
            .into_iter()
            .map(|n| (n.reason, n.warning))
            .collect();
        assert_eq!(
            reasons,
            [
                ("FirewallGap".to_string(), true),
                ("CredentialExpired".to_string(), true),
                ("BootstrapCycle".to_string(), true),
                ("BootstrapCycleResolved".to_string(), false),
            ]
        );
    }
}
