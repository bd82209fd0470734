//! The terminal rendering: a summary line, a compact source x destination grid per path class,
//! then every failure with its outcome and detail. Fits the given width; colour only when asked.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use probe_proto::Outcome;

use super::Report;
use crate::model::PathClass;
use crate::model::ResultRecord;

#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub color: bool,
    pub width: usize,
}

impl Default for Style {
    fn default() -> Self {
        Self {
            color: false,
            width: 100,
        }
    }
}

const GREEN: &str = "\x1b[32m";
const RED: &str = "\x1b[31m";
const YELLOW: &str = "\x1b[33m";
const BOLD: &str = "\x1b[1m";
const RESET: &str = "\x1b[0m";

fn cell_char(o: Outcome) -> char {
    match o {
        Outcome::Ok => '.',
        Outcome::Timeout => 'T',
        Outcome::Refused => 'R',
        Outcome::Rejected => 'X',
        Outcome::Unreachable => 'U',
        Outcome::TlsError => 'S',
        Outcome::HttpError => 'H',
        Outcome::Unauthorized => 'A',
        Outcome::DnsError => 'D',
        Outcome::Error => 'E',
    }
}

const LEGEND: &str = ". ok T timeout R refused X rejected U unreachable S tls H http A unauthorized D dns E error ? unknown";

/// Natural order: n2 before n10.
fn natural(a: &str, b: &str) -> std::cmp::Ordering {
    let split = |s: &str| {
        let i = s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        (s[..i].to_string(), s[i..].parse::<u64>().unwrap_or(0))
    };
    split(a).cmp(&split(b)).then_with(|| a.cmp(b))
}

fn column(r: &ResultRecord) -> String {
    match (r.path, &r.to.node, r.to.service.as_deref()) {
        (PathClass::PodToService | PathClass::NodeToService, _, _)
        | (PathClass::Dns, _, Some("kube-dns")) => "svc".into(),
        (_, Some(n), _) => n.clone(),
        _ => r.to.address.to_string(),
    }
}

fn paint(s: &str, color: &str, style: Style) -> String {
    if style.color {
        format!("{color}{s}{RESET}")
    } else {
        s.to_string()
    }
}

fn fmt_micros(m: u64) -> String {
    #[allow(clippy::cast_precision_loss)]
    let ms = m as f64 / 1000.0;
    if ms < 10.0 {
        format!("{ms:.1}ms")
    } else {
        format!("{ms:.0}ms")
    }
}

fn grid(out: &mut String, rs: &[&ResultRecord], style: Style) {
    let mut cells: BTreeMap<(String, String), Vec<&ResultRecord>> = BTreeMap::new();
    let mut rows = BTreeSet::new();
    let mut cols = BTreeSet::new();
    for r in rs {
        rows.insert(r.from.node.clone());
        cols.insert(column(r));
        cells
            .entry((r.from.node.clone(), column(r)))
            .or_default()
            .push(r);
    }
    let mut rows: Vec<String> = rows.into_iter().collect();
    rows.sort_by(|a, b| natural(a, b));
    let mut cols: Vec<String> = cols.into_iter().collect();
    cols.sort_by(|a, b| natural(a, b));
    let label_w = rows.iter().map(String::len).max().unwrap_or(2).max(7) + 2;
    let col_w = cols.iter().map(String::len).max().unwrap_or(1) + 1;
    let cell = |row: &str, col: &str| -> (char, &'static str) {
        let Some(list) = cells.get(&(row.to_string(), col.to_string())) else {
            return (' ', "");
        };
        if let Some(f) = list.iter().find(|r| r.is_failed()) {
            (cell_char(f.result.outcome), RED)
        } else if list.iter().any(|r| r.is_unknown()) {
            ('?', YELLOW)
        } else {
            ('.', GREEN)
        }
    };
    if 2 + label_w + col_w * cols.len() > style.width {
        // Too wide for a grid: one line per source listing the failing destinations.
        for row in &rows {
            let bad: Vec<String> = cols
                .iter()
                .filter_map(|c| match cell(row, c) {
                    ('.' | ' ', _) => None,
                    (ch, _) => Some(format!("{c}({ch})")),
                })
                .collect();
            let text = if bad.is_empty() {
                paint("all ok", GREEN, style)
            } else {
                paint(&bad.join(" "), RED, style)
            };
            let _ = writeln!(out, "  {row:<label_w$}{text}");
        }
        return;
    }
    let _ = write!(out, "  {:<label_w$}", "from\\to");
    for c in &cols {
        let _ = write!(out, "{c:>col_w$}");
    }
    out.push('\n');
    for row in &rows {
        let _ = write!(out, "  {row:<label_w$}");
        for c in &cols {
            let (ch, color) = cell(row, c);
            let padded = format!("{ch:>col_w$}");
            out.push_str(&if color.is_empty() {
                padded
            } else {
                paint(&padded, color, style)
            });
        }
        out.push('\n');
    }
}

