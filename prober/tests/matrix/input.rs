//! What a run is given: bad inventories, tokens in node files, a FIFO, a matrix too large.

use crate::common::{prober, require_root, text};
use crate::kit::*;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

#[test]
fn bad_inventories_exit_2_naming_the_problem() {
    if !require_root() {
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
    if !require_root() {
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

/// Asserts that `out` printed no ESC, BEL or other control a terminal would obey (line breaks
/// and tabs aside), and that it did print `shown` (the escaped form).
fn obeys_nothing(what: &str, out: &std::process::Output, shown: &str) {
    let all = text(out);
    let raw: Vec<char> = all
        .chars()
        .filter(|c| c.is_control() && !matches!(c, '\n' | '\t'))
        .collect();
    assert!(raw.is_empty(), "{what} printed {raw:?} raw:\n{all}");
    assert!(all.contains(shown), "{what}: wanted {shown:?} in\n{all}");
}

#[test]
fn no_escape_sequence_from_a_file_reaches_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    // A saved report whose agent is not one: serde quotes the unknown variant.
    let report = REPORT_WITH_AGENT.replace("AGENT", "\\u001b[2J\\u001b]0;owned\\u0007pod");
    let file = dir.path().join("report.json");
    std::fs::write(&file, report).unwrap();
    let out = Command::new(prober())
        .arg("report")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    obeys_nothing("report", &out, "\\u{1b}[2J");
    // An inventory with an unknown key: the error names the field path.
    let inventory = "cluster:\n  cni: flannel\n  \"\\e[31mbogus\": 1\nnodes: []\n";
    let file = dir.path().join("inventory.yaml");
    std::fs::write(&file, inventory).unwrap();
    let out = Command::new(prober())
        .args(["matrix", "--inventory"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    obeys_nothing("inventory", &out, "\\u{1b}[31mbogus");
}

/// A valid saved report but for `results[0].from.agent`, which is `AGENT`.
const REPORT_WITH_AGENT: &str = r#"{"schema":"prober.report/v1","results":[{"id":"a","path":"pod-to-pod","from":{"node":"n1","agent":"AGENT"},"to":{"address":"10.0.0.1","port":9917,"protocol":"tcp"},"outcome":"ok","detail":""}],"findings":[],"agents":[],"summary":{"total":1,"ok":1,"failed":0,"unknown":0,"nodes":1,"agents":1,"agentsMissing":0,"durationMillis":1,"interrupted":false,"byPath":{},"exitCode":0}}"#;

#[test]
fn a_scenario_description_is_shown_not_obeyed() {
    if !require_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("described.yaml");
    // Clear the screen, set the window title, and hide everything after (SGR 8).
    std::fs::write(
        &scenario,
        "name: described\ndescription: \"two nodes\\e[2J\\e]0;owned\\a\\e[8m\"\nnodes: 2\n",
    )
    .unwrap();
    let name = crate::common::lab_name("desc");
    let out = Command::new(prober())
        .args(["lab", "run", "--name", &name, "--scenario"])
        .arg(&scenario)
        .arg("--state-dir")
        .arg(dir.path())
        .env("PROBER_AGENT_BIN", crate::common::agent())
        .output()
        .unwrap();
    obeys_nothing("lab run", &out, "two nodes\\u{1b}[2J");
}
