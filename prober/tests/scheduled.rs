//! The scheduled mode: the remembered report and Events against a `tower_test` mock API server
//! (the exact requests), `prober diff`, `-o prometheus` checked by `promtool` and pushed to a real
//! Pushgateway on loopback, `-o html` rendered by headless Chromium, and `manifests --scheduled`
//! against `kubectl kustomize`. Lab reports where a lab can be built (root, under the netns lock),
//! synthetic reports of any size otherwise.

mod common;

use common::gateway::{Pushgateway, get, tool};
use common::{agent, netns_available, prober, root, text};

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use http::{Method, Request, Response};
use http_body_util::BodyExt;
use kube::client::Body;
use prober::report::Report;
use prober::report::remembered::{self, Remembered};
use serde_json::{Value, json};

fn tmp(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(prefix).tempdir().unwrap()
}

/// A report of `nodes` nodes: pod-to-pod and node-to-node between every pair, the `kubernetes`
/// Service from every pod; every path through `cut`'s VXLAN port timed out, with the firewall
/// gap the diagnosis names for it.
fn synthetic(nodes: usize, cut: Option<&str>) -> Value {
    let names: Vec<String> = (1..=nodes).map(|i| format!("n{i}")).collect();
    let ip = |i: usize, pod: bool| {
        if pod {
            format!("10.{}.{}.2", 244 + i / 250, i % 250)
        } else {
            format!("192.168.{}.{}", 56 + i / 200, 10 + i % 200)
        }
    };
    let mut results = Vec::new();
    let (mut ok, mut failed) = (0, 0);
    for (i, from) in names.iter().enumerate() {
        for (j, to) in names.iter().enumerate() {
            if i == j {
                continue;
            }
            for (path, fa, ta, port) in [
                ("pod-to-pod", "pod", "pod", 9917),
                ("node-to-node", "host", "host", 10250),
            ] {
                let broken = path == "pod-to-pod" && cut.is_some_and(|c| (from == c) != (to == c));
                let mut r = json!({
                    "path": path, "from": {"node": from, "agent": fa},
                    "to": {"node": to, "agent": ta, "address": ip(j, fa == "pod"), "port": port, "protocol": "tcp"},
                    "id": format!("{path}:{from}/{fa}->{to}/{ta}:tcp/{port}"),
                });
                if broken {
                    r["outcome"] = json!("timeout");
                    r["detail"] = json!(format!(
                        "tcp connect {}:{port}: no answer within 2000 ms",
                        ip(j, true)
                    ));
                    failed += 1;
                } else {
                    r["outcome"] = json!("ok");
                    r["rttMicros"] = json!(150 + (i * 7 + j * 13) % 900);
                    r["detail"] = json!("connected");
                    ok += 1;
                }
                results.push(r);
            }
        }
        results.push(json!({
            "path": "pod-to-service", "from": {"node": from, "agent": "pod"},
            "to": {"service": "kubernetes", "address": "10.96.0.1", "port": 443, "protocol": "tcp"},
            "id": format!("pod-to-service:{from}/pod->svc/kubernetes:tls/443"),
            "outcome": "ok", "rttMicros": 900, "detail": "HTTP 200",
        }));
        ok += 1;
    }
    let findings: Vec<Value> = cut
        .map(|c| {
            vec![json!({
                "kind": "firewall-gap", "severity": "error",
                "summary": format!("udp/8472 (the overlay's VXLAN port) is blocked between {c} and every other node, in both directions"),
                "evidence": [], "consequences": [], "protocol": "udp", "port": 8472,
                "from": [c], "to": names.iter().filter(|n| *n != c).collect::<Vec<_>>(),
                "direction": "both", "where": "network",
            })]
        })
        .unwrap_or_default();
    let agents: Vec<Value> = names
        .iter()
        .flat_map(|n| {
            [
                json!({"node": n, "agent": "host", "ran": true}),
                json!({"node": n, "agent": "pod", "ran": true}),
            ]
        })
        .collect();
    let mut by_path = serde_json::Map::new();
    for r in &results {
        let entry = by_path
            .entry(r["path"].as_str().unwrap())
            .or_insert_with(|| json!({"total": 0, "ok": 0, "failed": 0, "unknown": 0}));
        let outcome = if r["outcome"] == "ok" { "ok" } else { "failed" };
        for key in ["total", outcome] {
            entry[key] = json!(entry[key].as_u64().unwrap() + 1);
        }
    }
    json!({
        "schema": "prober.report/v1", "results": results, "findings": findings, "agents": agents,
        "summary": {"total": ok + failed, "ok": ok, "failed": failed, "unknown": 0, "nodes": nodes,
                    "agents": nodes * 2, "agentsMissing": 0, "durationMillis": 1500, "interrupted": false,
                    "byPath": by_path, "exitCode": u8::from(failed > 0)}
    })
}

