//! Whole runs over labs: every format of a healthy lab, the flannel-8472 incident, missing
//! agents and the lab's own inventory.

use crate::common::{prober, require_root, text};
use crate::kit::*;

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

#[test]
fn healthy_lab_is_all_ok_in_every_format() {
    if !require_root() {
        return;
    }
    let lab = TestLab::up("mh", Some("tests/scenarios/healthy.yaml"));
    let saved = lab.state.join("saved.json");
    let out = matrix(
        &lab.inventory(),
        &["-o", "table", "--save", saved.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(table.starts_with("3 nodes, 6 agents: "), "{table}");
    assert!(table.contains(" 0 failed, 0 unknown"), "{table}");
    // Fix lines are commands to copy and are never cut; everything else fits 100 columns.
    for line in table.lines().filter(|l| !l.starts_with("  fix: ")) {
        assert!(
            line.chars().count() <= 100,
            "wider than 100 columns: {line:?}"
        );
    }
    assert!(
        table.contains("[warning] bootstrap-cycle: latent bootstrap cycle"),
        "{table}"
    );
    assert!(!table.contains('\x1b'), "no colour when not a terminal");
    for class in [
        "pod-to-pod",
        "node-to-pod",
        "pod-to-node",
        "node-to-node",
        "pod-to-service",
        "node-to-service",
        "pod-to-apiserver",
        "node-to-apiserver",
        "overlay",
        "dns",
    ] {
        assert!(
            table.contains(&format!("\n{class} (")),
            "no {class} grid:\n{table}"
        );
    }
    // The saved JSON validates, and `prober report` renders exactly the same table from it.
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    validate(&report);
    let results = report["results"].as_array().unwrap();
    let findings = report["findings"].as_array().map_or(0, Vec::len);
    assert!(results.len() > 60, "{}", results.len());
    assert!(
        results.iter().all(|r| r["outcome"] == "ok"),
        "{}",
        serde_json::to_string_pretty(&report["results"]).unwrap()
    );
    assert_eq!(report["summary"]["exitCode"], 0);
    let again = Command::new(prober())
        .arg("report")
        .arg(&saved)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&again.stdout),
        table,
        "re-rendered table differs"
    );
    let junit = Command::new(prober())
        .arg("report")
        .arg(&saved)
        .args(["-o", "junit"])
        .output()
        .unwrap();
    let xml = String::from_utf8_lossy(&junit.stdout);
    assert!(
        xml.starts_with("<?xml")
            && xml.contains(&format!(
                "tests=\"{}\" failures=\"0\"",
                results.len() + findings
            )),
        "{xml}"
    );
    assert_eq!(
        xml.matches("<testcase ").count(),
        results.len() + findings,
        "one test case per probe and per finding"
    );
}

