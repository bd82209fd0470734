//! `JUnit` XML for CI systems: a `findings` suite with one test case per finding (an error fails,
//! its probes and fix in the case's output), then one suite per path class with one test case per
//! probe: ok passes, failed fails (naming the finding that explains it), unknown (not tested) is
//! skipped. The counts are the report's own: a suite fails as many cases as its path has failed
//! probes.

use std::collections::{BTreeMap, HashMap};

use std::fmt::Write as _;

use super::Report;
use crate::model::Record;

/// Text for XML (and HTML) content and attribute values. What XML 1.0 forbids even as a
/// character reference is dropped: the C0 controls but tab and line feed (carriage return too,
/// which a parser would fold away), and U+FFFE and U+FFFF; one such character in a policy's
/// name made the whole file unreadable to a CI system. (Lone surrogates cannot occur: a Rust
/// string is UTF-8.)
pub(super) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' | '\t' => out.push(c),
            c if (c as u32) < 0x20 || matches!(c, '\u{fffe}' | '\u{ffff}') => {}
            c => out.push(c),
        }
    }
    out
}

/// The finding's test case: failing when it is an error, its probes and fix as output.
fn finding_case(out: &mut String, f: &crate::diagnose::Finding) {
    let kind = super::kebab(f.kind());
    let _ = write!(
        out,
        "    <testcase classname=\"prober.findings\" name=\"{}\" time=\"0\">",
        escape(&format!("{kind}: {}", f.summary))
    );
    let mut body = String::new();
    for (title, ids) in [("evidence", &f.evidence), ("consequences", &f.consequences)] {
        if !ids.is_empty() {
            let _ = writeln!(body, "{title} ({}):", ids.len());
            for id in ids {
                let _ = writeln!(body, "  {id}");
            }
        }
    }
    for line in &f.fix {
        let _ = writeln!(body, "fix: {line}");
    }
    if f.severity == crate::diagnose::Severity::Error {
        let _ = write!(
            out,
            "<failure message=\"{}\" type=\"{kind}\">{}</failure>",
            escape(&f.summary),
            escape(&body)
        );
    } else {
        let _ = write!(out, "<system-out>{}</system-out>", escape(&body));
    }
    out.push_str("</testcase>\n");
}

