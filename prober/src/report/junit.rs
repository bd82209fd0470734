//! `JUnit` XML for CI systems: a `findings` suite with one test case per finding (an error fails,
//! its probes and fix in the case's output), then one suite per path class with the probes no
//! finding explains: ok passes, failed fails, unknown (not tested) is skipped.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;

use super::Report;
use crate::model::Record;

/// Text for XML (and HTML) content and attribute values.
pub(super) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

/// The finding's test case: failing when it is an error, its probes and fix as output.
fn finding_case(out: &mut String, f: &crate::diagnose::Finding) {
    let kind = super::kebab(f.kind);
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
    // A failed probe a finding explains is reported once, under the finding.
    let explained: HashSet<&str> = report
        .findings
        .iter()
        .flat_map(|f| f.evidence.iter().chain(&f.consequences))
        .map(String::as_str)
        .collect();
    let mut by_path: BTreeMap<_, Vec<Record<'_>>> = BTreeMap::new();
    for r in report
        .results
        .iter()
        .filter(|r| !(r.is_failed() && explained.contains(&*r.result.id.text())))
    {
        by_path.entry(r.path).or_default().push(r);
    }
    let errors = report.error_findings();
    let probes: usize = by_path.values().map(Vec::len).sum();
    let unexplained = by_path.values().flatten().filter(|r| r.is_failed()).count();
    let skipped = report.summary.counts.unknown;
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"prober\" tests=\"{}\" failures=\"{}\" skipped=\"{skipped}\">",
        probes + report.findings.len(),
        errors + unexplained
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
            #[allow(clippy::cast_precision_loss)]
            let secs = r.result.rtt_micros.unwrap_or(0) as f64 / 1e6;
            let port = r.to.port.map(|p| format!(":{p}")).unwrap_or_default();
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
                let _ = writeln!(
                    out,
                    "><failure message=\"{}\" type=\"{}\">{}</failure></testcase>",
                    escape(r.result.outcome.as_str()),
                    escape(r.result.outcome.as_str()),
                    escape(r.result.detail)
                );
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes_xml() {
        assert_eq!(
            super::escape("a<b>&\"'\u{1}"),
            "a&lt;b&gt;&amp;&quot;&apos;"
        );
    }
    #[test]
    fn one_case_per_finding_and_its_probes_not_again() {
        let mut r = super::super::fixture::flannel_gap_report();
        let failed: Vec<String> = r
            .results
            .iter()
            .filter(crate::model::Record::is_failed)
            .map(|x| x.result.id.to_string())
            .collect();
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
        assert_eq!(xml.matches("<failure ").count(), 1, "{xml}");
        assert!(
            xml.contains("name=\"firewall-gap: udp/8472 (VXLAN) is blocked"),
            "{xml}"
        );
        assert!(
            xml.contains(&super::escape(&format!("  {}\n", failed[1]))),
            "{xml}"
        );
        assert_eq!(xml.matches("<skipped ").count(), 1, "{xml}");
        assert_eq!(
            xml.matches("<testcase ").count(),
            r.results.len() - failed.len() + 1,
            "{xml}"
        );
    }
}