#[test]
fn flannel_8472_fails_exactly_the_overlay_paths_of_the_firewalled_node() {
    if !require_root() {
        return;
    }
    let lab = TestLab::up("mf", Some("tests/scenarios/flannel-8472.yaml"));
    let out = matrix(&lab.inventory(), &["-o", "json"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    validate(&report);
    let mut failed = 0;
    for r in report["results"].as_array().unwrap() {
        let path = r["path"].as_str().unwrap();
        let from = r["from"]["node"].as_str().unwrap();
        let to = r["to"]["node"].as_str().unwrap_or("");
        let crosses_n3 = (from == "n3") != (to == "n3") && !to.is_empty();
        // Traffic that rides the overlay between n3 and another node: pod and node to pod, the
        // VXLAN checks, and DNS between n3's pod and the DNS pod (or its Service) on n1.
        let svc_dns_from_n3 = path == "dns" && from == "n3";
        // (overlay includes the full-size pod-to-pod packets)
        let overlay_path = matches!(path, "pod-to-pod" | "node-to-pod" | "overlay") && crosses_n3;
        let must_fail = overlay_path || svc_dns_from_n3;
        let outcome = r["outcome"].as_str().unwrap();
        if must_fail {
            failed += 1;
            assert_eq!(outcome, "timeout", "{}", serde_json::to_string(r).unwrap());
        } else {
            assert_eq!(
                outcome,
                "ok",
                "nothing else fails: {}",
                serde_json::to_string(r).unwrap()
            );
        }
    }
    assert_eq!(
        failed,
        4 + 4 + 12 + 8,
        "pod-to-pod 4, node-to-pod 4, overlay 8 + 4 full-size, dns 8 (two names, two servers, two transports)"
    );
    let findings = report["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{findings:#?}");
    assert_eq!(findings[0]["kind"], "firewall-gap");
    assert_eq!(findings[0]["where"], "network");
    let cited = findings[0]["evidence"].as_array().unwrap().len()
        + findings[0]["consequences"].as_array().unwrap().len();
    assert_eq!(
        cited, failed,
        "every failed result is evidence or a consequence of the gap"
    );
    let vx = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "overlay:n1/host->n3/host:vxlan/8472")
        .unwrap();
    assert!(
        vx["detail"].as_str().unwrap().contains("never reached n3"),
        "{vx}"
    );
    // Narrowed to the overlay, the run saw one port fail: it names that port, never a cut-off n3.
    let out = matrix(&lab.inventory(), &["-o", "json", "--paths", "overlay"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    validate(&report);
    let findings = report["findings"].as_array().unwrap();
    assert!(
        findings
            .iter()
            .all(|f| f["kind"] != "partition" && f["kind"] != "unexplained"),
        "{findings:#?}"
    );
    assert!(
        findings.iter().any(|f| f["kind"] == "firewall-gap"
            && f["protocol"] == "udp"
            && f["port"] == 8472
            && f["from"] == serde_json::json!(["n3"])),
        "{findings:#?}"
    );
}

#[test]
fn a_dead_responder_is_a_missing_agent_not_a_network_failure() {
    if !require_root() {
        return;
    }
    let lab = TestLab::up("dr", None);
    // Kill n3's pod agent's responder (`probe-pod serve`), leaving its namespace and network.
    let pids = Command::new("ip")
        .args(["netns", "pids", &format!("plab-{}-n3p0", lab.name)])
        .output()
        .unwrap();
    let mut killed = 0;
    for pid in String::from_utf8_lossy(&pids.stdout).split_whitespace() {
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmd).contains("serve") {
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid.parse().unwrap()),
                nix::sys::signal::Signal::SIGKILL,
            )
            .unwrap();
            killed += 1;
        }
    }
    assert_eq!(killed, 1, "one responder in n3's pod");
    std::thread::sleep(Duration::from_millis(200));
    let out = matrix(&lab.inventory(), &["-o", "json", "--paths", "pod-to-pod"]);
    assert_eq!(out.status.code(), Some(3), "partial: {}", text(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    validate(&report);
    assert_eq!(report["summary"]["failed"], 0, "{}", text(&out));
    assert!(report["summary"]["unknown"].as_u64().unwrap() >= 2);
    let missing: Vec<&Value> = report["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["ran"] == false)
        .collect();
    assert_eq!(missing.len(), 1, "{missing:?}");
    assert_eq!(missing[0]["node"], "n3");
    assert!(
        missing[0]["detail"]
            .as_str()
            .unwrap()
            .contains("does not answer its own probe"),
        "{}",
        missing[0]["detail"]
    );
    let kinds: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["agent-missing"], "{}", text(&out));
}

#[test]
fn missing_agent_makes_its_paths_unknown_not_failed() {
    if !require_root() {
        return;
    }
    let lab = TestLab::up("ma", None);
    let inv = std::fs::read_to_string(lab.inventory()).unwrap().replace(
        &format!("plab-{}-n3p0", lab.name),
        &format!("plab-{}-nowhere", lab.name),
    );
    let broken = lab.state.join("broken.yaml");
    std::fs::write(&broken, inv).unwrap();
    let out = matrix(
        &broken,
        &["-o", "json", "--paths", "pod-to-pod,pod-to-node"],
    );
    assert_eq!(
        out.status.code(),
        Some(3),
        "partial: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    validate(&report);
    assert_eq!(report["summary"]["agentsMissing"], 1);
    assert_eq!(report["summary"]["failed"], 0);
    assert_eq!(
        report["summary"]["unknown"], 6,
        "n3/pod's 3 pod-to-pod and 3 pod-to-node probes"
    );
    let missing = report["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["ran"] == false)
        .unwrap();
    assert_eq!(
        (missing["node"].as_str(), missing["agent"].as_str()),
        (Some("n3"), Some("pod"))
    );
    assert!(
        missing["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("plab-{}-nowhere", lab.name)),
        "{missing}"
    );
}

/// The README's second step: `prober matrix --inventory` on what `lab up` wrote runs as written,
/// from a `prober` with no agent beside it and none on the PATH, because the lab's inventory says
/// which agent it runs. An agent binary that cannot start names the ways to give it.
#[test]
fn the_labs_inventory_runs_as_written_and_a_missing_agent_names_the_fix() {
    if !require_root() {
        return;
    }
    let lab = TestLab::up("in", None);
    let alone = lab.state.join("elsewhere");
    std::fs::create_dir_all(&alone).unwrap();
    let copy = alone.join("prober");
    if std::fs::hard_link(prober(), &copy).is_err() {
        std::fs::copy(prober(), &copy).unwrap();
    }
    let run = |extra: &[&str]| {
        Command::new(&copy)
            .args(["matrix", "--inventory"])
            .arg(lab.inventory())
            .args(["-o", "json", "--paths", "pod-to-pod"])
            .args(extra)
            .env_remove("PROBER_AGENT_BIN")
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .output()
            .unwrap()
    };
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["summary"]["failed"], 0);
    assert_eq!(report["summary"]["agentsMissing"], 0);

    let out = run(&["--agent-bin", "/nonexistent/probe-pod"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let detail = report["agents"][0]["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("could not start the agent binary `/nonexistent/probe-pod`")
            && detail.contains("--agent-bin PATH")
            && detail.contains("agentBin:"),
        "{detail}"
    );
}

/// A healthy Calico cluster whose inventory does not say which nodes serve Typha: the refusals on
/// tcp/5473 are failed probes, but the only finding explaining them is a warning, so the run
/// exits 0, in the JSON as in the process.
#[test]
fn failures_explained_by_a_warning_alone_exit_0() {
    if !require_root() {
        return;
    }
    let lab = TestLab::up(
        "ty",
        Some("tests/scenarios/diagnosis/typha-unknown-servers.yaml"),
    );
    let out = matrix(&lab.inventory(), &["-o", "json"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    validate(&report);
    let findings = report["findings"].as_array().unwrap();
    assert!(
        report["summary"]["failed"].as_u64().unwrap() > 0,
        "{findings:#?}"
    );
    assert!(
        findings
            .iter()
            .any(|f| f["kind"] == "not-listening" && f["severity"] == "warning"),
        "{findings:#?}"
    );
    assert!(
        findings.iter().all(|f| f["severity"] != "error"),
        "{findings:#?}"
    );
    assert_eq!(report["summary"]["exitCode"], 0, "{}", text(&out));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}