#[must_use]
pub fn render(report: &Report) -> String {
    // Which finding explains each failed probe, for its failure message.
    let mut explained: HashMap<&str, &crate::diagnose::Finding> = HashMap::new();
    for f in &report.findings {
        for id in f.evidence.iter().chain(&f.consequences) {
            explained.entry(id.as_str()).or_insert(f);
        }
    }
    let mut by_path: BTreeMap<_, Vec<Record<'_>>> = BTreeMap::new();
    for r in &report.results {
        by_path.entry(r.path).or_default().push(r);
    }
    let errors = report.error_findings();
    let counts = &report.summary.counts;
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"prober\" tests=\"{}\" failures=\"{}\" skipped=\"{}\">",
        report.results.len() + report.findings.len(),
        errors + counts.failed,
        counts.unknown
    );
    if !report.findings.is_empty() {
        let _ = writeln!(
            out,
            "  <testsuite name=\"findings\" tests=\"{}\" failures=\"{errors}\" skipped=\"0\">",
            report.findings.len()
        );
        for f in &report.findings {
            finding_case(&mut out, f);
        }
        out.push_str("  </testsuite>\n");
    }
    for (path, rs) in by_path {
        let failures = rs.iter().filter(|r| r.is_failed()).count();
        let skipped = rs.iter().filter(|r| r.is_unknown()).count();
        let _ = writeln!(
            out,
            "  <testsuite name=\"{path}\" tests=\"{}\" failures=\"{failures}\" skipped=\"{skipped}\">",
            rs.len()
        );
        for r in rs {
            probe_case(&mut out, &r, explained.get(&*r.result.id.text()).copied());
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// One probe's test case; a failure names the finding that explains it, when one does.
fn probe_case(out: &mut String, r: &Record<'_>, finding: Option<&crate::diagnose::Finding>) {
    #[allow(clippy::cast_precision_loss)]
    let secs = r.result.rtt_micros.unwrap_or(0) as f64 / 1e6;
    let port = r.to.port.map(|p| format!(":{p}")).unwrap_or_default();
    let path = r.path;
    let name = escape(&format!(
        "{} -> {}{port} ({})",
        r.from, r.to.address, r.result.id
    ));
    let _ = write!(
        out,
        "    <testcase classname=\"prober.{path}\" name=\"{name}\" time=\"{secs:.6}\""
    );
    if r.result.outcome.is_ok() {
        out.push_str("/>\n");
    } else if r.is_unknown() {
        let _ = writeln!(
            out,
            "><skipped message=\"not tested: {}\"/></testcase>",
            escape(r.result.detail)
        );
    } else {
        let outcome = r.result.outcome.as_str();
        let message = match finding {
            Some(f) => format!(
                "{outcome}: explained by {}: {}",
                super::kebab(f.kind()),
                f.summary
            ),
            None => format!("{outcome}: no finding explains it"),
        };
        let _ = writeln!(
            out,
            "><failure message=\"{}\" type=\"{}\">{}</failure></testcase>",
            escape(&message),
            escape(outcome),
            escape(r.result.detail)
        );
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes_xml() {
        assert_eq!(
            super::escape("a<b>&\"'\u{1}\u{fffe}\u{ffff}\u{fffd}"),
            "a&lt;b&gt;&amp;&quot;&apos;\u{fffd}"
        );
    }
    #[test]
    fn names_with_characters_xml_forbids_still_make_xml() {
        let mut r = super::super::fixture::flannel_gap_report();
        // U+FFFE and U+FFFF, C0 controls, and the tab, line feed and carriage return XML keeps.
        let hostile = "deny-\u{fffe}\u{ffff}\u{1}\u{1b}[2J\u{b}\u{c}\u{7f}\t\r\n-all";
        r.findings[0].summary = format!("policy {hostile} denies");
        r.findings[0].fix = vec![hostile.to_string()];
        let xml = super::render(&r);
        let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{e}"));
        let case = doc
            .descendants()
            .find(|n| n.attribute("name").is_some_and(|a| a.contains("deny-")))
            .expect("the finding's case");
        // What XML allows is kept (a parser turns tab and line feed in an attribute to spaces).
        assert!(
            case.attribute("name")
                .unwrap()
                .contains("deny-[2J\u{7f}  -all"),
            "{:?}",
            case.attribute("name")
        );
    }

    #[test]
    fn one_case_per_probe_and_per_finding_counted_as_the_report_counts() {
        let mut r = super::super::fixture::flannel_gap_report();
        let failed: Vec<String> = r
            .results
            .iter()
            .filter(crate::model::Record::is_failed)
            .map(|x| x.result.id.to_string())
            .collect();
        assert!(failed.len() > 1);
        r.findings[0].evidence = failed[..1].to_vec();
        r.findings[0].consequences = failed[1..].to_vec();
        let unknown = r
            .results
            .iter()
            .position(|x| x.result.outcome.is_ok())
            .unwrap();
        let mut results = r.results.to_vec();
        results[unknown].unknown = Some(crate::model::Unknown::AgentFailed);
        results[unknown].result.outcome = probe_proto::Outcome::Error;
        r.results = results.into();
        r.summary.counts.unknown = 1;
        let xml = super::render(&r);
        // Every probe and every finding is a case; every failed probe fails, and the finding.
        assert_eq!(
            xml.matches("<testcase ").count(),
            r.results.len() + 1,
            "{xml}"
        );
        assert_eq!(xml.matches("<failure ").count(), failed.len() + 1, "{xml}");
        assert!(
            xml.contains(&format!(
                "tests=\"{}\" failures=\"{}\" skipped=\"1\"",
                r.results.len() + 1,
                r.summary.counts.failed + 1
            )),
            "{xml}"
        );
        assert!(
            xml.contains("explained by firewall-gap: udp/8472 (VXLAN) is blocked"),
            "{xml}"
        );
        // Each path's suite fails as many cases as the report counts failed on that path.
        for (path, s) in &r.summary.by_path {
            let head = format!(
                "<testsuite name=\"{path}\" tests=\"{}\" failures=\"{}\"",
                s.counts.total, s.counts.failed
            );
            assert!(xml.contains(&head), "{head}\n{xml}");
        }
        assert!(
            xml.contains("name=\"firewall-gap: udp/8472 (VXLAN) is blocked"),
            "{xml}"
        );
        assert_eq!(xml.matches("<skipped ").count(), 1, "{xml}");
    }
}
