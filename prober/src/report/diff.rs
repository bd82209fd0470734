//! Pure: two diagnoses -> what is new, what was resolved, what persists. A finding is matched by
//! its cause (kind, protocol, port, where the packets die, its state or components), never by
//! its node list, result ids, summary wording or evidence, which change from run to run for the
//! same fault: a gap that now also blocks a fourth node is the same gap, persisting.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde::Serialize;

use crate::diagnose::{Finding, Kind, Severity, Where};
use crate::runtime::kube::events::Notice;

use super::{EXIT_FAILURES, EXIT_OK};

/// What changed between an old and a new diagnosis.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Diff {
    /// In the new diagnosis only.
    pub new: Vec<Finding>,
    /// In the old diagnosis only.
    pub resolved: Vec<Finding>,
    /// In both (as the new diagnosis words them), with the nodes it gained or lost.
    pub persisting: Vec<Persisting>,
}

/// A finding in both diagnoses: today's words, and how its nodes changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Persisting {
    #[serde(flatten)]
    pub finding: Finding,
    /// Nodes it names now and did not before.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub now_also: Vec<String>,
    /// Nodes it named before and does not now.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub no_longer: Vec<String>,
}

impl From<Finding> for Persisting {
    fn from(finding: Finding) -> Self {
        Self {
            finding,
            now_also: Vec::new(),
            no_longer: Vec::new(),
        }
    }
}

/// Kinds whose cause sits on the nodes they name (a token file, a kubelet's config, a node
/// that is down): the same kind on other nodes is another problem.
fn on_its_nodes(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Credential
            | Kind::Misconfiguration
            | Kind::AgentMissing
            | Kind::Partition
            | Kind::NotListening
            | Kind::PortConflict
            | Kind::ProberPort
    )
}

/// A finding's cause as one comparable value: what is wrong, not which nodes it touches.
fn cause(f: &Finding) -> String {
    let facts = f.facts();
    let components: BTreeSet<&str> = facts.components().iter().map(String::as_str).collect();
    // `Debug` text, as the keys the scheduled mode remembers were always made of.
    format!(
        "{:?}|{:?}|{:?}|{:?}|{:?}|{components:?}",
        f.kind(),
        f.severity,
        facts.protocol(),
        facts.port(),
        facts.state()
    )
}

/// Where the packets died, by place (the network, or hosts' own firewalls), not by host; empty
/// when no receipt said.
fn places(f: &Finding) -> BTreeSet<&'static str> {
    f.facts()
        .places()
        .iter()
        .map(|w| match w {
            Where::Network => "network",
            Where::Host(_) => "host",
        })
        .collect()
}

/// Every node a finding names.
fn nodes(f: &Finding) -> BTreeSet<&str> {
    let facts = f.facts();
    facts
        .from()
        .iter()
        .chain(facts.to())
        .chain(facts.nodes())
        .map(String::as_str)
        .collect()
}

/// The nodes that locate a finding's cause, when they do: the nodes of a kind that sits on its
/// nodes, the hosts whose own firewalls dropped the packets. Two findings of one cause are the
/// same only if these overlap.
fn anchors(f: &Finding) -> BTreeSet<&str> {
    if on_its_nodes(f.kind()) {
        return nodes(f);
    }
    f.facts()
        .places()
        .iter()
        .filter_map(|w| match w {
            Where::Host(h) => Some(h.as_str()),
            Where::Network => None,
        })
        .collect()
}

