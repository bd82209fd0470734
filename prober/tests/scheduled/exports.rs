//! `prober diff`, `-o prometheus`, `--pushgateway`, `-o html`, `--log-format json` on synthetic
//! reports, and on lab reports (healthy and the flannel-8472 incident, built in namespaces).

use crate::common::gateway::{Pushgateway, SCHED_DEPS, get};
use crate::common::tool;
use crate::common::{agent, prober, require_root, root, text};
use crate::kit::*;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

#[test]
fn diff_of_saved_reports() {
    let dir = tmp("prober-diff-");
    let healthy = write_report(dir.path(), "healthy.json", &synthetic(3, None));
    let broken = write_report(dir.path(), "broken.json", &synthetic(3, Some("n3")));
    check_diff(&healthy, &broken);
}

#[test]
fn table_width_follows_columns_and_the_flag() {
    let dir = tmp("prober-width-");
    let broken = write_report(dir.path(), "broken.json", &synthetic(3, Some("n3")));
    let table = |columns: &str, extra: &[&str]| {
        let out = Command::new(prober())
            .arg("report")
            .arg(&broken)
            .args(extra)
            .env("NO_COLOR", "1")
            .env("COLUMNS", columns)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let widest = |t: &str| {
        t.lines()
            .filter(|l| l.split_whitespace().count() > 1)
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(0)
    };
    let narrow = table("60", &[]);
    assert!(widest(&narrow) <= 60, "{narrow}");
    // Wrapped, not cut: every failing address is still there.
    assert!(narrow.contains("no answer within 2000 ms"), "{narrow}");
    let wide = table("60", &["--width", "160"]);
    assert!(widest(&wide) > 60, "{wide}");
}

/// healthy -> broken: the gap is new (exit 1); broken -> healthy: resolved (exit 0); a report
/// against itself: nothing new (exit 0).
fn check_diff(healthy: &Path, broken: &Path) {
    let diff = |a: &Path, b: &Path| {
        let out = run(&[
            "diff",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "-o",
            "json",
        ]);
        let v: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
        (out.status.code(), v)
    };
    let kinds = |v: &Value, key: &str| -> Vec<String> {
        v[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["kind"].as_str().unwrap().to_string())
            .collect()
    };
    let (code, v) = diff(healthy, broken);
    assert_eq!(code, Some(1), "{v}");
    assert!(
        kinds(&v, "new").contains(&"firewall-gap".to_string()),
        "{v}"
    );
    let gap = v["new"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "firewall-gap")
        .unwrap();
    assert_eq!(
        (gap["protocol"].as_str(), gap["port"].as_u64()),
        (Some("udp"), Some(8472))
    );
    let (code, v) = diff(broken, healthy);
    assert_eq!(code, Some(0), "{v}");
    assert!(
        kinds(&v, "resolved").contains(&"firewall-gap".to_string()),
        "{v}"
    );
    assert!(
        !kinds(&v, "new").contains(&"firewall-gap".to_string()),
        "{v}"
    );
    let (code, v) = diff(broken, broken);
    assert_eq!(code, Some(0), "{v}");
    assert!(v["new"].as_array().unwrap().is_empty(), "{v}");
    assert!(v["resolved"].as_array().unwrap().is_empty(), "{v}");
    assert!(kinds(&v, "persisting").contains(&"firewall-gap".to_string()));
    let table = run(&["diff", healthy.to_str().unwrap(), broken.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&table.stdout).contains("new (1):\n  [error] firewall-gap"));
    let missing = run(&["diff", "/nonexistent.json", broken.to_str().unwrap()]);
    assert_eq!(missing.status.code(), Some(2));
}

/// `promtool check metrics` on the exposition of `report`; returns the exposition.
fn promtool_accepts(promtool: &Path, report: &Path) -> String {
    let out = run(&["report", report.to_str().unwrap(), "-o", "prometheus"]);
    let exposition = String::from_utf8(out.stdout).unwrap();
    let mut check = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    check
        .stdin
        .take()
        .unwrap()
        .write_all(exposition.as_bytes())
        .unwrap();
    let res = check.wait_with_output().unwrap();
    assert!(
        res.status.success(),
        "promtool check metrics: {}\n{exposition}",
        text(&res)
    );
    exposition
}

#[test]
fn promtool_accepts_the_exposition_and_labels_stay_bounded() {
    let Some(promtool) = tool("promtool", SCHED_DEPS) else {
        return;
    };
    let dir = tmp("prober-prom-");
    let mut sizes = Vec::new();
    for nodes in [10, 40] {
        let file = write_report(dir.path(), "r.json", &synthetic(nodes, Some("n3")));
        let text = promtool_accepts(&promtool, &file);
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            assert!(
                !l.contains("->") && !l.contains("192.168.") && !l.contains("10.244."),
                "{l}"
            );
        }
        assert!(text.contains("prober_findings{kind=\"firewall-gap\",severity=\"error\"} 1\n"));
        sizes.push(text.lines().filter(|l| !l.starts_with('#')).count());
    }
    // Four times the nodes: the series grow by the per-node ones only, not by pairs.
    assert_eq!(sizes[1] - sizes[0], 30, "{sizes:?}");
}

