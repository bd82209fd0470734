//! The HTML page's tests: self-contained, escaped, the findings and heatmaps it shows.

use super::*;
use crate::report::fixture;

#[test]
fn findings_come_first_then_grids_failures_and_the_run() {
    let html = render(&fixture::flannel_gap_report(), 1_700_000_000);
    let at = |needle: &str| html.find(needle).unwrap_or_else(|| panic!("no {needle}"));
    assert!(at("id=\"findings\"") < at("id=\"paths\""));
    assert!(at("id=\"paths\"") < at("id=\"failures\""));
    assert!(at("id=\"failures\"") < at("id=\"run\""));
    assert!(html.contains("data-kind=\"firewall-gap\""));
    assert!(html.contains("nft add rule inet filter input udp dport 8472 accept"));
    // The n1 -> n3 pod-to-pod cell failed, with its detail on hover.
    assert!(
        html.contains("<td class=\"timeout\" title=\"n1 \u{2192} n3: tcp/9917 timeout"),
        "{html}"
    );
    assert!(html.contains("title=\"n1 \u{2192} n2: tcp/9917 ok, "));
    assert!(html.contains("2023-11-14 22:13 UTC"));
}

#[test]
fn fix_lines_wrap_instead_of_scrolling_sideways() {
    // A 20-node gap's address list is longer than any window: it must wrap in its block,
    // where a reader (and a screenshot) sees all of it.
    let html = render(&fixture::report(20, Some("n3")), 0);
    assert!(html.contains("<pre class=\"fix\">"), "{html}");
    let rule = STYLE
        .lines()
        .find(|l| l.starts_with("pre.fix{"))
        .unwrap_or_else(|| panic!("no rule for the fix block in {STYLE}"));
    assert!(
        rule.contains("white-space:pre-wrap") && rule.contains("overflow-wrap:anywhere"),
        "{rule}"
    );
}

/// Issue 25, item 9: the failures table says which rows prove a finding and which follow
/// from it, each linked to its finding.
#[test]
fn failures_are_marked_as_evidence_or_consequence() {
    let mut r = fixture::report(3, Some("n3"));
    let failed: Vec<String> = r
        .results
        .iter()
        .filter(Record::is_failed)
        .map(|x| x.result.id.to_string())
        .collect();
    assert!(failed.len() > 3, "{failed:?}");
    r.findings[0].evidence = failed[..2].to_vec();
    r.findings[0].consequences = failed[2..failed.len() - 1].to_vec();
    let html = render(&r, 0);
    let row = |id: &str| {
        let at = html
            .find(&format!("<tr class=\"failure\" id=\"{}\">", esc(id)))
            .unwrap_or_else(|| panic!("no row {id}"));
        html[at..at + html[at..].find("</tr>").unwrap()].to_string()
    };
    assert!(
        row(&failed[0]).contains(
            "<td class=\"role evidence\">evidence of <a href=\"#finding-0\">firewall-gap</a>"
        ),
        "{}",
        row(&failed[0])
    );
    assert!(
        row(&failed[2]).contains("<td class=\"role consequence\">consequence of"),
        "{}",
        row(&failed[2])
    );
    assert!(
        row(failed.last().unwrap()).contains("role unexplained"),
        "{}",
        row(failed.last().unwrap())
    );
    assert!(html.contains("<article class=\"finding error\" id=\"finding-0\""));
}

#[test]
fn self_contained() {
    let html = render(&fixture::flannel_gap_report(), 0);
    for external in [
        "<script", "<link", "src=", "@import", "url(", "http://", "https://",
    ] {
        assert!(!html.contains(external), "{external}");
    }
}

#[test]
fn escapes_what_it_quotes() {
    let mut r = fixture::flannel_gap_report();
    r.findings[0].summary = "<b>\"x\" & 'y'</b>".into();
    let html = render(&r, 0);
    assert!(html.contains("&lt;b&gt;&quot;x&quot; &amp; &apos;y&apos;&lt;/b&gt;"));
    assert!(!html.contains("<b>\"x\""));
}

#[test]
fn large_grids_open_on_their_failing_rows() {
    let html = render(&fixture::report(40, Some("n7")), 0);
    let p2p = &html[html.find("id=\"path-pod-to-pod\"").unwrap()..];
    let p2p = &p2p[..p2p.find("</details>").unwrap()];
    assert!(p2p.contains("class=\"focus\" id=\"focus-pod-to-pod\" checked"));
    assert!(p2p.contains("class=\"heat dense\""));
    assert_eq!(
        p2p.matches("<tr class=\"badrow\">").count(),
        40,
        "n7 fails with everyone"
    );
    let healthy = render(&fixture::healthy(40), 0);
    assert!(!healthy.contains(" checked>"), "nothing to focus on");
    let small = render(&fixture::flannel_gap_report(), 0);
    assert!(!small.contains(" checked>") && !small.contains("heat dense"));
}
