//! The diff's tests: which findings match across two reports, and how the changes read.

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
    let text = diff(&[], &[evil]).table(100);
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
        d.table(400)
            .contains("(now also n4, n5, n6, n7, n8 and 12 more)"),
        "{}",
        d.table(400)
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
    let t = d.table(100);
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

#[test]
fn the_table_wraps_to_its_width() {
    let mut long = gap(8472, &["n3"], &["n1"]);
    long.summary = format!(
        "udp/8472 (VXLAN) is blocked between n3 and {}",
        (4..40)
            .map(|i| format!("n{i}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let d = diff(&[], &[long.clone()]);
    let narrow = d.table(60);
    let entry: Vec<&str> = narrow
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert!(entry.len() > 2, "{narrow}");
    for l in &entry {
        assert!(l.chars().count() <= 60, "wider than 60: {l:?}");
    }
    // Continuation lines sit under the summary; no word is lost or cut.
    assert!(entry[1..].iter().all(|l| l.starts_with("    ")), "{narrow}");
    let words = |t: &str| t.split_whitespace().map(String::from).collect::<Vec<_>>();
    assert_eq!(
        words(&entry.join(" ")),
        words(&format!("[error] firewall-gap: {}", long.summary))
    );
    // Wide enough: one line, as before.
    assert_eq!(
        d.table(400).lines().nth(1).map(|l| l.len() > 200),
        Some(true)
    );
}

#[test]
fn findings_of_one_cause_pair_through_an_index_not_each_with_each() {
    // 3,000 gaps of one cause, each between its own two nodes, in both reports: the issue's
    // 3k x 3k case, which weighed 9 million pairs (6.6 s, 335 MB).
    let names: Vec<String> = (0..6_000).map(|i| format!("n{i}")).collect();
    let findings: Vec<Finding> = (0..3_000)
        .map(|i| in_network(8472, &[&names[2 * i]], &[&names[2 * i + 1]]))
        .collect();
    let mut reordered = findings.clone();
    reordered.reverse();
    WEIGHED.with(|w| w.set(0));
    let d = diff(&findings, &reordered);
    let weighed = WEIGHED.with(std::cell::Cell::get);
    assert_eq!(
        (d.new.len(), d.resolved.len(), d.persisting.len()),
        (0, 0, 3_000)
    );
    assert!(
        d.persisting
            .iter()
            .all(|p| p.now_also.is_empty() && p.no_longer.is_empty())
    );
    assert!(weighed <= 3_000, "{weighed} pairs weighed");
    // Moved to other nodes, they still pair (one cause, in the network), but only with the
    // findings their index offers, and still one to one.
    let moved: Vec<Finding> = (0..3_000)
        .map(|i| {
            in_network(
                8472,
                &[&names[(2 * i + 1) % 6_000]],
                &[&names[(2 * i + 2) % 6_000]],
            )
        })
        .collect();
    WEIGHED.with(|w| w.set(0));
    let d = diff(&findings, &moved);
    let weighed = WEIGHED.with(std::cell::Cell::get);
    assert_eq!(
        (d.new.len(), d.resolved.len(), d.persisting.len()),
        (0, 0, 3_000)
    );
    assert!(weighed <= 4 * 3_000, "{weighed} pairs weighed");
}
