//! The checklist a preflight report's table leads with: one line per required port and
//! direction, each node ok or how it failed, then the ports already taken on the candidate.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::Report;
use super::safe;
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

/// How one node did on one line: `n1 ok` or `n2 TIMEOUT (why)`.
fn cell(peer: &str, r: &Record<'_>) -> String {
    if r.result.outcome.is_ok() {
        format!("{} ok", safe::name(peer))
    } else {
        let outcome = r.result.outcome.as_str().to_uppercase();
        format!(
            "{} {outcome} ({})",
            safe::name(peer),
            safe::text(r.result.detail)
        )
    }
}

/// The checklist of a preflight report, empty for any other report.
#[must_use]
pub fn render(report: &Report) -> String {
    let Some(pf) = &report.preflight else {
        return String::new();
    };
    let c = pf.candidate.as_str();
    // (direction, what) -> cells, in a stable order: outbound first.
    let mut lines: BTreeMap<(u8, String), (bool, Vec<String>)> = BTreeMap::new();
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
        let e = lines.entry((dir, what(&r))).or_insert((true, Vec::new()));
        e.0 &= r.result.outcome.is_ok();
        e.1.push(cell(peer, &r));
    }
    // Names and messages come from the cluster and the agents: shown through the sanitiser.
    let shown = safe::name(c);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "preflight checklist for {shown} ({}):",
        safe::name(&pf.role)
    );
    for f in report
        .findings
        .iter()
        .filter(|f| f.kind() == Kind::PortConflict)
    {
        let _ = writeln!(out, "  [FAIL] on {shown}: {}", safe::text(&f.summary));
    }
    for ((dir, what), (ok, cells)) in &lines {
        let arrow = if *dir == 0 {
            format!("{shown} -> nodes")
        } else {
            format!("nodes -> {shown}")
        };
        let mark = if *ok { "[ok]  " } else { "[FAIL]" };
        let what = safe::name(what);
        let _ = writeln!(out, "  {mark} {arrow:<14} {what:<20} {}", cells.join(", "));
    }
    // An encapsulation probed from the candidate only: say why the other way is not.
    for (_, what) in lines.keys().filter(|(dir, w)| {
        *dir == 0
            && (w.ends_with("(geneve)") || w.ends_with("(ipip)"))
            && !lines.contains_key(&(1, w.clone()))
    }) {
        let arrow = format!("nodes -> {shown}");
        let _ = writeln!(
            out,
            "  [--]   {arrow:<14} {what:<20} not probed: nothing on {shown} can decapsulate it before the join"
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

    fn rec(from: &str, to: &str, id: &str, outcome: Outcome) -> ResultRecord {
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
            result: ProbeResult::new(id, outcome, "why"),
        }
    }

    #[test]
    fn one_line_per_port_and_direction_naming_each_node() {
        let run = crate::run::RunOutput {
            results: Results::from(vec![
                rec(
                    "new",
                    "n1",
                    "node-to-node:new/host->n1/host:tcp/10250",
                    Outcome::Ok,
                ),
                rec(
                    "n1",
                    "new",
                    "overlay:n1/host->new/host:vxlan/8472",
                    Outcome::Timeout,
                ),
                rec(
                    "n2",
                    "new",
                    "overlay:n2/host->new/host:vxlan/8472",
                    Outcome::Ok,
                ),
            ]),
            agents: Vec::new(),
            interrupted: false,
            elapsed: std::time::Duration::ZERO,
        };
        let inv = crate::testutil::inventory(2, 1, "flannel");
        let mut report = Report::new(run, &inv);
        assert_eq!(render(&report), "", "not a preflight report");
        report.preflight = Some(super::super::Preflight {
            candidate: "new".into(),
            role: "worker".into(),
        });
        let text = render(&report);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(
            lines[1].contains("[ok]")
                && lines[1].contains("new -> nodes")
                && lines[1].contains("tcp/10250"),
            "{text}"
        );
        assert!(
            lines[2].contains("[FAIL]") && lines[2].contains("udp/8472 (vxlan)"),
            "{text}"
        );
        assert!(
            lines[2].contains("n1 TIMEOUT (why)") && lines[2].contains("n2 ok"),
            "{text}"
        );
    }

    #[test]
    fn an_encapsulation_probed_one_way_only_says_why_not_the_other() {
        let run = crate::run::RunOutput {
            results: Results::from(vec![rec(
                "new",
                "n1",
                "overlay:new/host->n1/host:geneve/6081",
                Outcome::Ok,
            )]),
            agents: Vec::new(),
            interrupted: false,
            elapsed: std::time::Duration::ZERO,
        };
        let inv = crate::testutil::inventory(2, 1, "flannel");
        let mut report = Report::new(run, &inv);
        report.preflight = Some(super::super::Preflight {
            candidate: "new".into(),
            role: "worker".into(),
        });
        let text = render(&report);
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
        let mut bad = rec(
            "n1\nFAKE",
            evil,
            &format!("overlay:n1/host->{evil}/host:vxlan/8472"),
            Outcome::Timeout,
        );
        bad.result.detail = "boom\u{1b}]0;title\u{7}\r\n[ok] forged".into();
        let run = crate::run::RunOutput {
            results: Results::from(vec![bad]),
            agents: Vec::new(),
            interrupted: false,
            elapsed: std::time::Duration::ZERO,
        };
        let inv = crate::testutil::inventory(2, 1, "flannel");
        let mut report = Report::new(run, &inv);
        report.preflight = Some(super::super::Preflight {
            candidate: evil.into(),
            role: "worker".into(),
        });
        let text = render(&report);
        assert!(
            !text
                .chars()
                .any(|c| c.is_control() && c != '\n' || c == '\u{202e}'),
            "{text:?}"
        );
        assert_eq!(text.lines().count(), 3, "no forged lines: {text}");
        assert!(text.contains("\\u{1b}"), "{text}");
    }
}
