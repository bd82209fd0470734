//! SIGINT and SIGTERM: a run stops with what it gathered and never contradicts the whole run.

use crate::common::{agent, netns_available, prober, text};
use crate::kit::*;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

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
    // Run once as the kubectl plugin: the signal's message names the command as it was typed.
    let plugin_dir = tempfile::tempdir().unwrap();
    let plugin = plugin_dir.path().join("kubectl-probe");
    std::os::unix::fs::symlink(prober(), &plugin).unwrap();
    for (signal, program, said) in [
        (
            nix::sys::signal::Signal::SIGINT,
            plugin.clone(),
            "kubectl probe matrix: interrupted: stopping with what was gathered",
        ),
        (
            nix::sys::signal::Signal::SIGTERM,
            std::path::PathBuf::from(prober()),
            "prober matrix: SIGTERM: stopping with what was gathered",
        ),
    ] {
        let saved = tempfile::NamedTempFile::new().unwrap();
        let child = Command::new(program)
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
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(said),
            "{signal:?}: {}",
            text(&out)
        );
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
