//! `prober preflight` in the lab: the preflight scenarios pass `prober lab run`, and an operator's
//! run — the candidate reached through `ip netns exec`, the cluster from the lab's inventory —
//! exits 0 on a healthy join and 1 with exactly the gap, one way, toward the candidate.
//! Needs root, iproute2, nftables and dnsmasq (installed by scripts/test).

mod common;

use common::{StateDir, agent, lab, netns_available, prober, root, text};

use std::process::Command;

fn scenario(name: &str) -> String {
    root()
        .join("tests/scenarios/preflight")
        .join(format!("{name}.yaml"))
        .display()
        .to_string()
}

#[test]
fn preflight_scenarios_pass_lab_run() {
    if !netns_available() {
        return;
    }
    let state = StateDir::new("run");
    let mut failed = Vec::new();
    for (name, must_say) in [
        (
            "healthy-join",
            "nodes -> new   udp/8472 (overlay)   n1 ok, n2 ok, n3 ok",
        ),
        (
            "overlay-dropped-to-candidate",
            "[FAIL] nodes -> new   udp/8472",
        ),
        (
            "port-in-use",
            "tcp/10250 is already in use on new by \"probe-pod\"",
        ),
        (
            "kubelet-rejected-from-control-plane",
            "tcp/10250 (the kubelet) is blocked from n1 to new",
        ),
        (
            "control-plane-etcd-blocked",
            "[FAIL] nodes -> new   tcp/2380",
        ),
    ] {
        let out = lab(
            &["run", "--name", "pfr", "--scenario", &scenario(name)],
            &state,
        );
        let t = text(&out);
        if out.status.code() != Some(0) || !t.contains(must_say) {
            failed.push(format!(
                "{name}: {:?}, missing {must_say:?}\n{t}",
                out.status
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

/// `prober preflight` as an operator runs it, against a lab that is up; the JSON report.
fn operator_run(state: &StateDir, lab_name: &str) -> (Option<i32>, serde_json::Value, String) {
    let inventory = state
        .0
        .join(format!("plab-{lab_name}"))
        .join("inventory.yaml");
    let out = Command::new(prober())
        .args(["preflight", "--inventory"])
        .arg(&inventory)
        .args([
            "--candidate",
            "new",
            "--candidate-address",
            "192.168.57.249",
            "--candidate-exec",
            &format!("ip netns exec plab-{lab_name}-new"),
            "--agent-bin",
        ])
        .arg(agent())
        .args(["-o", "json"])
        .output()
        .unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out.status.code(), json, text(&out))
}

fn up(state: &StateDir, name: &str, file: &str) {
    let out = lab(
        &["up", "--name", name, "--scenario", &scenario(file)],
        state,
    );
    assert!(out.status.success(), "lab up {file}: {}", text(&out));
}

fn down(state: &StateDir, name: &str) {
    let out = lab(&["down", name], state);
    assert!(out.status.success(), "lab down {name}: {}", text(&out));
}

fn findings(report: &serde_json::Value) -> Vec<&serde_json::Value> {
    report["findings"]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

#[test]
fn an_operator_run_names_the_gap_one_way_toward_the_candidate() {
    if !netns_available() {
        return;
    }
    let state = StateDir::new("op");
    up(&state, "pfo", "healthy-join");
    let (code, report, t) = operator_run(&state, "pfo");
    // The stand-ins are gone when the run ends: nothing listens on the candidate any more.
    let ss = Command::new("ip")
        .args(["netns", "exec", "plab-pfo-new", "ss", "-Hltun"])
        .output()
        .unwrap();
    down(&state, "pfo");
    let listening = String::from_utf8_lossy(&ss.stdout).to_string();
    assert!(
        ss.status.success() && listening.trim().is_empty(),
        "still listening: {listening}"
    );
    assert_eq!(code, Some(0), "{t}");
    assert_eq!(report["preflight"]["candidate"], "new", "{t}");
    assert!(findings(&report).is_empty(), "{t}");
    // Every required port both ways: the candidate to n1..n3 and n1..n3 to the candidate.
    let results = report["results"].as_array().unwrap();
    let to_new = results.iter().filter(|r| r["to"]["node"] == "new").count();
    let from_new = results
        .iter()
        .filter(|r| r["from"]["node"] == "new")
        .count();
    assert_eq!((from_new, to_new), (3 + 3 + 1, 3 + 3), "{t}");

    up(&state, "pfo", "overlay-dropped-to-candidate");
    let (code, report, t) = operator_run(&state, "pfo");
    down(&state, "pfo");
    assert_eq!(code, Some(1), "{t}");
    let f = findings(&report);
    assert_eq!(
        f.len(),
        1,
        "one finding and nothing else called broken: {t}"
    );
    assert_eq!(f[0]["kind"], "firewall-gap");
    assert_eq!(f[0]["port"], 8472);
    assert_eq!(f[0]["direction"], "one");
    assert_eq!(f[0]["to"], serde_json::json!(["new"]));
    assert_eq!(f[0]["where"], "network");
}
