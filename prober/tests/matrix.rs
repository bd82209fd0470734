//! `prober matrix` end to end against labs: a healthy lab is all `ok`; the flannel-8472 incident
//! fails exactly the paths that cross the firewalled node's VXLAN port, and a run interrupted at
//! any moment claims only what settled; the JSON report validates
//! against docs/report.schema.json; bad inventories and missing agents are reported as such.

mod common;

use common::{agent, lab_name, netns_available, prober, root, text};

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A lab for one test, torn down on drop (pass, fail or panic).
struct TestLab {
    name: String,
    state: PathBuf,
}

impl TestLab {
    /// A lab named `base` after this run's tag (`common::lab_name`).
    fn up(base: &str, scenario: Option<&str>) -> Self {
        let name = lab_name(base);
        let state =
            std::env::temp_dir().join(format!("prober-matrix-test-{name}-{}", std::process::id()));
        let mut cmd = Command::new(prober());
        cmd.args(["lab", "up", "--name", &name, "--state-dir"])
            .arg(&state)
            .arg("--agent-bin")
            .arg(agent());
        if let Some(s) = scenario {
            cmd.arg("--scenario").arg(root().join(s));
        }
        let out = cmd.output().unwrap();
        let lab = Self { name, state };
        assert!(out.status.success(), "{}", text(&out));
        lab
    }

    fn inventory(&self) -> PathBuf {
        self.state
            .join(format!("plab-{}/inventory.yaml", self.name))
    }
}

