//! Interrupted and concurrent runs: Ctrl-C in each phase, two runs at once.

use std::process::Output;
use std::time::Duration;

use crate::common::text;
use crate::kit::*;
use serde_json::Value;

/// Starts `prober matrix -o json` through the stand-in, not waiting for it.
fn spawn_matrix(k: &KubeLab, wait: &str) -> std::process::Child {
    prober_cmd(
        &[
            "matrix",
            "-o",
            "json",
            "--image",
            IMAGE,
            "--agent-wait",
            wait,
        ],
        k.kubeconfig(),
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap()
}

/// Ctrl-C in each phase of a run (creating its objects, waiting for its agents, probing through
/// exec, removing its objects): the run stops and leaves no object and no process.
#[test]
fn ctrl_c_in_each_phase_leaves_nothing_behind() {
    let Some(k) = KubeLab::up("ke2i", "tests/scenarios/healthy.yaml", None) else {
        return;
    };
    let interrupt = |phase: &str, ready: &dyn Fn(&[test_kit::standin::Seen]) -> bool| {
        let before = k.standin.seen().len();
        let child = spawn_matrix(&k, "60s");
        eventually(
            60,
            &format!("the run never reached the {phase} phase"),
            || {
                (!ready(&k.standin.seen()[before..]))
                    .then(|| format!("{:?}", &k.standin.seen()[before..]))
            },
        );
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
        let out = child.wait_with_output().unwrap();
        k.standin
            .faults(|f| *f = test_kit::standin::Faults::default());
        eventually(
            30,
            &format!("Ctrl-C while {phase} left objects or processes"),
            || leftovers(&k).map(|l| format!("{l}\n{}", text(&out))),
        );
    };
    // Creating: every write takes a second; interrupted once the first object is made.
    k.standin
        .faults(|f| f.slow_writes = Some(Duration::from_secs(1)));
    interrupt("apply", &|seen| seen.iter().any(|r| r.method == "POST"));
    // Waiting: the agents stay Pending.
    k.standin.faults(|f| {
        for n in ["n1", "n2", "n3"] {
            f.pending.insert(n.into(), Duration::from_secs(60));
        }
    });
    interrupt("wait", &|seen| {
        seen.iter()
            .any(|r| r.path.ends_with("/pods") && r.query.contains("watch"))
    });
    // Probing: once an exec session is open.
    interrupt("exec", &|seen| {
        seen.iter().any(|r| r.path.ends_with("/exec"))
    });
    // Removing: every write slow again, interrupted after the first delete.
    k.standin
        .faults(|f| f.slow_writes = Some(Duration::from_secs(1)));
    interrupt("cleanup", &|seen| seen.iter().any(|r| r.method == "DELETE"));
}

/// Two runs at once in one namespace: the first gets every agent; the second either does too or
/// refuses, naming the run in its way (never wiping it); nothing is left behind.
#[test]
fn two_concurrent_runs_each_get_their_agents_and_leave_nothing() {
    // A namespace goes within a second of its deletion (one with few objects often does).
    let Some(k) = KubeLab::up_with("ke2k", "tests/scenarios/healthy.yaml", None, |s, c| {
        s.pods_per_node = 2;
        c.terminating = Duration::from_secs(1);
    }) else {
        return;
    };
    // B starts while A probes: A's agents hold their nodes' host port, A's cleanup comes first.
    let a = spawn_matrix(&k, "60s");
    eventually(60, "the first run never probed", || {
        (!k.standin.seen().iter().any(|r| r.path.ends_with("/exec"))).then(String::new)
    });
    let b = spawn_matrix(&k, "60s");
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let all_agents = |out: &Output| {
        let r = report(out);
        let missing: Vec<Value> = r["agents"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["ran"] == false)
            .cloned()
            .collect();
        assert!(
            missing.is_empty(),
            "agents missing: {missing:?}\n{}",
            text(out)
        );
    };
    all_agents(&a);
    if b.status.code() == Some(2) {
        assert!(text(&b).contains("another prober run"), "{}", text(&b));
    } else {
        all_agents(&b);
    }
    eventually(60, "the runs left objects or processes behind", || {
        leftovers(&k)
    });
}
