//! Pure: two diagnoses -> what is new, what was resolved, what persists. A finding is matched by
//! its cause (kind, protocol, port, where the packets die, its state or components), never by
//! its node list, result ids, summary wording or evidence, which change from run to run for the
//! same fault: a gap that now also blocks a fourth node is the same gap, persisting.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
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
            | Kind::Starved
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

#[cfg(test)]
thread_local! {
    /// Pairs of findings weighed against each other by this thread's diffs: what a diff costs,
    /// counted rather than timed.
    pub(super) static WEIGHED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// What matching needs of a finding, computed once per finding rather than once per pair.
struct Seen<'a> {
    cause: String,
    places: BTreeSet<&'static str>,
    anchors: BTreeSet<&'a str>,
    nodes: BTreeSet<&'a str>,
}

impl<'a> Seen<'a> {
    fn of(f: &'a Finding) -> Self {
        Self {
            cause: cause(f),
            places: places(f),
            anchors: anchors(f),
            nodes: nodes(f),
        }
    }

    /// Whether `self` (old) and `new`, of one cause, are the same finding: the packets died in
    /// the same place (a run without receipts says no place, and matches either), and anchored
    /// findings share a node.
    fn same(&self, new: &Self) -> bool {
        #[cfg(test)]
        WEIGHED.with(|w| w.set(w.get() + 1));
        let (p, q) = (&self.places, &new.places);
        let (a, b) = (&self.anchors, &new.anchors);
        self.cause == new.cause
            && (p.is_empty() || q.is_empty() || p == q)
            && (a.is_empty() || b.is_empty() || !a.is_disjoint(b))
    }
}

/// A finding's cause, places and nodes: the same finding when all three are equal.
type Identity<'s, 'a> = (&'s str, &'s BTreeSet<&'static str>, &'s BTreeSet<&'a str>);

/// Compares two diagnoses. A finding identical in cause, place and nodes pairs with its twin
/// first (in order, when there are several); the others of one cause pair up one to one, those
/// sharing the most nodes first, then in order, so two unexplained findings yesterday and one
/// today leave one resolved. Candidates come from indexes (by identity, by node, by cause), so
/// thousands of findings of one cause are not each weighed against each.
#[must_use]
pub fn diff(old: &[Finding], new: &[Finding]) -> Diff {
    let olds: Vec<Seen<'_>> = old.iter().map(Seen::of).collect();
    let news: Vec<Seen<'_>> = new.iter().map(Seen::of).collect();
    let mut old_of: Vec<Option<usize>> = vec![None; new.len()];
    let mut taken = vec![false; old.len()];
    // 1. Twins, by identity.
    let mut twins: HashMap<Identity<'_, '_>, VecDeque<usize>> = HashMap::new();
    for (i, o) in olds.iter().enumerate() {
        twins
            .entry((o.cause.as_str(), &o.places, &o.nodes))
            .or_default()
            .push_back(i);
    }
    for (j, n) in news.iter().enumerate() {
        if let Some(i) = twins
            .get_mut(&(n.cause.as_str(), &n.places, &n.nodes))
            .and_then(VecDeque::pop_front)
        {
            taken[i] = true;
            old_of[j] = Some(i);
        }
    }
    // 2. Findings sharing nodes, through an index of the old ones' causes and nodes: most shared
    // first, then in order.
    let mut by_node: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
    for (i, o) in olds.iter().enumerate().filter(|(i, _)| !taken[*i]) {
        for n in &o.nodes {
            by_node.entry((&o.cause, n)).or_default().push(i);
        }
    }
    let mut pairs: Vec<(usize, usize, usize)> = Vec::new();
    for (j, n) in news
        .iter()
        .enumerate()
        .filter(|(j, _)| old_of[*j].is_none())
    {
        let mut shared: BTreeMap<usize, usize> = BTreeMap::new();
        for node in &n.nodes {
            for &i in by_node.get(&(&n.cause, node)).into_iter().flatten() {
                *shared.entry(i).or_default() += 1;
            }
        }
        for (i, count) in shared {
            if olds[i].same(n) {
                pairs.push((count, i, j));
            }
        }
    }
    pairs.sort_by(|a, b| b.0.cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
    for (_, i, j) in pairs {
        if !taken[i] && old_of[j].is_none() {
            taken[i] = true;
            old_of[j] = Some(i);
        }
    }
    // 3. Of one cause but sharing no node: in order, each old one with the first new one left
    // that is the same finding.
    let mut left_by_cause: HashMap<&str, Vec<usize>> = HashMap::new();
    for (j, n) in news
        .iter()
        .enumerate()
        .filter(|(j, _)| old_of[*j].is_none())
    {
        left_by_cause.entry(&n.cause).or_default().push(j);
    }
    for (i, o) in olds.iter().enumerate() {
        let Some(left) = left_by_cause
            .get_mut(o.cause.as_str())
            .filter(|_| !taken[i])
        else {
            continue;
        };
        if let Some(at) = left.iter().position(|&j| o.same(&news[j])) {
            let j = left.remove(at);
            taken[i] = true;
            old_of[j] = Some(i);
        }
    }
    let mut out = Diff::default();
    for (j, f) in new.iter().enumerate() {
        match old_of[j] {
            Some(i) => {
                let (was, is) = (&olds[i].nodes, &news[j].nodes);
                let in_order = |set: std::collections::btree_set::Difference<'_, &str>| {
                    let mut v: Vec<String> = set.map(ToString::to_string).collect();
                    v.sort_by_key(|n| natural(n));
                    v
                };
                out.persisting.push(Persisting {
                    finding: f.clone(),
                    now_also: in_order(is.difference(was)),
                    no_longer: in_order(was.difference(is)),
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

    /// The three lists, most urgent first, one finding per entry, wrapped to `width` columns
    /// (continuation lines indented under the summary; a word longer than a line is never cut).
    #[must_use]
    pub fn table(&self, width: usize) -> String {
        let mut out = String::new();
        let line = |out: &mut String, f: &Finding, change: &str| {
            let mut text = format!("  [{}] {}: {}", severity(f.severity), kind(f), f.summary);
            if !change.is_empty() {
                let _ = write!(text, " ({change})");
            }
            // A saved report is outside text: shown escaped, never obeyed by the terminal.
            let _ = writeln!(out, "{}", super::wrap(&super::safe::text(&text), width, 4));
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
mod tests;
