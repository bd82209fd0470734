//! The HTML rendering: one self-contained file (no script, style sheet or font from anywhere
//! else) that a person opens in a browser — the findings first, then a node x node heatmap per
//! path class (colour by outcome, latency on hover), the failures, and the run's metadata.
//! Large clusters stay readable: the grids scroll under sticky headers, and past
//! [`FOCUS_ROWS`] rows a grid opens on its failing rows only (a checkbox, no script).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;

use probe_proto::Outcome;

use super::Report;
use super::junit::escape as esc;
use super::table::natural;
use crate::diagnose::{Finding, Severity};
use crate::model::{PathClass, Record};

/// Past this many rows a grid shows its failing rows only, until the reader asks for all.
pub const FOCUS_ROWS: usize = 30;
/// The failures listed in full; the rest are counted (the JSON report has them all).
pub const MAX_FAILURES: usize = 2000;

const STYLE: &str = "
:root{--ok:#2e9e44;--timeout:#d7301f;--refused:#f08c00;--rejected:#a50f15;--unreachable:#67000d;
--app:#ae017e;--error:#636363;--unknown:#fed976;font-family:system-ui,-apple-system,'Segoe UI',sans-serif}
body{margin:0 auto;padding:1rem 1.5rem;max-width:100rem;color:#222;background:#fafafa}
h1{margin:.2rem 0}h2{margin-top:2rem;border-bottom:1px solid #ccc}
.verdict{font-size:1.1rem;padding:.5rem .8rem;border-radius:4px;background:#e8f5e9}
.verdict.bad{background:#fdecea}.verdict.partial{background:#fff8e1}
.finding{background:#fff;border-left:6px solid var(--timeout);padding:.5rem 1rem;margin:.8rem 0}
.finding.warning{border-color:var(--refused)}.finding h3{margin:.2rem 0;font-size:1rem}
.sev{display:inline-block;padding:0 .4rem;border-radius:3px;color:#fff;background:var(--timeout);font-size:.8rem}
.warning .sev{background:var(--refused)}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.1rem 1rem;margin:.4rem 0}
dl.facts dt{color:#666}dl.facts dd{margin:0}
pre{background:#f1f1f1;padding:.4rem .6rem;overflow-x:auto;font-size:.85rem}
pre.fix{white-space:pre-wrap;overflow-wrap:anywhere;overflow-x:visible}
details.path{margin:1rem 0;background:#fff;padding:.4rem .8rem}
details.path>summary{cursor:pointer;font-weight:600}
.wrap{overflow:auto;max-height:75vh;border:1px solid #ddd;margin-top:.4rem}
table.heat{border-collapse:separate;border-spacing:1px;font-size:.75rem}
table.heat th{background:#fff;font-weight:500;white-space:nowrap;padding:0 .3rem}
table.heat thead th{position:sticky;top:0;z-index:2}
table.heat tbody th{position:sticky;left:0;z-index:1;text-align:right}
table.heat thead th.corner{left:0;z-index:3}
table.heat.dense thead th{writing-mode:vertical-rl;transform:rotate(180deg);padding:.3rem 0}
table.heat td{min-width:1.1rem;height:1.1rem;text-align:center;color:#fff;font-weight:700}
table.heat.dense td{min-width:.7rem;height:.7rem;font-size:.55rem;padding:0}
td.ok{background:var(--ok)}td.timeout{background:var(--timeout)}td.refused{background:var(--refused)}
td.rejected{background:var(--rejected)}td.unreachable{background:var(--unreachable)}
td.tls-error,td.http-error,td.unauthorized,td.dns-error{background:var(--app)}
td.error{background:var(--error)}td.unknown{background:var(--unknown);color:#333}td.none{background:#eee}
.focus:checked~.wrap tr.okrow{display:none}
.legend span{display:inline-block;margin-right:.8rem}.legend i{display:inline-block;width:.9rem;height:.9rem;
vertical-align:middle;margin-right:.2rem}
table.list{border-collapse:collapse;font-size:.85rem;background:#fff}
table.list th,table.list td{border:1px solid #ddd;padding:.15rem .5rem;text-align:left;vertical-align:top}
.muted{color:#666}td.role{white-space:nowrap}td.role.evidence{font-weight:700}
td.role.consequence{color:#555}td.role.unexplained{color:var(--rejected)}.note{color:#444;font-style:italic;margin:.3rem 0}
";

/// The grid column of a result: the destination node, or the Service for service paths.
fn column(r: &Record<'_>) -> String {
    match (r.path, &r.to.node, r.to.service.as_deref()) {
        (PathClass::PodToService | PathClass::NodeToService, _, _) => "service".into(),
        (PathClass::Dns, _, Some("kube-dns")) => "kube-dns".into(),
        (_, Some(n), _) => n.clone(),
        _ => r.to.address.to_string(),
    }
}

fn ms(micros: u64) -> String {
    #[allow(clippy::cast_precision_loss)]
    let ms = micros as f64 / 1000.0;
    if ms < 10.0 {
        format!("{ms:.2} ms")
    } else {
        format!("{ms:.0} ms")
    }
}

/// What a probe was: `tcp/9917`, `udp/8472`.
fn what(r: &Record<'_>) -> String {
    match r.to.port {
        Some(p) => format!("{}/{p}", r.to.protocol.as_str()),
        None => r.to.protocol.as_str().to_string(),
    }
}

/// The class and glyph of a cell, and the hover text: every failed probe with its detail, or
/// the latency of the successful ones.
fn cell(row: &str, col: &str, list: &[Record<'_>]) -> (String, char, String) {
    let failed: Vec<&Record<'_>> = list.iter().filter(|r| r.is_failed()).collect();
    let unknown = list.iter().filter(|r| r.is_unknown()).count();
    let mut title = format!("{row} \u{2192} {col}: ");
    if let Some(first) = failed.first() {
        let outcome = first.result.outcome;
        let parts: Vec<String> = failed
            .iter()
            .take(6)
            .map(|r| {
                format!(
                    "{} {} ({})",
                    what(r),
                    r.result.outcome.as_str(),
                    r.result.detail
                )
            })
            .collect();
        title.push_str(&parts.join("; "));
        if failed.len() > 6 {
            let _ = write!(title, "; {} more failed", failed.len() - 6);
        }
        let ok = list.len() - failed.len() - unknown;
        if ok > 0 {
            let _ = write!(title, "; {ok} ok");
        }
        (outcome.as_str().to_string(), glyph(outcome), title)
    } else if unknown > 0 {
        let _ = write!(title, "{unknown} unknown ({})", list[0].result.detail);
        ("unknown".into(), '?', title)
    } else {
        let rtts: Vec<u64> = list.iter().filter_map(|r| r.result.rtt_micros).collect();
        let probes = if list.len() == 1 {
            what(&list[0])
        } else {
            format!("{} probes", list.len())
        };
        match (rtts.iter().min(), rtts.iter().max()) {
            (Some(lo), Some(hi)) if lo == hi => {
                let _ = write!(title, "{probes} ok, {}", ms(*lo));
            }
            (Some(lo), Some(hi)) => {
                let _ = write!(title, "{probes} ok, {}\u{2013}{}", ms(*lo), ms(*hi));
            }
            _ => {
                let _ = write!(title, "{probes} ok");
            }
        }
        ("ok".into(), ' ', title)
    }
}

/// The table's letter for a failure; a blank cell for ok.
fn glyph(o: Outcome) -> char {
    if o == Outcome::Ok {
        ' '
    } else {
        super::table::cell_char(o)
    }
}

fn findings(out: &mut String, report: &Report) {
    let _ = writeln!(
        out,
        "<section id=\"findings\"><h2>Findings ({})</h2>",
        report.findings.len()
    );
    if report.findings.is_empty() {
        out.push_str("<p>No findings: every probed path works.</p>");
    }
    for (i, f) in report.findings.iter().enumerate() {
        finding(out, i, f);
    }
    out.push_str("</section>\n");
}

fn finding(out: &mut String, i: usize, f: &Finding) {
    let sev = match f.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    let kind = super::kebab(f.kind());
    let _ = write!(
        out,
        "<article class=\"finding {sev}\" id=\"finding-{i}\" data-kind=\"{kind}\"><h3><span class=\"sev\">{sev}</span> \
         {kind}</h3><p>{}</p><dl class=\"facts\">",
        esc(&f.summary)
    );
    let json = serde_json::to_value(f).unwrap_or_default();
    for field in [
        "protocol",
        "port",
        "from",
        "to",
        "direction",
        "where",
        "state",
        "cycle",
        "components",
        "nodes",
    ] {
        let text = match json.get(field) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(serde_json::Value::Array(a)) if !a.is_empty() => a
                .iter()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), String::from))
                .collect::<Vec<_>>()
                .join(", "),
            Some(v @ serde_json::Value::Number(_)) => v.to_string(),
            _ => continue,
        };
        let _ = write!(out, "<dt>{field}</dt><dd>{}</dd>", esc(&text));
    }
    let _ = write!(
        out,
        "<dt>evidence</dt><dd>{} results prove it; {} failed results are its consequences</dd></dl>",
        f.evidence.len(),
        f.consequences.len()
    );
    if !f.fix.is_empty() {
        let _ = write!(out, "<pre class=\"fix\">{}</pre>", esc(&f.fix.join("\n")));
    }
    // Notes are to read, not to run: prose, outside the block a reader copies from.
    for note in &f.notes {
        let _ = write!(out, "<p class=\"note\">{}</p>", esc(note));
    }
    out.push_str("</article>\n");
}

fn legend(out: &mut String) {
    out.push_str("<p class=\"legend\">");
    for (class, label) in [
        ("ok", "ok"),
        ("timeout", "T timeout"),
        ("refused", "R refused"),
        ("rejected", "X rejected"),
        ("unreachable", "U unreachable"),
        ("tls-error", "S/H/A/D tls, http, unauthorized, dns"),
        ("error", "E error"),
        ("unknown", "? unknown (never ran)"),
    ] {
        let _ = write!(
            out,
            "<span><i style=\"background:var(--{})\"></i>{label}</span>",
            if class == "tls-error" { "app" } else { class }
        );
    }
    out.push_str("</p>\n");
}

fn heatmap(out: &mut String, path: PathClass, rs: &[Record<'_>]) {
    let mut cells: BTreeMap<(String, String), Vec<Record<'_>>> = BTreeMap::new();
    let mut rows = BTreeSet::new();
    let mut cols = BTreeSet::new();
    for r in rs {
        let c = column(r);
        rows.insert(r.from.node.clone());
        cols.insert(c.clone());
        cells.entry((r.from.node.clone(), c)).or_default().push(*r);
    }
    let mut rows: Vec<String> = rows.into_iter().collect();
    rows.sort_by(|a, b| natural(a, b));
    let mut cols: Vec<String> = cols.into_iter().collect();
    cols.sort_by(|a, b| natural(a, b));
    let failed = rs.iter().filter(|r| r.is_failed()).count();
    let unknown = rs.iter().filter(|r| r.is_unknown()).count();
    let bad_rows: BTreeSet<&str> = rs
        .iter()
        .filter(|r| !r.result.outcome.is_ok() || r.is_unknown())
        .map(|r| r.from.node.as_str())
        .collect();
    let p = path.as_str();
    let _ = write!(
        out,
        "<details class=\"path\" id=\"path-{p}\" open><summary>{p}: {} {}, {failed} failed, \
         {unknown} unknown ({} x {})</summary>",
        rs.len(),
        if rs.len() == 1 { "probe" } else { "probes" },
        rows.len(),
        cols.len()
    );
    let focus = rows.len() > FOCUS_ROWS && !bad_rows.is_empty();
    if !bad_rows.is_empty() {
        let _ = write!(
            out,
            "<input type=\"checkbox\" class=\"focus\" id=\"focus-{p}\"{}><label for=\"focus-{p}\"> \
             failing rows only ({} of {})</label>",
            if focus { " checked" } else { "" },
            bad_rows.len(),
            rows.len()
        );
    }
    let dense = if cols.len() > FOCUS_ROWS {
        " dense"
    } else {
        ""
    };
    let _ = write!(
        out,
        "<div class=\"wrap\"><table class=\"heat{dense}\" data-path=\"{p}\"><thead><tr>\
         <th class=\"corner\">from \\ to</th>"
    );
    for c in &cols {
        let _ = write!(out, "<th scope=\"col\">{}</th>", esc(c));
    }
    out.push_str("</tr></thead><tbody>\n");
    for row in &rows {
        let class = if bad_rows.contains(row.as_str()) {
            "badrow"
        } else {
            "okrow"
        };
        let _ = write!(
            out,
            "<tr class=\"{class}\"><th scope=\"row\">{}</th>",
            esc(row)
        );
        for col in &cols {
            match cells.get(&(row.clone(), col.clone())) {
                None => out.push_str("<td class=\"none\"></td>"),
                Some(list) => {
                    let (class, g, title) = cell(row, col, list);
                    let _ = write!(
                        out,
                        "<td class=\"{class}\" title=\"{}\">{g}</td>",
                        esc(&title)
                    );
                }
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table></div></details>\n");
}

fn failures(out: &mut String, report: &Report) {
    let failed: Vec<Record<'_>> = report.results.iter().filter(Record::is_failed).collect();
    let _ = writeln!(
        out,
        "<section id=\"failures\"><h2>Failures ({})</h2>",
        failed.len()
    );
    if failed.is_empty() {
        out.push_str("<p>None.</p></section>\n");
        return;
    }
    // What each failure is to the diagnosis: the evidence a finding rests on, or a consequence
    // it explains (the first finding citing it, as the findings are ordered).
    let mut role: HashMap<&str, (bool, usize)> = HashMap::new();
    for (i, f) in report.findings.iter().enumerate() {
        for id in &f.evidence {
            role.entry(id.as_str()).or_insert((true, i));
        }
        for id in &f.consequences {
            role.entry(id.as_str()).or_insert((false, i));
        }
    }
    out.push_str(
        "<p class=\"muted\">Each failure is marked as the <b>evidence</b> a finding rests on, a \
         <b>consequence</b> a finding explains (fix the finding and it goes away), or \
         <b>unexplained</b>.</p>\
         <table class=\"list\"><thead><tr><th>role</th><th>path</th><th>from</th><th>to</th>\
         <th>probe</th><th>outcome</th><th>detail</th></tr></thead><tbody>\n",
    );
    for r in failed.iter().take(MAX_FAILURES) {
        let id = r.result.id.text();
        let cited = match role.get(&*id) {
            Some(&(evidence, i)) => {
                let word = if evidence { "evidence" } else { "consequence" };
                format!(
                    "<td class=\"role {word}\">{word} of <a href=\"#finding-{i}\">{}</a></td>",
                    super::kebab(report.findings[i].kind())
                )
            }
            None => "<td class=\"role unexplained\">unexplained</td>".into(),
        };
        let to = match (&r.to.node, r.to.agent, r.to.service.as_deref()) {
            (_, _, Some(s)) => format!("{s} {}", r.to.address),
            (Some(n), Some(a), _) => format!("{n}/{} {}", a.as_str(), r.to.address),
            (Some(n), None, None) => format!("{n} {}", r.to.address),
            (None, _, None) => r.to.address.to_string(),
        };
        let _ = writeln!(
            out,
            "<tr class=\"failure\" id=\"{}\">{cited}<td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td></tr>",
            esc(&id),
            r.path.as_str(),
            esc(&r.from.to_string()),
            esc(&to),
            esc(&what(r)),
            r.result.outcome.as_str(),
            esc(r.result.detail)
        );
    }
    out.push_str("</tbody></table>");
    if failed.len() > MAX_FAILURES {
        let _ = write!(
            out,
            "<p class=\"muted\">{} more failures are in the JSON report.</p>",
            failed.len() - MAX_FAILURES
        );
    }
    out.push_str("</section>\n");
}

fn metadata(out: &mut String, report: &Report, finished: u64) {
    let s = &report.summary;
    let _ = write!(
        out,
        "<section id=\"run\"><h2>The run</h2><dl class=\"facts\">\
         <dt>finished</dt><dd>{}</dd><dt>probing took</dt><dd>{:.2} s</dd>\
         <dt>nodes</dt><dd>{}</dd><dt>agents</dt><dd>{} ({} missing)</dd>\
         <dt>probes</dt><dd>{} ({} ok, {} failed, {} unknown)</dd>\
         <dt>interrupted</dt><dd>{}</dd><dt>exit code</dt><dd>{}</dd><dt>schema</dt><dd>{}</dd></dl>",
        crate::model::time::utc(finished),
        f64::from(u32::try_from(s.duration_millis).unwrap_or(u32::MAX)) / 1000.0,
        s.nodes,
        s.agents,
        s.agents_missing,
        s.counts.total,
        s.counts.ok,
        s.counts.failed,
        s.counts.unknown,
        if s.interrupted { "yes" } else { "no" },
        s.exit_code,
        esc(&report.schema)
    );
    out.push_str(
        "<table class=\"list\"><thead><tr><th>path</th><th>probes</th><th>ok</th><th>failed</th>\
         <th>unknown</th><th>p50</th><th>p90</th><th>p99</th><th>max</th></tr></thead><tbody>\n",
    );
    for (p, ps) in &s.by_path {
        let lat = ps.latency_micros.map_or_else(
            || "<td></td><td></td><td></td><td></td>".to_string(),
            |l| {
                format!(
                    "<td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
                    ms(l.p50),
                    ms(l.p90),
                    ms(l.p99),
                    ms(l.max)
                )
            },
        );
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>{lat}</tr>",
            p.as_str(),
            ps.counts.total,
            ps.counts.ok,
            ps.counts.failed,
            ps.counts.unknown
        );
    }
    out.push_str("</tbody></table>");
    let missing: Vec<String> = report
        .agents
        .iter()
        .filter(|a| !a.ran)
        .map(|a| format!("{}/{}: {}", a.node, a.agent.as_str(), a.detail))
        .collect();
    if !missing.is_empty() {
        let _ = write!(
            out,
            "<h3>Agents that did not run</h3><pre>{}</pre>",
            esc(&missing.join("\n"))
        );
    }
    out.push_str("</section>\n");
}

/// The report as one HTML document; `finished` is when the run ended (seconds since the epoch).
#[must_use]
pub fn render(report: &Report, finished: u64) -> String {
    let s = &report.summary;
    let errors = report.error_findings();
    let verdict_class = match s.exit_code {
        0 => "verdict",
        3 => "verdict partial",
        _ => "verdict bad",
    };
    let mut out = String::with_capacity(64 * 1024 + report.results.len() * 96);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>prober: {} nodes, {} failed, {} findings</title><style>{STYLE}</style></head>\n\
         <body><header><h1>prober report</h1><p class=\"{verdict_class}\" id=\"verdict\">\
         {} of {} probes failed, {} unknown; {} finding(s) ({errors} error(s)) across {} nodes \
         &mdash; {}</p></header>\n",
        s.nodes,
        s.counts.failed,
        report.findings.len(),
        s.counts.failed,
        s.counts.total,
        s.counts.unknown,
        report.findings.len(),
        s.nodes,
        crate::model::time::utc(finished),
    );
    findings(&mut out, report);
    out.push_str("<section id=\"paths\"><h2>Paths</h2>");
    legend(&mut out);
    let mut by_path: BTreeMap<PathClass, Vec<Record<'_>>> = BTreeMap::new();
    for r in &report.results {
        by_path.entry(r.path).or_default().push(r);
    }
    for (p, rs) in &by_path {
        heatmap(&mut out, *p, rs);
    }
    out.push_str("</section>\n");
    failures(&mut out, report);
    metadata(&mut out, report, finished);
    out.push_str("</body></html>\n");
    out
}

#[cfg(test)]
mod tests;
