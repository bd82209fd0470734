//! Synthetic reports of any size, written to files, and the `prober` binary.

use crate::common::prober;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

pub(crate) fn tmp(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(prefix).tempdir().unwrap()
}

/// A report of `nodes` nodes: pod-to-pod and node-to-node between every pair, the `kubernetes`
/// Service from every pod; every path through `cut`'s VXLAN port timed out, with the firewall
/// gap the diagnosis names for it.
pub(crate) fn synthetic(nodes: usize, cut: Option<&str>) -> Value {
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

pub(crate) fn write_report(dir: &Path, name: &str, report: &Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_string_pretty(report).unwrap()).unwrap();
    p
}

pub(crate) fn run(args: &[&str]) -> Output {
    Command::new(prober())
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}