fn write_report(dir: &Path, name: &str, report: &Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_string_pretty(report).unwrap()).unwrap();
    p
}

fn run(args: &[&str]) -> Output {
    Command::new(prober())
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// The CronJob's path against a mock API server.

/// One expected request: method, URI, the answer's status and body. Returns the request bodies.
type Exchange = (Method, &'static str, u16, Value);

async fn serve(
    mut handle: tower_test::mock::Handle<Request<Body>, Response<Body>>,
    script: Vec<Exchange>,
) -> Vec<Value> {
    let mut bodies = Vec::new();
    for (method, uri, status, answer) in script {
        let (request, send) = handle
            .next_request()
            .await
            .unwrap_or_else(|| panic!("fewer requests than expected: wanted {method} {uri}"));
        assert_eq!(
            (request.method().clone(), request.uri().to_string()),
            (method, uri.to_string()),
            "unexpected request"
        );
        let bytes = request.into_body().collect().await.unwrap().to_bytes();
        let body: Value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap()
        };
        // Created objects come back as sent.
        let answer = if answer == json!("echo") {
            body.clone()
        } else {
            answer
        };
        bodies.push(body);
        send.send_response(
            Response::builder()
                .status(status)
                .body(Body::from(answer.to_string().into_bytes()))
                .unwrap(),
        );
    }
    assert!(
        handle.next_request().await.is_none(),
        "more requests than expected"
    );
    bodies
}

fn not_found(what: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": format!("configmaps \"{what}\" not found"), "reason": "NotFound", "code": 404})
}

const CM: &str = "/api/v1/namespaces/prober-system/configmaps/prober-last-report";
const CM_PUT: &str = "/api/v1/namespaces/prober-system/configmaps/prober-last-report?";
const CMS: &str = "/api/v1/namespaces/prober-system/configmaps?";
const EVENTS: &str = "/api/v1/namespaces/prober-system/events?";

fn report(v: &Value) -> Report {
    Report::from_json(&v.to_string()).unwrap()
}

fn stored(body: &Value) -> Remembered {
    let b64 = body["binaryData"]["report.json.gz"].as_str().unwrap();
    let gz = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    Remembered::decode(&gz).unwrap()
}