/// `n3/pod 10.244.3.2:9917`, `svc/kubernetes 10.96.0.1:443`.
fn target(r: &ResultRecord) -> String {
    let port = r.to.port.map(|p| format!(":{p}")).unwrap_or_default();
    let label = match (&r.to.node, r.to.agent, r.to.service.as_deref()) {
        (_, _, Some(svc @ ("kubernetes" | "kube-dns"))) => format!("svc/{svc} "),
        (Some(n), Some(a), _) => format!("{n}/{} ", a.as_str()),
        (Some(n), None, Some(svc)) => format!("{n}/{svc} "),
        (Some(n), None, None) => format!("{n} "),
        (None, _, _) => String::new(),
    };
    format!("{label}{}{port}", r.to.address)
}

fn truncate(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        s.to_string()
    } else {
        let cut: String = s.chars().take(width.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

/// The diagnosis, before the grids: what is wrong and what to do comes first.
fn findings(out: &mut String, report: &Report, style: Style) {
    if report.findings.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nfindings ({}):", report.findings.len());
    for f in &report.findings {
        let (tag, color) = match f.severity {
            crate::diagnose::Severity::Error => ("error", RED),
            crate::diagnose::Severity::Warning => ("warning", YELLOW),
        };
        let kind = serde_json::to_value(f.kind)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        let head = format!("[{tag}] {kind}: ");
        let body = wrap(&format!("{head}{}", f.summary), style.width, 2);
        let painted = body.replacen(
            &format!("[{tag}]"),
            &paint(&format!("[{tag}]"), color, style),
            1,
        );
        let _ = writeln!(out, "{painted}");
        let mut facts = vec![
            format!("evidence {}", f.evidence.len()),
            format!("consequences {}", f.consequences.len()),
        ];
        if !f.where_.is_empty() {
            let w = crate::diagnose::finding::places_text(&f.where_);
            facts.push(format!("where {w}"));
        }
        if !f.cycle.is_empty() {
            facts.push(format!("cycle {}", f.cycle.join(" -> ")));
        }
        let _ = writeln!(
            out,
            "{}",
            truncate(&format!("  {}", facts.join(", ")), style.width)
        );
        // Fixes are commands to copy: never cut, even when wider than the table.
        for line in &f.fix {
            let _ = writeln!(out, "  fix: {}", line.trim_start());
        }
    }
}

/// Word-wraps `text` to `width`, indenting continuation lines by `indent`.
fn wrap(text: &str, width: usize, indent: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let limit = if out.is_empty() {
            width
        } else {
            width.saturating_sub(indent)
        };
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > limit {
            out.push_str(&line);
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(&line);
    out
}

/// Every CNI token the host agents found: whose, issued, expires, and the API server's verdict
/// (INCIDENTS.md 3 and 4). Claims only; the token itself is never in the report.
fn credentials(out: &mut String, report: &Report, style: Style) {
    use crate::model::time::{age, utc};
    let mut lines = Vec::new();
    for r in report
        .results
        .iter()
        .filter(|r| r.path == PathClass::NodeConfig)
    {
        for kc in r.result.node.iter().flat_map(|n| &n.cni_kubeconfigs) {
            let Some(t) = &kc.token else { continue };
            let who = t.service_account.as_deref().map_or_else(
                || t.subject.clone().unwrap_or_else(|| "?".into()),
                |sa| format!("{}/{sa}", t.namespace.as_deref().unwrap_or("?")),
            );
            let issued = t.issued_at.map_or_else(
                || "issued ?".into(),
                |i| format!("issued {} ago", age(t.checked_at.saturating_sub(i))),
            );
            let expires = match t.expires_at {
                Some(e) if e <= t.checked_at => format!("EXPIRED {}", utc(e)),
                Some(e) => format!("expires {}", utc(e)),
                None if t.format == "jwt" => "never expires".into(),
                None => "opaque token".into(),
            };
            let api =
                kc.check
                    .as_ref()
                    .map_or_else(String::new, |c| match (c.outcome, c.http_status) {
                        (o, Some(s)) => format!(", API {o} ({s})"),
                        (o, None) => format!(", API {o}"),
                    });
            lines.push(format!("  {:<5} {} ({who})", r.from.node, kc.path));
            lines.push(format!("        {issued}, {expires}{api}"));
        }
    }
    if !lines.is_empty() {
        let _ = writeln!(out, "\nCNI credentials:");
        for l in lines {
            let _ = writeln!(out, "{}", truncate(&l, style.width));
        }
    }
}

/// Renders the report for a terminal.
#[must_use]
pub fn render(report: &Report, style: Style) -> String {
    let s = &report.summary;
    let c = &s.counts;
    // A preflight report leads with its checklist (empty for other reports).
    let mut out = super::checklist::render(report);
    #[allow(clippy::cast_precision_loss)]
    let secs = s.duration_millis as f64 / 1000.0;
    let verdict = if c.failed > 0 {
        paint(&format!("{} failed", c.failed), RED, style)
    } else {
        paint("0 failed", GREEN, style)
    };
    // Short by construction (a few numbers), so never cut: cutting would count colour codes.
    let _ = writeln!(
        out,
        "{} nodes, {} agents: {} probes in {secs:.1} s: {} ok, {verdict}, {} unknown",
        s.nodes, s.agents, c.total, c.ok, c.unknown
    );
    if s.interrupted {
        let _ = writeln!(
            out,
            "{}",
            paint("interrupted: results are partial", YELLOW, style)
        );
    }
    findings(&mut out, report, style);
    for a in report.agents.iter().filter(|a| !a.ran) {
        let _ = writeln!(
            out,
            "{}",
            truncate(
                &format!(
                    "agent {}/{} missing: {}",
                    a.node,
                    a.agent.as_str(),
                    a.detail
                ),
                style.width
            )
        );
    }
    let mut by_path: BTreeMap<PathClass, Vec<&ResultRecord>> = BTreeMap::new();
    for r in &report.results {
        by_path.entry(r.path).or_default().push(r);
    }
    for (path, rs) in &by_path {
        let ps = &s.by_path[path];
        let lat = ps.latency_micros.map_or_else(String::new, |l| {
            format!(
                "  p50 {} p90 {} p99 {} max {}",
                fmt_micros(l.p50),
                fmt_micros(l.p90),
                fmt_micros(l.p99),
                fmt_micros(l.max)
            )
        });
        let failed = if ps.counts.failed > 0 {
            paint(&format!("{} failed", ps.counts.failed), RED, style)
        } else {
            "0 failed".into()
        };
        let head = format!("{path} ({} probes, {failed}){lat}", ps.counts.total);
        let _ = writeln!(
            out,
            "\n{}",
            if style.color {
                format!("{BOLD}{head}{RESET}")
            } else {
                head
            }
        );
        grid(&mut out, rs, style);
    }
    credentials(&mut out, report, style);
    let _ = writeln!(out, "\n{}", truncate(LEGEND, style.width));
    let failures: Vec<&ResultRecord> = report
        .results
        .iter()
        .filter(|r| !r.result.outcome.is_ok())
        .collect();
    if !failures.is_empty() {
        let _ = writeln!(out, "\nfailures ({}):", failures.len());
        for r in failures {
            let line = format!(
                "  {:<17} {} -> {} {:<11} {}",
                r.path.as_str(),
                r.from,
                target(r),
                r.result.outcome.as_str(),
                r.result.detail
            );
            let _ = writeln!(out, "{}", truncate(&line, style.width));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_order() {
        let mut v = vec!["n10", "n2", "n1", "svc"];
        v.sort_by(|a, b| natural(a, b));
        assert_eq!(v, ["n1", "n2", "n10", "svc"]);
    }

    #[test]
    fn truncates_to_width() {
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("abc", 4), "abc");
    }
}
