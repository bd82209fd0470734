//! The checklist a preflight report's table leads with: the ports already taken on the
//! candidate, then one row per required port and direction naming the nodes by how they did,
//! each failure's reason said once under its row, all fitted to the terminal's width.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::Report;
use super::safe;
use super::table::wrap;
use crate::diagnose::Kind;
use crate::model::{PathClass, Record};

/// What a probe checks, from its id's last part (`tcp/10250`, `vxlan/8472`, `geneve/6081`,
/// `ipip`, `tls/6443`, `mtu/1500`).
fn what(r: &Record<'_>) -> String {
    let id = r.result.id.text();
    let id: &str = &id;
    let last = id.rsplit(':').next().unwrap_or(id);
    match last.split_once('/') {
        Some((mode @ ("vxlan" | "geneve" | "wireguard"), p)) => format!("udp/{p} ({mode})"),
        Some(("tls", p)) => format!("tcp/{p} (API, TLS)"),
        Some(("mtu", size)) => format!("mtu {size} (DF)"),
        None if last == "ipip" => "ip proto 4 (ipip)".into(),
        _ => last.to_string(),
    }
}

/// The nodes of one checklist row, by how they did: the ok ones, and per failed outcome the
/// nodes and the first of their details (the others are as a rule the same sentence with
/// another address: said once, not once per node).
#[derive(Default)]
struct Row {
    ok: Vec<String>,
    failed: BTreeMap<String, (Vec<String>, String)>,
}

impl Row {
    fn add(&mut self, peer: &str, r: &Record<'_>) {
        let peer = safe::name(peer).into_owned();
        if r.result.outcome.is_ok() {
            self.ok.push(peer);
        } else {
            let outcome = r.result.outcome.as_str().to_uppercase();
            let e = self
                .failed
                .entry(outcome)
                .or_insert_with(|| (Vec::new(), safe::text(r.result.detail).into_owned()));
            e.0.push(peer);
        }
    }

    /// `TIMEOUT n1; ok n2, n3`.
    fn cells(&self) -> String {
        let mut parts: Vec<String> = self
            .failed
            .iter()
            .map(|(outcome, (peers, _))| format!("{outcome} {}", peers.join(", ")))
            .collect();
        if !self.ok.is_empty() {
            parts.push(format!("ok {}", self.ok.join(", ")));
        }
        parts.join("; ")
    }
}

/// Sorts node names as a person counts them: n2 before n10.
fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort_by(|a, b| super::table::natural(a, b));
    v.dedup();
    v
}

/// The rows of the candidate `c`'s checklist by (direction, what), in a stable order:
/// outbound first; the nodes of each in natural order.
fn rows(report: &Report, c: &str) -> BTreeMap<(u8, String), Row> {
    let mut lines: BTreeMap<(u8, String), Row> = BTreeMap::new();
    for r in report
        .results
        .iter()
        .filter(|r| r.path != PathClass::NodeConfig)
    {
        let to = r.to.node.as_deref().unwrap_or("?");
        let (dir, peer) = if r.from.node == c {
            (0, to)
        } else if to == c {
            (1, r.from.node.as_str())
        } else {
            continue;
        };
        lines.entry((dir, what(&r))).or_default().add(peer, &r);
    }
    for row in lines.values_mut() {
        row.ok = sorted(std::mem::take(&mut row.ok));
        for (peers, _) in row.failed.values_mut() {
            *peers = sorted(std::mem::take(peers));
        }
    }
    lines
}