#[tokio::test]
async fn first_run_announces_what_it_found_and_creates_the_memory() {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(service, "default");
    let server = tokio::spawn(serve(
        handle,
        vec![
            (Method::GET, CM, 404, not_found("prober-last-report")),
            (Method::PUT, CM_PUT, 404, not_found("prober-last-report")),
            (Method::POST, CMS, 201, json!("echo")),
            (Method::POST, EVENTS, 201, json!("echo")),
        ],
    ));
    let previous = remembered::recall(&client, "prober-system").await.unwrap();
    assert!(previous.is_none(), "no ConfigMap: a first run");
    let broken = report(&synthetic(3, Some("n3")));
    let changes = remembered::remember(&client, "prober-system", None, &broken, 1_700_000_000)
        .await
        .unwrap();
    drop(client);
    let bodies = server.await.unwrap();
    assert!(changes.first_run);
    assert_eq!((changes.new, changes.new_errors, changes.events), (1, 1, 1));
    let event = &bodies[3];
    assert_eq!(event["reason"], "FirewallGap");
    assert_eq!(event["type"], "Warning");
    assert_legacy_namespace_rule(event);
    assert_eq!(event["involvedObject"]["kind"], "ConfigMap");
    assert_eq!(event["involvedObject"]["name"], "prober-last-report");
    assert!(event["message"].as_str().unwrap().contains("udp/8472"));
    // The same ConfigMap is tried for replacement, then created.
    assert_eq!(bodies[1], bodies[2]);
    assert_eq!(bodies[2]["metadata"]["name"], "prober-last-report");
    let kept = stored(&bodies[2]);
    assert_eq!(kept.findings.len(), 1);
    assert_eq!(kept.findings[0].facts().port(), Some(8472));
    assert_eq!(kept.finished, 1_700_000_000);
    assert!(
        bodies[2]["data"]["summary.json"]
            .as_str()
            .unwrap()
            .contains("\"exitCode\": 1")
    );
}

/// `legacyValidateEvent` (kubernetes/kubernetes `pkg/apis/core/validation/events.go`): a
/// core/v1 event without `eventTime` about an object without a namespace may only be in "" or
/// "default"; otherwise its namespace must be its involved object's. The API server answers
/// 422 to anything else.
fn assert_legacy_namespace_rule(event: &Value) {
    assert!(event.get("eventTime").is_none_or(Value::is_null));
    let ns = event["metadata"]["namespace"].as_str().unwrap_or_default();
    match event["involvedObject"]["namespace"]
        .as_str()
        .unwrap_or_default()
    {
        "" => assert!(ns.is_empty() || ns == "default", "422: {event}"),
        involved => assert_eq!(ns, involved, "422: {event}"),
    }
}

#[tokio::test]
async fn refused_events_are_a_warning_and_the_run_is_remembered_all_the_same() {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(service, "default");
    let invalid = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Event \"prober-x\" is invalid: involvedObject.namespace: Invalid value: \"\": does not match event.namespace",
        "reason": "Invalid", "code": 422});
    let server = tokio::spawn(serve(
        handle,
        vec![
            (Method::PUT, CM_PUT, 404, not_found("prober-last-report")),
            (Method::POST, CMS, 201, json!("echo")),
            (Method::POST, EVENTS, 422, invalid),
        ],
    ));
    let broken = report(&synthetic(3, Some("n3")));
    let changes = remembered::remember(&client, "prober-system", None, &broken, 5)
        .await
        .expect("the memory is written although the Events were refused");
    drop(client);
    let bodies = server.await.unwrap();
    assert_eq!(stored(&bodies[1]).finished, 5, "remembered");
    assert_eq!(changes.events, 0);
    let why = changes.events_error.expect("the refusal is said");
    assert!(
        why.contains("FirewallGap") && why.contains("does not match"),
        "{why}"
    );
}

/// The `ConfigMap` a run at `at` leaves behind, remembering `report`.
fn remembered_configmap(report: &Report, at: u64) -> Value {
    let (gz, _) = Remembered::of(report, at)
        .encode(remembered::BUDGET)
        .unwrap();
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "prober-last-report", "namespace": "prober-system"},
           "binaryData": {"report.json.gz": base64::engine::general_purpose::STANDARD.encode(&gz)}})
}

