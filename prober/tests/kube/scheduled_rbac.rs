//! The scheduled mode's RBAC: every request of `matrix --use-existing --remember` is allowed to
//! the `CronJob`'s `ServiceAccount` by what `prober manifests --scheduled` renders.

use std::path::PathBuf;

use crate::discover::*;
use crate::rbac::*;
use prober::runtime::kube::discover::{build, read};
use serde_json::json;
use test_kit::mock::{Seen, respond, serve, split, status};

/// A report with one error finding: a scheduled run that has something to announce.
pub(crate) fn report_with_a_gap() -> prober::report::Report {
    prober::report::Report::from_json(
        &json!({
            "schema": "prober.report/v1", "results": [], "agents": [],
            "findings": [{"kind": "firewall-gap", "severity": "error",
                          "summary": "udp/8472 is blocked between w1 and every other node",
                          "evidence": [], "consequences": [], "protocol": "udp", "port": 8472,
                          "from": ["w1"], "to": ["cp1"], "direction": "both", "where": "network"}],
            "summary": {"total": 0, "ok": 0, "failed": 0, "unknown": 0, "nodes": 2, "agents": 4,
                        "agentsMissing": 0, "durationMillis": 10, "interrupted": false,
                        "byPath": {}, "exitCode": 1}
        })
        .to_string(),
    )
    .unwrap()
}

/// One scheduled run against `flavour`, in the order `prober matrix --use-existing --remember`
/// makes its calls: discovery, the permanent-agents check, recall the remembered report, wait
/// for the agents, exec, then the Events and the remembered report (`first`: none yet, so the
/// replace fails and it is created; else it is replaced).
pub(crate) async fn scheduled_mode(flavour: &'static str, first: bool) -> Vec<Seen> {
    use base64::Engine as _;
    use prober::report::remembered;
    use prober::runtime::kube::deploy;
    use prober::runtime::kube::manifests::AgentSpec;
    const CM: &str = "/api/v1/namespaces/prober-system/configmaps/prober-last-report";
    let remembered_cm = {
        let (gz, _) = remembered::Remembered::of(&report_with_a_gap(), 1)
            .encode(remembered::BUDGET)
            .unwrap();
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "prober-last-report", "namespace": "prober-system"},
               "binaryData": {"report.json.gz": base64::engine::general_purpose::STANDARD.encode(&gz)}})
    };
    let (client, server) = serve(Box::new(move |s| {
        let (path, _) = split(&s.uri);
        match (s.method.as_str(), path.as_str()) {
            ("GET" | "PUT", CM) if first => return status(404, "NotFound"),
            ("GET", CM) => return respond(200, &remembered_cm),
            ("PUT", CM) => return respond(200, &s.body),
            (
                "POST",
                "/api/v1/namespaces/prober-system/configmaps"
                | "/api/v1/namespaces/prober-system/events",
            ) => return respond(201, &s.body),
            _ => {}
        }
        existing_answer(flavour, s)
    }));
    let raw = read(&client).await.unwrap();
    build(&raw).unwrap();
    assert!(deploy::permanent(&client, "prober-system").await.unwrap());
    let previous = remembered::recall(&client, "prober-system").await.unwrap();
    assert_eq!(previous.is_none(), first);
    let spec = AgentSpec::default();
    let (ready, _) = deploy::wait(
        &client,
        &spec,
        &crate::wait::nodes(),
        std::time::Duration::from_secs(30),
        &|_, _| {},
    )
    .await
    .unwrap();
    exec_once(&client, ready).await;
    // First run: the gap is new (an Event); next run: it is resolved (an Event).
    let report = if first {
        report_with_a_gap()
    } else {
        let mut r = report_with_a_gap();
        r.findings.clear();
        r
    };
    let changes = remembered::remember(&client, "prober-system", previous.as_ref(), &report, 2)
        .await
        .unwrap();
    assert_eq!(changes.events, 1);
    drop(client);
    server.await.unwrap()
}

#[tokio::test]
async fn scheduled_rbac_allows_every_request_of_a_scheduled_run() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_prober"))
        .args(["manifests", "--scheduled"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut rendered = String::from_utf8(out.stdout).unwrap();
    // With the optional bindings for the namespaces some clusters have (they name the
    // scheduled ServiceAccount too).
    let optional = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/base/optional");
    let mut extra: Vec<PathBuf> = std::fs::read_dir(optional)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    extra.sort();
    for f in extra {
        rendered.push_str("\n---\n");
        rendered.push_str(&std::fs::read_to_string(f).unwrap());
    }
    let rbac = Rbac::of(&rendered, "prober-scheduled");
    let mut seen = Vec::new();
    for flavour in FLAVOURS {
        seen.extend(scheduled_mode(flavour, true).await);
    }
    seen.extend(scheduled_mode("flannel", false).await);
    seen.extend(typha_in_kube_system().await);
    let used = grants_used(&rbac, &seen, "deploy/scheduled");
    // The scheduled Role is its own: every grant in it is used. (The base's read-only roles it
    // is bound to are checked for use by the test above.)
    let unused: Vec<String> = rbac
        .grants
        .iter()
        .filter(|g| g.from.contains("prober-scheduled") && !used.contains(*g))
        .map(|g| {
            format!(
                "{} {}/{} {:?} ({})",
                g.verb, g.group, g.resource, g.name, g.from
            )
        })
        .collect();
    assert!(
        unused.is_empty(),
        "granted but never used:\n{}",
        unused.join("\n")
    );
    // It never creates, changes or deletes an agent.
    assert!(
        !rbac.grants.iter().any(|g| matches!(
            g.resource.as_str(),
            "daemonsets" | "serviceaccounts" | "namespaces"
        ) && !matches!(g.verb.as_str(), "get" | "list" | "watch")),
        "the scheduled run changes no agent"
    );
}