fn matrix(inventory: &Path, args: &[&str]) -> Output {
    Command::new(prober())
        .args(["matrix", "--inventory"])
        .arg(inventory)
        .arg("--agent-bin")
        .arg(agent())
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

impl Drop for TestLab {
    fn drop(&mut self) {
        let _ = Command::new(prober())
            .args(["lab", "down", &self.name, "--state-dir"])
            .arg(&self.state)
            .output();
        let _ = std::fs::remove_dir_all(&self.state);
    }
}

fn validate(report: &Value) {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("docs/report.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the documented schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(report)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .take(10)
        .collect();
    assert!(
        errors.is_empty(),
        "report does not match docs/report.schema.json:\n{}",
        errors.join("\n")
    );
}

#[test]
fn healthy_lab_is_all_ok_in_every_format() {
    if !netns_available() {
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
    if !netns_available() {
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
}

#[test]
fn a_dead_responder_is_a_missing_agent_not_a_network_failure() {
    if !netns_available() {
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
    if !netns_available() {
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
    if !netns_available() {
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

/// `probe --plan` processes (per-agent probe runs) still alive in the lab's namespaces.
fn probe_runs_in(prefix: &str) -> Vec<String> {
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let mut left = Vec::new();
    for ns in String::from_utf8_lossy(&list.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(prefix))
    {
        let pids = Command::new("ip")
            .args(["netns", "pids", ns])
            .output()
            .unwrap();
        for pid in String::from_utf8_lossy(&pids.stdout).split_whitespace() {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains("probe --plan") {
                left.push(format!("{ns}: {pid} {cmd}"));
            }
        }
    }
    left
}

#[test]
fn sigint_and_sigterm_stop_with_what_was_gathered() {
    if !netns_available() {
        return;
    }
    let lab = TestLab::up("mc", Some("tests/scenarios/flannel-8472.yaml"));
    for signal in [
        nix::sys::signal::Signal::SIGINT,
        nix::sys::signal::Signal::SIGTERM,
    ] {
        let saved = tempfile::NamedTempFile::new().unwrap();
        let child = Command::new(prober())
            .args(["matrix", "--inventory"])
            .arg(lab.inventory())
            .arg("--agent-bin")
            .arg(agent())
            .args(["--timeout", "10s", "-o", "json", "--save"])
            .arg(saved.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        let started = Instant::now();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
            signal,
        )
        .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{signal:?}: stops promptly, not after the 10 s probes"
        );
        assert_eq!(out.status.code(), Some(130), "{signal:?}: {}", text(&out));
        let report: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{signal:?}: {e}: {}", text(&out)));
        assert_eq!(report["summary"]["interrupted"], true);
        assert_eq!(report["summary"]["exitCode"], 130);
        assert!(
            report["summary"]["ok"].as_u64().unwrap() > 0,
            "kept what it gathered"
        );
        assert!(
            report["summary"]["unknown"].as_u64().unwrap() > 0,
            "the rest is unknown"
        );
        validate(&report);
        let kept: Value = serde_json::from_slice(&std::fs::read(saved.path()).unwrap()).unwrap();
        assert_eq!(
            kept["summary"], report["summary"],
            "{signal:?}: --save written"
        );
        // The per-agent probe runs die with the coordinator (give the kernel a moment).
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(
            probe_runs_in(&format!("plab-{}-", lab.name)),
            Vec::<String>::new(),
            "{signal:?}"
        );
    }
}

/// The findings' causes with their nodes: (kind, protocol, port) -> every node named.
fn causes(report: &Value) -> Vec<(String, std::collections::BTreeSet<String>)> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let cause = format!("{} {} {}", f["kind"], f["protocol"], f["port"]);
            let nodes = ["from", "to", "nodes"]
                .iter()
                .flat_map(|k| f[*k].as_array().cloned().unwrap_or_default())
                .filter_map(|n| n.as_str().map(String::from))
                .collect();
            (cause, nodes)
        })
        .collect()
}

/// SIGINT at several moments of a run on the flannel-8472 lab (first pass, retries, receipts):
/// whatever had not settled is unknown (interrupted), never `ok`; every result that did settle
/// says what the whole run says; every finding is one the whole run makes, on no other nodes.
#[test]
fn an_interrupted_run_never_contradicts_the_whole_run() {
    if !netns_available() {
        return;
    }
    let lab = TestLab::up("mi", Some("tests/scenarios/flannel-8472.yaml"));
    let started = Instant::now();
    let whole = matrix(&lab.inventory(), &["-o", "json"]);
    let took = started.elapsed();
    assert_eq!(whole.status.code(), Some(1), "{}", text(&whole));
    let whole: Value = serde_json::from_slice(&whole.stdout).unwrap();
    let truth: std::collections::HashMap<String, bool> = whole["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["id"].as_str().unwrap().to_string(), r["outcome"] == "ok"))
        .collect();
    let whole_causes = causes(&whole);
    let mut stopped = 0;
    for tenth in [1, 3, 5, 7, 9] {
        let child = Command::new(prober())
            .args(["matrix", "--inventory"])
            .arg(lab.inventory())
            .arg("--agent-bin")
            .arg(agent())
            .args(["-o", "json"])
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(took * tenth / 10);
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
            nix::sys::signal::Signal::SIGINT,
        );
        let out = child.wait_with_output().unwrap();
        if out.status.code() != Some(130) {
            // Finished before the signal: a whole run, nothing to compare.
            continue;
        }
        stopped += 1;
        let at = format!("SIGINT at {tenth}/10 of {took:?}");
        let report: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{at}: {e}: {}", text(&out)));
        validate(&report);
        assert_eq!(report["summary"]["interrupted"], true, "{at}");
        for r in report["results"].as_array().unwrap() {
            let id = r["id"].as_str().unwrap();
            if let Some(why) = r.get("unknown") {
                assert_eq!(why, "interrupted", "{at}: {r}");
                continue;
            }
            assert_eq!(
                r["outcome"] == "ok",
                truth[id],
                "{at}: {id} settled as {} ({}), the whole run says otherwise",
                r["outcome"],
                r["detail"]
            );
        }
        for (cause, nodes) in causes(&report) {
            assert!(
                whole_causes
                    .iter()
                    .any(|(c, all)| *c == cause && nodes.is_subset(all)),
                "{at}: finding {cause} on {nodes:?} is not one the whole run makes: {whole_causes:?}\n{}",
                serde_json::to_string_pretty(&report["findings"]).unwrap()
            );
        }
    }
    assert!(stopped >= 3, "most signals land mid-run: {stopped} of 5");
}

#[test]
fn bad_inventories_exit_2_naming_the_problem() {
    if !netns_available() {
        return;
    }
    let tmp_dir = tempfile::Builder::new()
        .prefix("prober-inv-test-")
        .tempdir()
        .unwrap();
    let dir = tmp_dir.path().to_path_buf();
    std::fs::create_dir_all(&dir).unwrap();
    let good = "cluster:\n  cni: flannel\n  podCIDR: 10.244.0.0/16\n  serviceCIDR: 10.96.0.0/12\n  api: {service: \"10.96.0.1:443\", endpoints: [\"192.168.56.10:6443\"]}\nnodes:\n  - name: n1\n    address: 192.168.56.10\n    agents:\n      host: {exec: [ip, netns, exec, x], address: 192.168.56.10, port: 9917}\n";
    let cases = [
        (
            good.replace("exec: [ip, netns, exec, x]", "exec: []"),
            "nodes[0].agents.host.exec",
        ),
        (
            good.replace("  cni: flannel\n", "  cni: flannel\n  colour: blue\n"),
            "colour",
        ),
        (
            format!("{good}  - name: n1\n    address: 192.168.56.11\n    agents: {{}}\n"),
            "duplicate node name \"n1\"",
        ),
        (good.replace("10.244.0.0/16", "10.244.0.0/33"), "len 0-32"),
        (good.replace("cni: flannel", "cni: bananas"), "bananas"),
    ];
    for (i, (yaml, want)) in cases.iter().enumerate() {
        let file = dir.join(format!("inv{i}.yaml"));
        std::fs::write(&file, yaml).unwrap();
        let out = Command::new(prober())
            .args(["matrix", "--inventory"])
            .arg(&file)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{yaml}");
        let err = text(&out);
        assert!(
            err.contains(want) && err.contains(file.to_str().unwrap()),
            "{yaml}\n{err}\nwanted {want}"
        );
    }
    let out = Command::new(prober())
        .args(["matrix", "--inventory", "/nonexistent/inv.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("/nonexistent/inv.yaml"));
    let out = Command::new(prober())
        .arg("report")
        .arg(dir.join("inv0.yaml"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "a report must be a report: {}",
        text(&out)
    );
}

/// `node`'s CNI kubeconfig malformed the careless way: its token as `user:` itself, one level up.
fn malform_kubeconfig(lab: &TestLab, tokens_dir: &std::path::Path, node: &str) {
    let token = std::fs::read_to_string(tokens_dir.join(node)).unwrap();
    let file = lab.state.join(format!(
        "plab-{}/nodes/{node}/etc/cni/net.d/calico-kubeconfig",
        lab.name
    ));
    let good = std::fs::read_to_string(&file).unwrap();
    let cut = good.find("users:").unwrap();
    let rest = &good[good.find("contexts:").unwrap()..];
    std::fs::write(
        &file,
        format!(
            "{}users:\n- name: calico\n  user: {}\n{rest}",
            &good[..cut],
            token.trim()
        ),
    )
    .unwrap();
}

#[test]
fn no_token_appears_in_any_output_format() {
    if !netns_available() {
        return;
    }
    let lab = TestLab::up("mt", Some("tests/scenarios/cni-token-expired.yaml"));
    let tokens_dir = lab.state.join(format!("plab-{}/tokens", lab.name));
    let tokens: Vec<String> = std::fs::read_dir(&tokens_dir)
        .unwrap()
        .map(|e| {
            std::fs::read_to_string(e.unwrap().path())
                .unwrap()
                .trim()
                .to_string()
        })
        .collect();
    assert_eq!(tokens.len(), 3, "every node has a CNI token");
    malform_kubeconfig(&lab, &tokens_dir, "n3");
    let saved = lab.state.join("report.json");
    let table = matrix(
        &lab.inventory(),
        &["-o", "table", "--save", saved.to_str().unwrap()],
    );
    assert_eq!(
        table.status.code(),
        Some(1),
        "the expired token is an error finding: {}",
        text(&table)
    );
    let outputs = [
        String::from_utf8_lossy(&table.stdout).to_string(),
        String::from_utf8_lossy(&table.stderr).to_string(),
        std::fs::read_to_string(&saved).unwrap(),
        text(
            &Command::new(prober())
                .arg("report")
                .arg(&saved)
                .args(["-o", "junit"])
                .output()
                .unwrap(),
        ),
        text(
            &Command::new(prober())
                .arg("report")
                .arg(&saved)
                .args(["-o", "json"])
                .output()
                .unwrap(),
        ),
    ];
    for out in &outputs {
        for t in &tokens {
            for segment in t.split('.') {
                assert!(
                    !out.contains(segment),
                    "a token segment leaked into the output"
                );
            }
        }
    }
    let report: Value = serde_json::from_str(&outputs[2]).unwrap();
    validate(&report);
    let cred = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "credential")
        .expect("a credential finding");
    assert_eq!(cred["state"], "expired");
    assert_eq!(cred["nodes"], serde_json::json!(["n2"]));
    let unreadable = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "credential" && f["state"] == "unreadable")
        .expect("the malformed kubeconfig is a credential finding");
    assert_eq!(unreadable["severity"], "error");
    assert_eq!(unreadable["nodes"], serde_json::json!(["n3"]));
    let n3 = outputs[0]
        .find("n3    /etc/cni/net.d/calico-kubeconfig")
        .expect("n3's kubeconfig in the credentials section");
    assert!(
        outputs[0][n3..]
            .lines()
            .nth(1)
            .is_some_and(|l| l.contains("UNUSABLE")),
        "{}",
        outputs[0]
    );
    assert!(
        outputs[0].contains("EXPIRED") && outputs[0].contains("API unauthorized (401)"),
        "{}",
        outputs[0]
    );
}

/// `--inventory` naming a FIFO fails at once naming it (it once waited forever for a writer).
#[test]
fn an_inventory_that_is_a_fifo_fails_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("inventory.yaml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let mut child = Command::new(prober())
        .args(["matrix", "--inventory"])
        .arg(&fifo)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("prober blocked on a FIFO inventory");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains(fifo.to_str().unwrap()) && said.contains("not a regular file"),
        "{said}"
    );
}

/// A 5,000-node inventory without `--sample` is refused before planning, with the sample that
/// fits, where the process may use 1 GiB of address space (it once planned its way to 17 GB).
#[test]
fn a_matrix_too_large_for_memory_is_refused_before_it_is_planned() {
    use std::fmt::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let mut inv = String::from(
        "cluster:\n  cni: flannel\n  podCIDR: 10.0.0.0/8\n  serviceCIDR: 10.96.0.0/12\n  \
         overlay: {mode: vxlan, port: 8472, vni: 1}\n  \
         api: {service: \"10.96.0.1:443\", endpoints: [\"192.168.0.10:6443\"]}\nnodes:\n",
    );
    for i in 0..5000u32 {
        let (a, b) = (i / 250, i % 250 + 1);
        let _ = write!(
            inv,
            "  - name: n{i}\n    address: 172.16.{a}.{b}\n    agents:\n      \
             host: {{exec: [\"true\"], address: 172.16.{a}.{b}, port: 9917}}\n      \
             pod: {{exec: [\"true\"], address: 10.{a}.{b}.2, port: 9917}}\n"
        );
    }
    let file = dir.path().join("big.yaml");
    std::fs::write(&file, inv).unwrap();
    let started = Instant::now();
    let out = Command::new("prlimit")
        .arg(format!("--as={}", 1u64 << 30))
        .arg(prober())
        .args(["matrix", "--no-progress", "--inventory"])
        .arg(&file)
        .output()
        .unwrap();
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{}: {said}", out.status);
    assert!(
        said.contains("5000 nodes") && said.contains("--sample 3"),
        "{said}"
    );
    eprintln!("refused in {:?}", started.elapsed());
}