#[tokio::test]
async fn next_run_diffs_against_the_memory_and_announces_the_resolution() {
    let broken = report(&synthetic(3, Some("n3")));
    let cm = remembered_configmap(&broken, 1_700_000_000);
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(service, "default");
    let server = tokio::spawn(serve(
        handle,
        vec![
            (Method::GET, CM, 200, cm),
            (Method::PUT, CM_PUT, 200, json!("echo")),
            (Method::POST, EVENTS, 201, json!("echo")),
        ],
    ));
    let previous = remembered::recall(&client, "prober-system")
        .await
        .unwrap()
        .expect("the remembered run");
    assert_eq!(previous.findings.len(), 1);
    let healthy = report(&synthetic(3, None));
    let changes = remembered::remember(
        &client,
        "prober-system",
        Some(&previous),
        &healthy,
        1_700_000_900,
    )
    .await
    .unwrap();
    drop(client);
    let bodies = server.await.unwrap();
    assert_eq!(
        (
            changes.first_run,
            changes.new,
            changes.resolved,
            changes.events
        ),
        (false, 0, 1, 1)
    );
    assert_eq!(bodies[2]["reason"], "FirewallGapResolved");
    assert_eq!(bodies[2]["type"], "Normal");
    let kept = stored(&bodies[1]);
    assert!(kept.findings.is_empty());
    assert_eq!(kept.finished, 1_700_000_900);
}

#[tokio::test]
async fn an_unchanged_run_emits_nothing_and_the_memory_stays_bounded() {
    // 120 nodes, one gap: a persisting finding, no event; the memory well under 1 MiB.
    let broken = report(&synthetic(120, Some("n17")));
    let cm = remembered_configmap(&broken, 1);
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(service, "default");
    let server = tokio::spawn(serve(
        handle,
        vec![
            (Method::GET, CM, 200, cm),
            (Method::PUT, CM_PUT, 200, json!("echo")),
        ],
    ));
    let previous = remembered::recall(&client, "prober-system").await.unwrap();
    let changes = remembered::remember(&client, "prober-system", previous.as_ref(), &broken, 2)
        .await
        .unwrap();
    drop(client);
    let bodies = server.await.unwrap();
    assert_eq!((changes.new, changes.persisting, changes.events), (0, 1, 0));
    let size = bodies[1].to_string().len();
    assert!(
        size < 64 * 1024,
        "the ConfigMap for 120 nodes is {size} bytes"
    );
}

#[tokio::test]
async fn a_gap_that_grew_with_the_cluster_persists_and_is_never_resolved() {
    // Remembered: 3 nodes, n3 cut off. Today: 20 nodes, the same gap now reaching n4..n20.
    let three = report(&synthetic(3, Some("n3")));
    let cm = remembered_configmap(&three, 1);
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(service, "default");
    let server = tokio::spawn(serve(
        handle,
        vec![
            (Method::GET, CM, 200, cm),
            (Method::PUT, CM_PUT, 200, json!("echo")),
            (Method::POST, EVENTS, 201, json!("echo")),
        ],
    ));
    let previous = remembered::recall(&client, "prober-system").await.unwrap();
    let twenty = report(&synthetic(20, Some("n3")));
    let changes = remembered::remember(&client, "prober-system", previous.as_ref(), &twenty, 2)
        .await
        .unwrap();
    drop(client);
    let bodies = server.await.unwrap();
    assert_eq!(
        (changes.new, changes.resolved, changes.persisting),
        (0, 0, 1)
    );
    // One warning that it spread; no "...Resolved" for a problem still there.
    assert_eq!(bodies[2]["reason"], "FirewallGapSpread");
    assert_eq!(bodies[2]["type"], "Warning");
    assert!(
        bodies[2]["message"]
            .as_str()
            .unwrap()
            .contains("now also n4"),
        "{}",
        bodies[2]
    );
}

#[tokio::test]
async fn an_interrupted_scheduled_run_neither_announces_nor_replaces_the_memory() {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(service, "default");
    // Not one request: no Event, no ConfigMap written.
    let server = tokio::spawn(serve(handle, vec![]));
    let broken = report(&synthetic(3, Some("n3")));
    let previous = Remembered::of(&broken, 1);
    let mut cut = synthetic(3, None);
    cut["summary"]["interrupted"] = json!(true);
    cut["summary"]["exitCode"] = json!(130);
    let err = remembered::remember(&client, "prober-system", Some(&previous), &report(&cut), 2)
        .await
        .expect_err("an interrupted run is not remembered");
    assert!(err.to_string().contains("interrupted"), "{err}");
    drop(client);
    assert!(server.await.unwrap().is_empty());
}