/// The checklist of a preflight report fitted to `width` columns, empty for any other report:
/// one row per port and direction naming the nodes, each failure's reason once under it.
#[must_use]
pub fn render(report: &Report, width: usize) -> String {
    let Some(pf) = &report.preflight else {
        return String::new();
    };
    let c = pf.candidate.as_str();
    let lines = rows(report, c);
    // Names and messages come from the cluster and the agents: shown through the sanitiser.
    let shown = safe::name(c);
    let mut out = String::new();
    let say = |out: &mut String, text: &str, indent: usize| {
        let _ = writeln!(out, "{}", wrap(text, width, indent));
    };
    say(
        &mut out,
        &format!(
            "preflight checklist for {shown} ({}):",
            safe::name(&pf.role)
        ),
        2,
    );
    for f in report
        .findings
        .iter()
        .filter(|f| f.kind == Kind::PortConflict)
    {
        say(
            &mut out,
            &format!("  [FAIL] on {shown}: {}", safe::text(&f.summary)),
            9,
        );
    }
    // The cells start after the mark, the arrow and the port: continuation lines align there.
    let arrow_w = shown.chars().count() + 10;
    let what_w = lines
        .keys()
        .map(|(_, w)| w.chars().count())
        .max()
        .unwrap_or(0)
        .max(8);
    let cells_at = 2 + 6 + 1 + arrow_w + 1 + what_w + 1;
    // On a narrow terminal the reasons keep a readable indent rather than the cells' column.
    let cells_at = if cells_at > width / 2 { 9 } else { cells_at };
    for ((dir, what), row) in &lines {
        let arrow = if *dir == 0 {
            format!("{shown} -> nodes")
        } else {
            format!("nodes -> {shown}")
        };
        let mark = if row.failed.is_empty() {
            "[ok]  "
        } else {
            "[FAIL]"
        };
        let what = safe::name(what);
        say(
            &mut out,
            &format!("  {mark} {arrow:<arrow_w$} {what:<what_w$} {}", row.cells()),
            cells_at,
        );
        for (peers, detail) in row.failed.values() {
            let who = match peers.as_slice() {
                [one] => one.clone(),
                [first, ..] => format!("{first} (and the same from {} more)", peers.len() - 1),
                [] => continue,
            };
            say(
                &mut out,
                &format!("{}{who}: {detail}", " ".repeat(cells_at)),
                cells_at + 2,
            );
        }
    }
    // An encapsulation probed from the candidate only: say why the other way is not.
    for (_, what) in lines.keys().filter(|(dir, w)| {
        *dir == 0
            && (w.ends_with("(geneve)") || w.ends_with("(ipip)"))
            && !lines.contains_key(&(1, w.clone()))
    }) {
        let arrow = format!("nodes -> {shown}");
        say(
            &mut out,
            &format!(
                "  [--]   {arrow:<arrow_w$} {what:<what_w$} not probed: nothing on {shown} can decapsulate it before the join"
            ),
            cells_at,
        );
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AgentKind, AgentRef, Protocol, ResultRecord, Results, Target};
    use probe_proto::{Outcome, ProbeResult};

    /// One probe between `from` and `to`, its id ending as `what` does (`tcp/10250`).
    fn rec(from: &str, to: &str, what: &str, outcome: Outcome, detail: &str) -> ResultRecord {
        ResultRecord {
            path: PathClass::NodeToNode,
            from: AgentRef {
                node: from.into(),
                agent: AgentKind::Host,
            },
            to: Target {
                node: Some(to.into()),
                agent: None,
                service: None,
                address: "192.168.56.10".parse().unwrap(),
                port: Some(10250),
                protocol: Protocol::Tcp,
            },
            unknown: None,
            result: ProbeResult::new(
                format!("node-to-node:{from}/host->{to}/host:{what}"),
                outcome,
                detail,
            ),
        }
    }

    /// The report of a preflight of `candidate` (none: of a matrix) holding `results`.
    fn report(candidate: Option<&str>, results: Vec<ResultRecord>) -> Report {
        let run = crate::run::RunOutput {
            results: Results::from(results),
            agents: Vec::new(),
            interrupted: false,
            elapsed: std::time::Duration::ZERO,
        };
        let mut report = Report::new(run, &crate::testutil::inventory(2, 1, "flannel"));
        report.preflight = candidate.map(|c| super::super::Preflight {
            candidate: c.into(),
            role: "worker".into(),
        });
        report
    }

    #[test]
    fn one_line_per_port_and_direction_naming_each_node() {
        let results = vec![
            rec("new", "n1", "tcp/10250", Outcome::Ok, "ok"),
            rec("n1", "new", "vxlan/8472", Outcome::Timeout, "why"),
            rec("n2", "new", "vxlan/8472", Outcome::Ok, "ok"),
        ];
        assert_eq!(
            render(&report(None, results.clone()), 100),
            "",
            "not a preflight report"
        );
        let text = render(&report(Some("new"), results), 100);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5, "{text}");
        assert!(
            lines[1].contains("[ok]")
                && lines[1].contains("new -> nodes")
                && lines[1].contains("tcp/10250")
                && lines[1].ends_with("ok n1"),
            "{text}"
        );
        assert!(
            lines[2].contains("[FAIL]") && lines[2].contains("udp/8472 (vxlan)"),
            "{text}"
        );
        assert!(lines[2].ends_with("TIMEOUT n1; ok n2"), "{text}");
        assert_eq!(lines[3].trim(), "n1: why", "{text}");
    }

    /// Issue 25, item 7: `control-plane-etcd-blocked` printed a row per probe, and a row at
    /// width 100 was 403 characters with one sentence repeated per node. Now one row per port
    /// and direction, the reason once, every line within the width.
    #[test]
    fn a_row_names_its_nodes_says_the_reason_once_and_fits_the_width() {
        let detail = "no answer from 192.168.56.10:2379 within 2 s: the SYN was sent and nothing came back (silently dropped)";
        let mut results = Vec::new();
        for n in 1..=12 {
            let peer = format!("n{n}");
            let (o, d) = if n % 3 == 0 {
                (Outcome::Ok, "connected")
            } else {
                (Outcome::Timeout, detail)
            };
            results.push(rec("new", &peer, "tcp/2379", o, d));
            results.push(rec(&peer, "new", "tcp/2379", o, d));
        }
        results.push(rec("new", "n1", "tcp/2380", Outcome::Refused, "refused"));
        let text = render(&report(Some("new"), results), 100);
        assert!(
            text.lines().all(|l| l.chars().count() <= 100),
            "a line is wider than 100:\n{text}"
        );
        // Two directions of 2379 and one of 2380: three rows, each with its reason.
        assert_eq!(text.matches("[FAIL]").count(), 3, "{text}");
        assert_eq!(text.matches("within 2 s").count(), 2, "{text}");
        assert!(
            text.contains("TIMEOUT n1, n2, n4, n5, n7, n8, n10, n11; ok n3, n6, n9, n12"),
            "{text}"
        );
        assert!(
            text.contains("n1 (and the same from 7 more): no answer"),
            "{text}"
        );
        assert!(text.contains("REFUSED n1"), "{text}");
        // At 80 columns too, the words wrapped, none cut.
        let narrow = render(
            &report(
                Some("new"),
                vec![rec("new", "n1", "tcp/2379", Outcome::Timeout, detail)],
            ),
            80,
        );
        assert!(narrow.lines().all(|l| l.chars().count() <= 80), "{narrow}");
        let words = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(words(&narrow).contains(detail), "{narrow}");
    }

    #[test]
    fn an_encapsulation_probed_one_way_only_says_why_not_the_other() {
        let r = report(
            Some("new"),
            vec![rec("new", "n1", "geneve/6081", Outcome::Ok, "ok")],
        );
        let text = render(&r, 100);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(
            lines[1].contains("[ok]") && lines[1].contains("udp/6081 (geneve)"),
            "{text}"
        );
        assert!(
            lines[2].contains("[--]")
                && lines[2].contains("nodes -> new")
                && lines[2].contains("not probed"),
            "{text}"
        );
    }

    /// Issue 26, item 8: the checklist shows outside text (the candidate's and peers' names, an
    /// agent's detail) escaped, never as escape sequences or line breaks a terminal obeys.
    #[test]
    fn outside_text_in_the_checklist_is_shown_escaped() {
        let evil = "new\u{1b}[2J\u{202e}";
        let bad = rec(
            "n1\nFAKE",
            evil,
            "vxlan/8472",
            Outcome::Timeout,
            "boom\u{1b}]0;title\u{7}\r\n[ok] forged",
        );
        let text = render(&report(Some(evil), vec![bad]), 100);
        assert!(
            !text
                .chars()
                .any(|c| c.is_control() && c != '\n' || c == '\u{202e}'),
            "{text:?}"
        );
        assert!(
            !text
                .lines()
                .any(|l| l.trim_start().starts_with("[ok] forged")
                    || l.trim_start().starts_with("FAKE")),
            "no forged lines: {text}"
        );
        assert!(text.contains("\\u{1b}"), "{text}");
    }
}
