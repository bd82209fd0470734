//! `JUnit` XML: one test suite per path class, one test case per probe, for CI systems.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::Report;
use crate::model::ResultRecord;

fn escape(s: &str) -> String {
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

#[must_use]
pub fn render(report: &Report) -> String {
    let mut by_path: BTreeMap<_, Vec<&ResultRecord>> = BTreeMap::new();
    for r in &report.results {
        by_path.entry(r.path).or_default().push(r);
    }
    let c = &report.summary.counts;
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"prober\" tests=\"{}\" failures=\"{}\" skipped=\"{}\">",
        c.total, c.failed, c.unknown
    );
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
                    "><skipped message=\"{}\"/></testcase>",
                    escape(&r.result.detail)
                );
            } else {
                let _ = writeln!(
                    out,
                    "><failure message=\"{}\" type=\"{}\">{}</failure></testcase>",
                    escape(r.result.outcome.as_str()),
                    escape(r.result.outcome.as_str()),
                    escape(&r.result.detail)
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
}
