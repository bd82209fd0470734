//! The `CronJob`'s path against a mock API server: the remembered report and the Events, the
//! exact requests.

use crate::common::text;
use crate::kit::*;

use base64::Engine as _;
use http::Method;
use prober::report::Report;
use prober::report::remembered::{self, Remembered};
use serde_json::{Value, json};
use test_kit::mock::scripted;

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
    let (client, server) = scripted(vec![
        (Method::GET, CM, 404, not_found("prober-last-report")),
        (Method::PUT, CM_PUT, 404, not_found("prober-last-report")),
        (Method::POST, CMS, 201, json!("echo")),
        (Method::POST, EVENTS, 201, json!("echo")),
    ]);
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
    let invalid = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Event \"prober-x\" is invalid: involvedObject.namespace: Invalid value: \"\": does not match event.namespace",
        "reason": "Invalid", "code": 422});
    let (client, server) = scripted(vec![
        (Method::PUT, CM_PUT, 404, not_found("prober-last-report")),
        (Method::POST, CMS, 201, json!("echo")),
        (Method::POST, EVENTS, 422, invalid),
    ]);
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
    let (client, server) = scripted(vec![
        (Method::GET, CM, 200, cm),
        (Method::PUT, CM_PUT, 200, json!("echo")),
        (Method::POST, EVENTS, 201, json!("echo")),
    ]);
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
    let (client, server) = scripted(vec![
        (Method::GET, CM, 200, cm),
        (Method::PUT, CM_PUT, 200, json!("echo")),
    ]);
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
    let (client, server) = scripted(vec![
        (Method::GET, CM, 200, cm),
        (Method::PUT, CM_PUT, 200, json!("echo")),
        (Method::POST, EVENTS, 201, json!("echo")),
    ]);
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
    // Not one request: no Event, no ConfigMap written.
    let (client, server) = scripted(vec![]);
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
    let (old, new) = (three.to_str().unwrap(), twenty.to_str().unwrap());
    let table = run(&["diff", old, new, "--width", "200"]);
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains("new (0):\nresolved (0):\npersisting (1):"),
        "{table}"
    );
    assert!(
        table.contains("(now also n4, n5, n6, n7, n8 and 12 more)"),
        "{table}"
    );
    // `--width` wraps the table as it does the matrix's.
    let narrow = run(&["diff", old, new, "--width", "60"]);
    let narrow = String::from_utf8_lossy(&narrow.stdout);
    assert!(narrow.lines().count() > table.lines().count(), "{narrow}");
    assert!(narrow.lines().all(|l| l.chars().count() <= 60), "{narrow}");
}