#[test]
fn a_real_pushgateway_receives_the_metrics() {
    let Some(bin) = tool("prometheus-pushgateway", SCHED_DEPS) else {
        return;
    };
    let gw = Pushgateway::start(&bin);
    let dir = tmp("prober-push-");
    let file = write_report(dir.path(), "r.json", &synthetic(4, Some("n3")));
    let url = format!("http://127.0.0.1:{}", gw.port);
    let out = run(&[
        "report",
        file.to_str().unwrap(),
        "-o",
        "json",
        "--pushgateway",
        &url,
        "--log-format",
        "json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "the report's own exit code: {}",
        text(&out)
    );
    let metrics = get(gw.port, "/metrics").unwrap();
    for want in [
        "prober_findings{instance=\"\",job=\"prober\",kind=\"firewall-gap\",severity=\"error\"} 1",
        "prober_probes{instance=\"\",job=\"prober\",outcome=\"timeout\",path=\"pod-to-pod\"} 6",
        "prober_agents{instance=\"\",job=\"prober\",state=\"ran\"} 8",
        "prober_probe_latency_seconds_count{instance=\"\",job=\"prober\",path=\"node-to-node\"} 12",
        "prober_node_failed_probes{instance=\"\",job=\"prober\",node=\"n3\"} 6",
    ] {
        assert!(metrics.contains(want), "{want} not in:\n{metrics}");
    }
    // The one JSON log line says it pushed.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line: Value = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
    assert_eq!(line["pushed"], true);
    assert_eq!(line["exitCode"], 1);
    assert_eq!(line["findings"]["error"], 1);
    // A second push replaces the group: the healthy run leaves no gap behind.
    let healthy = write_report(dir.path(), "h.json", &synthetic(4, None));
    let out = run(&[
        "report",
        healthy.to_str().unwrap(),
        "-o",
        "json",
        "--pushgateway",
        &url,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let metrics = get(gw.port, "/metrics").unwrap();
    assert!(metrics.contains(
        "prober_findings{instance=\"\",job=\"prober\",kind=\"firewall-gap\",severity=\"error\"} 0"
    ));
    assert!(!metrics.contains("outcome=\"timeout\""));
}

#[test]
fn pushing_fails_clearly() {
    let dir = tmp("prober-push-");
    let file = write_report(dir.path(), "h.json", &synthetic(3, None));
    let https = run(&[
        "report",
        file.to_str().unwrap(),
        "--pushgateway",
        "https://gw:9091",
    ]);
    assert_eq!(https.status.code(), Some(2));
    assert!(
        text(&https).contains("https is not supported"),
        "{}",
        text(&https)
    );
    // Nothing listens on port 1: said on stderr, and a clean run exits 2.
    let refused = run(&[
        "report",
        file.to_str().unwrap(),
        "--pushgateway",
        "http://127.0.0.1:1",
    ]);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--pushgateway: 127.0.0.1:1"));
    let remember = run(&["matrix", "--inventory", "/nonexistent.yaml", "--remember"]);
    assert_eq!(remember.status.code(), Some(2));
    assert!(
        text(&remember).contains("--remember"),
        "{}",
        text(&remember)
    );
}

/// The HTML of `report` as headless Chromium builds its DOM.
fn chromium_dom(chromium: &Path, html: &Path) -> String {
    let profile = tmp("prober-chromium-");
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", html.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut dom = String::new();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let _ = stdout.read_to_string(&mut dom);
        dom
    });
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            panic!("chromium did not finish within 90 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let dom = reader.join().unwrap();
    assert!(dom.contains("</html>"), "chromium printed no DOM: {dom}");
    dom
}

fn html_of(report: &Path, dir: &Path) -> PathBuf {
    let out = run(&["report", report.to_str().unwrap(), "-o", "html"]);
    let p = dir.join("report.html");
    std::fs::write(&p, &out.stdout).unwrap();
    p
}

#[test]
fn chromium_renders_a_hundred_node_report() {
    let Some(chromium) = tool("chromium", SCHED_DEPS) else {
        return;
    };
    let dir = tmp("prober-html-");
    let file = write_report(dir.path(), "r.json", &synthetic(100, Some("n42")));
    let html = html_of(&file, dir.path());
    let size = std::fs::metadata(&html).unwrap().len();
    eprintln!("HTML for 100 nodes: {size} bytes");
    let dom = chromium_dom(&chromium, &html);
    assert!(dom.contains("<th scope=\"row\">n100</th>"));
    assert!(dom.contains("<td class=\"timeout\" title=\"n7 \u{2192} n42: tcp/9917 timeout"));
    // Past 30 rows the grid with failures opens on its failing rows.
    assert!(dom.contains("id=\"focus-pod-to-pod\" checked"));
    assert!(dom.contains("class=\"heat dense\""));
    assert!(!dom.contains("<script"), "self-contained, no script");
}
/// Runs `scenario` in a lab named `name` and saves its report.
fn lab_report(scenario: &str, name: &str, dir: &Path) -> PathBuf {
    let save = dir.join(format!("{name}.json"));
    let out = Command::new(prober())
        .args(["lab", "run", "--scenario"])
        .arg(root().join(scenario))
        .args(["--name", &crate::common::lab_name(name), "--state-dir"])
        .arg(dir.join("state"))
        .arg("--agent-bin")
        .arg(agent())
        .arg("--save")
        .arg(&save)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    save
}

#[test]
fn lab_reports_diff_export_and_render() {
    if !require_root() {
        return;
    }
    let dir = tmp("prober-sched-lab-");
    let healthy = lab_report("tests/scenarios/healthy.yaml", "sh", dir.path());
    let broken = lab_report("tests/scenarios/flannel-8472.yaml", "sb", dir.path());
    check_diff(&healthy, &broken);
    if let Some(promtool) = tool("promtool", SCHED_DEPS) {
        for r in [&healthy, &broken] {
            let text = promtool_accepts(&promtool, r);
            assert!(text.contains("prober_probes{path=\"overlay\""), "{text}");
        }
    }
    if let Some(chromium) = tool("chromium", SCHED_DEPS) {
        let html = html_of(&broken, dir.path());
        let dom = chromium_dom(&chromium, &html);
        for node in ["n1", "n2", "n3"] {
            assert!(
                dom.contains(&format!("<th scope=\"row\">{node}</th>")),
                "{node}"
            );
        }
        // n1's pod cannot reach n3's: the failing cell, with the outcome on hover.
        assert!(
            dom.contains("<td class=\"timeout\" title=\"n1 \u{2192} n3: tcp/9917 timeout"),
            "{dom}"
        );
        assert!(dom.contains("data-kind=\"firewall-gap\""));
        let findings = dom.find("id=\"findings\"").unwrap();
        assert!(
            findings < dom.find("id=\"paths\"").unwrap(),
            "findings first"
        );
    }
}