#[test]
fn diff_of_a_grown_cluster_keeps_the_gap_persisting() {
    let dir = tmp("prober-diff-grown-");
    let three = write_report(dir.path(), "three.json", &synthetic(3, Some("n3")));
    let twenty = write_report(dir.path(), "twenty.json", &synthetic(20, Some("n3")));
    let out = run(&[
        "diff",
        three.to_str().unwrap(),
        twenty.to_str().unwrap(),
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["new"], json!([]), "{v}");
    assert_eq!(v["resolved"], json!([]), "{v}");
    assert_eq!(v["persisting"][0]["kind"], "firewall-gap");
    assert_eq!(v["persisting"][0]["nowAlso"][0], "n4");
    let table = run(&["diff", three.to_str().unwrap(), twenty.to_str().unwrap()]);
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains("new (0):\nresolved (0):\npersisting (1):"),
        "{table}"
    );
    assert!(
        table.contains("(now also n4, n5, n6, n7, n8 and 12 more)"),
        "{table}"
    );
}

// ---------------------------------------------------------------------------------------------
// prober diff, -o prometheus, --pushgateway, -o html, --log-format json on synthetic reports.

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
    let Some(promtool) = tool("promtool") else {
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
    let Some(bin) = tool("prometheus-pushgateway") else {
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
    let Some(chromium) = tool("chromium") else {
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

// ---------------------------------------------------------------------------------------------
// Lab reports: healthy and the flannel-8472 incident, built in network namespaces.

/// Runs `scenario` in a lab named `name` and saves its report.
fn lab_report(scenario: &str, name: &str, dir: &Path) -> PathBuf {
    let save = dir.join(format!("{name}.json"));
    let out = Command::new(prober())
        .args(["lab", "run", "--scenario"])
        .arg(root().join(scenario))
        .args(["--name", &common::lab_name(name), "--state-dir"])
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
    if !netns_available() {
        return;
    }
    let dir = tmp("prober-sched-lab-");
    let healthy = lab_report("tests/scenarios/healthy.yaml", "sh", dir.path());
    let broken = lab_report("tests/scenarios/flannel-8472.yaml", "sb", dir.path());
    check_diff(&healthy, &broken);
    if let Some(promtool) = tool("promtool") {
        for r in [&healthy, &broken] {
            let text = promtool_accepts(&promtool, r);
            assert!(text.contains("prober_probes{path=\"overlay\""), "{text}");
        }
    }
    if let Some(chromium) = tool("chromium") {
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

// ---------------------------------------------------------------------------------------------
// deploy/scheduled.

fn docs(text: &str) -> Vec<Value> {
    text.split("\n---")
        .map(|d| d.trim_start_matches("---").trim())
        .filter(|d| !d.is_empty())
        .map(|d| serde_saphyr::from_str(d).unwrap_or_else(|e| panic!("not YAML: {e}\n{d}")))
        .collect()
}

/// Whether `v` survives a round trip through its Kubernetes type unchanged: a field the schema
/// does not know is dropped on the way, and the comparison fails.
fn strict<K: serde::de::DeserializeOwned + serde::Serialize>(v: &Value) {
    let typed: K = serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{e}: {v}"));
    assert_eq!(
        &serde_json::to_value(typed).unwrap(),
        v,
        "fields the schema does not know"
    );
}

/// `yaml` validates with `kubernetes-validate --strict` against Kubernetes 1.30 to 1.34 (every
/// field known to the schema), as deploy/base does in tests/manifests.rs.
fn validate_strictly(yaml: &str) {
    let Some(validate) = tool("kubernetes-validate") else {
        return;
    };
    let dir = tmp("prober-sched-validate-");
    let file = dir.path().join("scheduled.yaml");
    std::fs::write(&file, yaml).unwrap();
    // The validator can fail: an unknown field is refused.
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: x\nspec:\n  schedule: '* * * * *'\n  bogus: 1\n  jobTemplate: {spec: {template: {spec: {containers: [{name: c, image: i}]}}}}\n",
    )
    .unwrap();
    let refused = Command::new(&validate)
        .args(["--strict", "--quiet", "-k", "1.30.0"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(
        !refused.status.success(),
        "kubernetes-validate accepted an unknown field"
    );
    for version in ["1.30.0", "1.31.0", "1.32.0", "1.33.0", "1.34.0"] {
        let out = Command::new(&validate)
            .args(["--strict", "--quiet", "-k", version])
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "deploy/scheduled does not validate against Kubernetes {version}: {}",
            text(&out)
        );
    }
}

#[test]
fn manifests_scheduled_is_the_overlay_and_valid() {
    use k8s_openapi::api::apps::v1::DaemonSet;
    use k8s_openapi::api::batch::v1::CronJob;
    use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};

    let out = run(&["manifests", "--scheduled"]);
    assert!(out.status.success(), "{}", text(&out));
    let printed = String::from_utf8(out.stdout).unwrap();
    let objects = docs(&printed);
    for o in &objects {
        match o["kind"].as_str().unwrap() {
            "Namespace" => strict::<Namespace>(o),
            "ServiceAccount" => strict::<ServiceAccount>(o),
            "Role" => strict::<Role>(o),
            "ClusterRole" => strict::<ClusterRole>(o),
            "RoleBinding" => strict::<RoleBinding>(o),
            "ClusterRoleBinding" => strict::<ClusterRoleBinding>(o),
            "CronJob" => strict::<CronJob>(o),
            "DaemonSet" => strict::<DaemonSet>(o),
            other => panic!("unexpected kind {other}"),
        }
    }
    let ns = &objects[0];
    assert_eq!(
        ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "privileged"
    );
    let cron = objects.iter().find(|o| o["kind"] == "CronJob").unwrap();
    assert_eq!(cron["spec"]["concurrencyPolicy"], "Forbid");
    let job = &cron["spec"]["jobTemplate"]["spec"];
    assert!(job["activeDeadlineSeconds"].as_u64().unwrap() > 0);
    assert!(cron["spec"]["successfulJobsHistoryLimit"].is_u64());
    assert!(cron["spec"]["failedJobsHistoryLimit"].is_u64());
    let pod = &job["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "prober-scheduled");
    let args: Vec<&str> = pod["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(&args[..3], ["matrix", "--use-existing", "--remember"]);
    // Its RBAC: prober/tests/kube.rs (scheduled_rbac_allows_every_request_of_a_scheduled_run)
    // replays every request of a scheduled run against these rules. Here: what it is bound to
    // exists in what is printed, so no binding points at a missing role.
    for b in objects
        .iter()
        .filter(|o| o["kind"] == "RoleBinding" || o["kind"] == "ClusterRoleBinding")
    {
        let (kind, name) = (&b["roleRef"]["kind"], &b["roleRef"]["name"]);
        assert!(
            objects.iter().any(|o| &o["kind"] == kind
                && &o["metadata"]["name"] == name
                && (kind == "ClusterRole"
                    || o["metadata"]["namespace"] == b["metadata"]["namespace"])),
            "{} {} in {} binds {kind} {name}, which deploy/scheduled does not hold",
            b["kind"],
            b["metadata"]["name"],
            b["metadata"]["namespace"]
        );
    }
    validate_strictly(&printed);
    let Some(kubectl) = tool("kubectl") else {
        return;
    };
    let rendered = Command::new(kubectl)
        .arg("kustomize")
        .arg(root().join("deploy/scheduled"))
        .output()
        .unwrap();
    assert!(rendered.status.success(), "{}", text(&rendered));
    assert_eq!(
        printed,
        String::from_utf8(rendered.stdout).unwrap(),
        "`prober manifests --scheduled` differs from `kubectl kustomize deploy/scheduled`"
    );
}
