//! The terminal rendering: a summary line, the findings with their fixes, a compact source x
//! destination grid per path class, then the failures grouped under the finding that explains
//! them. Fits the given width: prose and anything an operator copies is wrapped, never cut.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;

use probe_proto::Outcome;

mod credentials;
mod fix_line;
mod grid;

use credentials::credentials;
use fix_line::{cap_lists, fix_line};

use super::Report;
use super::safe;
use crate::model::PathClass;
use crate::model::Record;

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

/// One grid cell per outcome.
pub(super) fn cell_char(o: Outcome) -> char {
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

const LEGEND: &str = ". ok T timeout R refused X rejected U unreachable S tls H http A unauthorized D dns E error ! a finding's evidence (see findings) ? unknown/not tested";

/// Evidence lines shown under a finding in the failures list; the rest are counted (the JSON
/// report lists them all). A gap between one node and 99 others is one cause, not 198 lines.
const EVIDENCE_SHOWN: usize = 6;

/// Past this many rows or columns a grid shows only the rows and columns with a problem.
const GRID_FULL: usize = 12;

/// Natural order: n2 before n10.
pub(super) fn natural(a: &str, b: &str) -> std::cmp::Ordering {
    let split = |s: &str| {
        let i = s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        (s[..i].to_string(), s[i..].parse::<u64>().unwrap_or(0))
    };
    split(a).cmp(&split(b)).then_with(|| a.cmp(b))
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

/// `n3/pod 10.244.3.2:9917`, `svc/kubernetes 10.96.0.1:443`, `n1/host [fd00:56::10]:10250`.
fn target(r: &Record<'_>) -> String {
    let label = match (&r.to.node, r.to.agent, r.to.service.as_deref()) {
        (_, _, Some(svc @ ("kubernetes" | "kube-dns"))) => format!("svc/{svc} "),
        (Some(n), Some(a), _) => format!("{n}/{} ", a.as_str()),
        (Some(n), None, Some(svc)) => format!("{n}/{svc} "),
        (Some(n), None, None) => format!("{n} "),
        (None, _, _) => String::new(),
    };
    match r.to.port {
        // An IPv6 address with a port is bracketed, as a socket address is written.
        Some(p) => format!("{label}{}", std::net::SocketAddr::new(r.to.address, p)),
        None => format!("{label}{}", r.to.address),
    }
}

/// The finding's kind as the report writes it (`firewall-gap`).
fn kind_text(f: &crate::diagnose::Finding) -> String {
    super::kebab(f.kind())
}

/// `[error] firewall-gap: summary`, wrapped, the tag painted.
fn finding_head(f: &crate::diagnose::Finding, style: Style, indent: usize) -> String {
    let (tag, color) = match f.severity {
        crate::diagnose::Severity::Error => ("error", RED),
        crate::diagnose::Severity::Warning => ("warning", YELLOW),
    };
    let pad = " ".repeat(indent);
    let body = wrap(
        &safe::text(&format!("{pad}[{tag}] {}: {}", kind_text(f), f.summary)),
        style.width,
        indent + 2,
    );
    body.replacen(
        &format!("[{tag}]"),
        &paint(&format!("[{tag}]"), color, style),
        1,
    )
}

/// The diagnosis, before the grids: what is wrong and what to do comes first.
fn findings(out: &mut String, report: &Report, style: Style) {
    if report.findings.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nfindings ({}):", report.findings.len());
    for f in &report.findings {
        let _ = writeln!(out, "{}", finding_head(f, style, 0));
        let mut facts = vec![
            format!("evidence {}", f.evidence.len()),
            format!("consequences {}", f.consequences.len()),
        ];
        let kind_facts = f.facts();
        if !kind_facts.places().is_empty() {
            let w = crate::diagnose::finding::places_text(kind_facts.places());
            facts.push(format!("where {w}"));
        }
        if !kind_facts.cycle().is_empty() {
            facts.push(format!("cycle {}", kind_facts.cycle().join(" -> ")));
        }
        let _ = writeln!(
            out,
            "{}",
            wrap(
                &safe::text(&format!("  {}", facts.join(", "))),
                style.width,
                4
            )
        );
        // Fixes are commands to copy: wrapped between words, never cut. Long address lists
        // are shortened here only; the JSON report has them whole.
        let mut shortened = false;
        for line in &f.fix {
            // Escaped, never cut: a fix is a command to copy.
            let line = safe::shown(line, usize::MAX);
            let capped = cap_lists(&line);
            shortened |= capped != *line;
            let _ = writeln!(out, "{}", fix_line(&capped, style.width));
        }
        if shortened {
            let _ = writeln!(
                out,
                "{}",
                wrap(
                    "  (address lists shortened here; the JSON report has every address)",
                    style.width,
                    4
                )
            );
        }
        // Notes are to read, not to run: apart from the fix lines, after them.
        for note in &f.notes {
            let _ = writeln!(
                out,
                "{}",
                wrap(&safe::text(&format!("  note: {note}")), style.width, 8)
            );
        }
    }
}

/// Word-wraps `text` to `width`, indenting continuation lines by `indent`.
#[must_use]
pub fn wrap(text: &str, width: usize, indent: usize) -> String {
    if text.chars().count() <= width {
        // Fits: keep its alignment as it is.
        return text.to_string();
    }
    let mut out = String::new();
    // The text's own indentation is kept on its first line.
    let lead = text.len() - text.trim_start().len();
    let mut line = text[..lead].to_string();
    for word in text.split_whitespace() {
        let limit = if out.is_empty() {
            width
        } else {
            width.saturating_sub(indent)
        };
        if !line.trim().is_empty() && line.chars().count() + 1 + word.chars().count() > limit {
            out.push_str(&line);
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            line.clear();
        }
        if !line.trim().is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(&line);
    out
}

/// One failed probe, wrapped: addresses and details are never cut.
fn failure_line(r: &Record<'_>, indent: usize, style: Style) -> String {
    let pad = " ".repeat(indent);
    wrap(
        &safe::text(&format!(
            "{pad}{:<17} {} -> {} {:<11} {}",
            r.path.as_str(),
            r.from,
            target(r),
            r.result.outcome.as_str(),
            r.result.detail
        )),
        style.width,
        indent + 4,
    )
}

/// `pod-to-pod 12, node-to-pod 6`: how many of the probes of `paths` each path class holds.
fn per_path(paths: impl Iterator<Item = PathClass>) -> String {
    let mut by: BTreeMap<PathClass, usize> = BTreeMap::new();
    for p in paths {
        *by.entry(p).or_default() += 1;
    }
    per_path_text(&by)
}

fn per_path_text(by: &BTreeMap<PathClass, usize>) -> String {
    by.iter()
        .map(|(p, n)| format!("{p} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Failed probes grouped under the finding that explains them, evidence listed and
/// consequences counted; the probes no finding explains last. Unknown probes are not failures.
fn failures(out: &mut String, report: &Report, style: Style) {
    // Failed probes by their place in the report, never copied: a broken overlay fails
    // millions of probes on a large cluster.
    let failed: Vec<u32> = report
        .results
        .iter()
        .enumerate()
        .filter(|(_, r)| r.is_failed())
        .filter_map(|(i, _)| u32::try_from(i).ok())
        .collect();
    let at = |i: u32| report.results.at(i as usize);
    if !failed.is_empty() {
        // The ids the findings cite, as evidence or consequences: the failures they explain.
        let explained: HashSet<&str> = report
            .findings
            .iter()
            .flat_map(|f| f.evidence.iter().chain(&f.consequences))
            .map(String::as_str)
            .collect();
        // Only failed probes are shown, so only they need finding by id; keyed by the
        // findings' own text, so no id is kept written out.
        let mut by_id: HashMap<&str, u32> = HashMap::new();
        for &i in &failed {
            if let Some(id) = explained.get(&*at(i).result.id.text()) {
                by_id.insert(id, i);
            }
        }
        let _ = writeln!(out, "\nfailures ({}):", failed.len());
        for f in &report.findings {
            let evidence: Vec<u32> = f
                .evidence
                .iter()
                .filter_map(|id| by_id.get(id.as_str()).copied())
                .collect();
            let consequences: Vec<u32> = f
                .consequences
                .iter()
                .filter_map(|id| by_id.get(id.as_str()).copied())
                .collect();
            // `by_id` holds failed probes only: all the evidence found is shown.
            let shown = &evidence;
            if shown.is_empty() && consequences.is_empty() {
                continue;
            }
            let _ = writeln!(out, "{}", finding_head(f, style, 2));
            if !shown.is_empty() {
                let _ = writeln!(out, "    evidence ({}):", shown.len());
                for &i in shown.iter().take(EVIDENCE_SHOWN) {
                    let _ = writeln!(out, "{}", failure_line(&at(i), 6, style));
                }
                if shown.len() > EVIDENCE_SHOWN {
                    let _ = writeln!(
                        out,
                        "      and {} more like these (every one in -o json)",
                        shown.len() - EVIDENCE_SHOWN
                    );
                }
            }
            if !consequences.is_empty() {
                let _ = writeln!(
                    out,
                    "{}",
                    wrap(
                        &format!(
                            "    and {} failed probes it explains ({})",
                            consequences.len(),
                            per_path(consequences.iter().map(|i| at(*i).path))
                        ),
                        style.width,
                        6
                    )
                );
            }
        }
        let rest: Vec<u32> = failed
            .into_iter()
            .filter(|i| !explained.contains(&*at(*i).result.id.text()))
            .collect();
        if !rest.is_empty() {
            let _ = writeln!(out, "  unexplained ({}):", rest.len());
            for i in rest {
                let _ = writeln!(out, "{}", failure_line(&at(i), 4, style));
            }
        }
    }
    unknowns(out, report, style);
}

/// The probes that never ran, counted by why and by path class, in one pass. Unknown probes
/// are not failures.
fn unknowns(out: &mut String, report: &Report, style: Style) {
    let mut why: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_path: BTreeMap<PathClass, usize> = BTreeMap::new();
    let mut count = 0;
    for r in report.results.iter().filter(Record::is_unknown) {
        let w = r
            .unknown
            .and_then(|u| serde_json::to_value(u).ok())
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        *why.entry(w).or_default() += 1;
        *by_path.entry(r.path).or_default() += 1;
        count += 1;
    }
    if count == 0 {
        return;
    }
    let why = why
        .iter()
        .map(|(w, n)| format!("{w} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(
        out,
        "\n{}",
        wrap(
            &format!(
                "not tested/unknown ({count}): {why}; by path: {}",
                per_path_text(&by_path)
            ),
            style.width,
            2
        )
    );
}

/// The ids of results an error finding cites as evidence although the probe itself answered
/// (a node's configuration read fine and is what is wrong): shown as `!` in the grid.
fn flagged(report: &Report) -> HashSet<&str> {
    report
        .findings
        .iter()
        .filter(|f| f.severity == crate::diagnose::Severity::Error)
        .flat_map(|f| &f.evidence)
        .map(String::as_str)
        .collect()
}

/// One grid per path class, under its counts and latencies.
fn paths(out: &mut String, report: &Report, style: Style) {
    let s = &report.summary;
    let flagged = flagged(report);
    // Counted in one pass; then one pass per path class builds its grid, so that one grid is
    // held at a time and no result is copied.
    let mut by_path: BTreeMap<PathClass, super::Counts> = BTreeMap::new();
    for r in &report.results {
        let c = by_path.entry(r.path).or_default();
        c.total += 1;
        c.ok += usize::from(r.result.outcome.is_ok());
        c.failed += usize::from(r.is_failed());
        c.unknown += usize::from(r.is_unknown());
    }
    for (path, counts) in &by_path {
        // A saved report may hold results its summary does not count: count them here rather
        // than fail to render.
        let counted;
        let ps = if let Some(ps) = s.by_path.get(path) {
            ps
        } else {
            counted = super::PathSummary {
                counts: counts.clone(),
                latency_micros: None,
            };
            &counted
        };
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
        let unknown = if ps.counts.unknown > 0 {
            format!(", {} unknown", ps.counts.unknown)
        } else {
            String::new()
        };
        let head = format!(
            "{path} ({} {}, {failed}{unknown}){lat}",
            ps.counts.total,
            plural(ps.counts.total, "probe", "probes")
        );
        let _ = writeln!(
            out,
            "\n{}",
            if style.color {
                format!("{BOLD}{head}{RESET}")
            } else {
                head
            }
        );
        let rs = report.results.iter().filter(|r| r.path == *path);
        grid::render(out, &grid::Grid::of(rs, &flagged), style);
    }
}

/// Renders the report for a terminal.
#[must_use]
pub fn render(report: &Report, style: Style) -> String {
    let s = &report.summary;
    let c = &s.counts;
    // A preflight report leads with its checklist (empty for other reports).
    let mut out = super::checklist::render(report, style.width);
    #[allow(clippy::cast_precision_loss)]
    let secs = s.duration_millis as f64 / 1000.0;
    // Wrapped before it is painted, so that colour codes do not count as columns.
    let verdict = format!("{} failed", c.failed);
    let line = wrap(
        &format!(
            "{} {}, {} {}: {} {} in {secs:.1} s: {} ok, {verdict}, {} unknown",
            s.nodes,
            plural(s.nodes, "node", "nodes"),
            s.agents,
            plural(s.agents, "agent", "agents"),
            c.total,
            plural(c.total, "probe", "probes"),
            c.ok,
            c.unknown
        ),
        style.width,
        2,
    );
    let color = if c.failed > 0 { RED } else { GREEN };
    let _ = writeln!(
        out,
        "{}",
        line.replacen(&verdict, &paint(&verdict, color, style), 1)
    );
    let errors = report.error_findings();
    let warnings = report.findings.len() - errors;
    if !report.findings.is_empty() {
        // A node's configuration can be wrong while every probe answered: say so up front.
        let text = format!(
            "{errors} {}, {warnings} {}",
            plural(errors, "error", "errors"),
            plural(warnings, "warning", "warnings")
        );
        let _ = writeln!(
            out,
            "findings: {}",
            paint(&text, if errors > 0 { RED } else { YELLOW }, style)
        );
    }
    if s.interrupted {
        let _ = writeln!(
            out,
            "{}",
            paint("interrupted: results are partial", YELLOW, style)
        );
    } else if c.failed == 0 && c.unknown == 0 && report.findings.is_empty() && c.total > 0 {
        // A healthy run says so in one line, not only by the absence of problems.
        let _ = writeln!(
            out,
            "{}",
            paint(
                &format!(
                    "verdict: healthy: all {} {} got through; nothing to fix",
                    c.total,
                    plural(c.total, "probe", "probes")
                ),
                GREEN,
                style
            )
        );
    }
    findings(&mut out, report, style);
    for a in report.agents.iter().filter(|a| !a.ran) {
        let _ = writeln!(
            out,
            "{}",
            wrap(
                &safe::text(&format!(
                    "agent {}/{} missing: {}",
                    a.node,
                    a.agent.as_str(),
                    a.detail
                )),
                style.width,
                2
            )
        );
    }
    paths(&mut out, report, style);
    credentials(&mut out, report, style);
    let _ = writeln!(out, "\n{}", wrap(LEGEND, style.width, 2));
    failures(&mut out, report, style);
    out
}

fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}

#[cfg(test)]
mod tests;