/// A finding's cause in a few bytes: its kind, then the first 64 bits of the SHA-256 of its
/// cause (with its anchoring nodes, when it has any). What the scheduled mode's memory keeps of a
/// finding whose body it had to drop, so that the next run does not announce it as new again.
#[must_use]
pub fn key(f: &Finding) -> String {
    let mut text = cause(f);
    for p in places(f) {
        text.push('|');
        text.push_str(p);
    }
    for n in anchors(f) {
        text.push('|');
        text.push_str(n);
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    let mut out = crate::report::kebab(f.kind());
    out.push(':');
    for b in &digest.as_ref()[..8] {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Whether `old` and `new`, of one cause, are the same finding: the packets died in the same
/// place (a run without receipts says no place, and matches either), and anchored findings
/// share a node.
fn same(old: &Finding, new: &Finding) -> bool {
    let (p, q) = (places(old), places(new));
    let (a, b) = (anchors(old), anchors(new));
    (p.is_empty() || q.is_empty() || p == q) && (a.is_empty() || b.is_empty() || !a.is_disjoint(&b))
}

/// Compares two diagnoses. Findings of one cause pair up one to one, those sharing the most
/// nodes first, then in order, so two unexplained findings yesterday and one today leave one
/// resolved.
#[must_use]
pub fn diff(old: &[Finding], new: &[Finding]) -> Diff {
    let old_causes: Vec<String> = old.iter().map(cause).collect();
    let new_causes: Vec<String> = new.iter().map(cause).collect();
    // Every candidate pair, most shared nodes first, then in order.
    let mut pairs: Vec<(usize, usize, usize)> = Vec::new();
    for (j, n) in new.iter().enumerate() {
        let names = nodes(n);
        for (i, o) in old.iter().enumerate() {
            if old_causes[i] == new_causes[j] && same(o, n) {
                let shared = nodes(o).intersection(&names).count();
                pairs.push((shared, i, j));
            }
        }
    }
    pairs.sort_by(|a, b| b.0.cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
    let mut old_of: Vec<Option<usize>> = vec![None; new.len()];
    let mut taken = vec![false; old.len()];
    for (_, i, j) in pairs {
        if !taken[i] && old_of[j].is_none() {
            taken[i] = true;
            old_of[j] = Some(i);
        }
    }
    let mut out = Diff::default();
    for (j, f) in new.iter().enumerate() {
        match old_of[j] {
            Some(i) => {
                let (was, is) = (nodes(&old[i]), nodes(f));
                let in_order = |set: std::collections::btree_set::Difference<'_, &str>| {
                    let mut v: Vec<String> = set.map(ToString::to_string).collect();
                    v.sort_by_key(|n| natural(n));
                    v
                };
                out.persisting.push(Persisting {
                    finding: f.clone(),
                    now_also: in_order(is.difference(&was)),
                    no_longer: in_order(was.difference(&is)),
                });
            }
            None => out.new.push(f.clone()),
        }
    }
    // Resolved in the old diagnosis's order.
    out.resolved = old
        .iter()
        .zip(taken)
        .filter(|(_, t)| !t)
        .map(|(f, _)| f.clone())
        .collect();
    out
}

/// Node names in a line: the first few, then how many more.
fn some_nodes(names: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut out = names
        .iter()
        .take(SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        let _ = write!(out, " and {} more", names.len() - SHOWN);
    }
    out
}

/// A sort key that puts `n2` before `n10`.
fn natural(s: &str) -> (String, u64, String) {
    let digits = s.len() - s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (stem, num) = s.split_at(s.len() - digits);
    (stem.to_string(), num.parse().unwrap_or(0), s.to_string())
}

impl Persisting {
    /// How its nodes changed, in words: `now also n4; no longer n2`, or nothing.
    #[must_use]
    pub fn change(&self) -> String {
        let mut parts = Vec::new();
        if !self.now_also.is_empty() {
            parts.push(format!("now also {}", some_nodes(&self.now_also)));
        }
        if !self.no_longer.is_empty() {
            parts.push(format!("no longer {}", some_nodes(&self.no_longer)));
        }
        parts.join("; ")
    }
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
        let line = |out: &mut String, f: &Finding, change: &str| {
            let mut text = format!("  [{}] {}: {}", severity(f.severity), kind(f), f.summary);
            if !change.is_empty() {
                let _ = write!(text, " ({change})");
            }
            // A saved report is outside text: shown escaped, never obeyed by the terminal.
            let _ = writeln!(out, "{}", super::safe::text(&text));
        };
        for (name, list) in [("new", &self.new), ("resolved", &self.resolved)] {
            let _ = writeln!(out, "{name} ({}):", list.len());
            for f in list {
                line(&mut out, f, "");
            }
        }
        let _ = writeln!(out, "persisting ({}):", self.persisting.len());
        for p in &self.persisting {
            line(&mut out, &p.finding, &p.change());
        }
        out
    }

    /// One Kubernetes Event per change: a warning for each new finding, a normal event for each
    /// resolved one, a warning for a persisting one that reached more nodes. Persisting findings
    /// were otherwise announced when they appeared.
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
        // A problem that reached more nodes is news, though not a new problem.
        out.extend(
            self.persisting
                .iter()
                .filter(|p| !p.now_also.is_empty())
                .map(|p| Notice {
                    reason: format!("{}Spread", reason(&p.finding)),
                    message: format!(
                        "{}: {} ({})",
                        severity(p.finding.severity),
                        p.finding.summary,
                        p.change()
                    ),
                    warning: true,
                }),
        );
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
    super::kebab(f.kind())
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
    if f.kind() == crate::diagnose::Kind::Credential
        && let Some(state) = f.facts().state()
    {
        r.push_str(&camel(state.as_str()));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::Kind;
    use crate::diagnose::finding::{BootstrapCycle, Credential, FirewallGap, Unexplained};
    use crate::model::Direction;
    use serde_json::Value;

    /// A udp gap on `port` between `from` and `to`, both ways, dying where `places` says.
    fn gap_at(port: u16, from: &[&str], to: &[&str], places: Vec<Where>) -> Finding {
        let gap = FirewallGap {
            protocol: crate::model::Protocol::Udp,
            port: Some(port),
            from: from.iter().map(ToString::to_string).collect(),
            to: to.iter().map(ToString::to_string).collect(),
            direction: Direction::Both,
            where_: places,
            inferred: false,
            hop: None,
        };
        Finding::new(gap, Severity::Error, format!("udp/{port}"))
    }

    fn gap(port: u16, from: &[&str], to: &[&str]) -> Finding {
        gap_at(port, from, to, Vec::new())
    }

    fn in_network(port: u16, from: &[&str], to: &[&str]) -> Finding {
        gap_at(port, from, to, vec![Where::Network])
    }

    fn at_host(port: u16, from: &[&str], to: &[&str], host: &str) -> Finding {
        gap_at(port, from, to, vec![Where::Host(host.into())])
    }

    fn cycle(state: &str, severity: Severity) -> Finding {
        let cycle = BootstrapCycle {
            state: state.into(),
            cycle: Vec::new(),
            components: vec!["kube-flannel-ds".into()],
            nodes: Vec::new(),
        };
        Finding::new(cycle, severity, format!("{state} cycle"))
    }

    fn credential(state: &str, node: &str) -> Finding {
        let credential = Credential {
            state: state.into(),
            nodes: vec![node.into()],
        };
        Finding::new(credential, Severity::Error, "token")
    }

    /// (case, old, new, want new, want resolved, want persisting)
    type Row = (
        &'static str,
        Vec<Finding>,
        Vec<Finding>,
        usize,
        usize,
        usize,
    );

    fn check(cases: Vec<Row>) {
        for (case, old, new, n, r, p) in cases {
            let d = diff(&old, &new);
            assert_eq!(
                (d.new.len(), d.resolved.len(), d.persisting.len()),
                (n, r, p),
                "{case}: {d:?}"
            );
        }
    }

    fn kinds(list: &[Finding]) -> Vec<(Kind, Option<u16>, Option<String>)> {
        list.iter()
            .map(|f| {
                let facts = f.facts();
                (
                    f.kind(),
                    facts.port(),
                    facts.state().map(|s| s.as_str().to_string()),
                )
            })
            .collect()
    }

    #[test]
    fn matches_by_kind_and_subject() {
        let mut reworded = in_network(8472, &["n3"], &["n1", "n2"]);
        reworded.summary = "a different summary".into();
        reworded.evidence = vec!["overlay:n1/host->n3/host:udp/8472".into()];
        reworded.consequences = vec!["x".into()];
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
                0,
                0,
                1,
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
                    Finding::new(Unexplained::default(), Severity::Error, "a"),
                    Finding::new(Unexplained::default(), Severity::Error, "b"),
                ],
                vec![Finding::new(Unexplained::default(), Severity::Error, "c")],
                0,
                1,
                1,
            ),
        ];
        check(cases);
    }

    #[test]
    fn matches_by_cause_not_by_node_list() {
        let cases: Vec<Row> = vec![
            (
                "the same network gap on other nodes is the same cause",
                vec![gap(8472, &["n3"], &["n1"])],
                vec![gap(8472, &["n7"], &["n1"])],
                0,
                0,
                1,
            ),
            (
                "a host's own firewall on another host is another cause",
                vec![at_host(8472, &["n1"], &["n3"], "n3")],
                vec![at_host(8472, &["n1"], &["n7"], "n7")],
                1,
                1,
                0,
            ),
            (
                "a network gap is not a host's firewall",
                vec![in_network(8472, &["n1"], &["n3"])],
                vec![at_host(8472, &["n1"], &["n3"], "n3")],
                1,
                1,
                0,
            ),
            (
                "an expired token moved from one node to another",
                vec![credential("expired", "n2")],
                vec![credential("expired", "n3")],
                1,
                1,
                0,
            ),
        ];
        check(cases);
    }

    #[test]
    fn persisting_findings_are_worded_as_today_and_resolved_as_before() {
        let old = gap(8472, &["n3"], &["n1"]);
        let mut today = old.clone();
        today.summary = "today's words".into();
        let d = diff(std::slice::from_ref(&old), &[today]);
        assert_eq!(d.persisting[0].finding.summary, "today's words");
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
    fn a_grown_gap_persists_and_says_which_nodes_it_now_also_blocks() {
        use crate::report::fixture::report;
        let three = report(3, Some("n3")).findings;
        let twenty = report(20, Some("n3")).findings;
        let d = diff(&three, &twenty);
        assert_eq!((d.new.len(), d.resolved.len()), (0, 0), "{d:#?}");
        assert_eq!(d.persisting.len(), 1);
        let p = &d.persisting[0];
        assert_eq!(p.now_also.len(), 17);
        assert!(p.no_longer.is_empty());
        assert_eq!(p.change(), "now also n4, n5, n6, n7, n8 and 12 more");
        assert!(
            d.table()
                .contains("(now also n4, n5, n6, n7, n8 and 12 more)"),
            "{}",
            d.table()
        );
        assert_eq!(d.exit_code(), EXIT_OK);
        let v: Value = serde_json::from_str(&d.to_json()).unwrap();
        assert_eq!(v["persisting"][0]["kind"], "firewall-gap");
        assert_eq!(v["persisting"][0]["nowAlso"][0], "n4");
        // No Resolved event for a problem still there; a warning that it spread.
        let reasons: Vec<String> = d.notices().into_iter().map(|n| n.reason).collect();
        assert_eq!(reasons, ["FirewallGapSpread"]);
        // And shrinking back is the same gap too.
        let d = diff(&twenty, &three);
        assert_eq!(
            (d.new.len(), d.resolved.len(), d.persisting.len()),
            (0, 0, 1)
        );
        assert!(d.persisting[0].change().starts_with("no longer n4"));
        assert!(d.notices().is_empty());
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
                (Kind::Credential, None, Some("expired".into())),
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
