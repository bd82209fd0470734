//! Interrupted and concurrent runs on the real control plane: Ctrl-C in each phase, two runs at
//! once. The phases are read from the API server's audit log, as the requests happen.

use std::process::{Child, Stdio};

use crate::common::text;
use crate::flow::rbac_only;
use crate::kit::*;
use serde_json::Value;

fn spawn_matrix(k: &RealLab, user: &std::path::Path, namespace: &str) -> Child {
    prober_cmd(
        k,
        &[
            "matrix",
            "-o",
            "json",
            "--image",
            IMAGE,
            "--agent-wait",
            "90s",
            "--namespace",
            namespace,
        ],
        user,
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap()
}

/// What marks a phase in the audit log.
type Phase = fn(&Value) -> bool;

/// Whether an audit event is a request of `user` (the coordinator's service account).
fn by(e: &Value, user: &str) -> bool {
    e["user"]["username"].as_str() == Some(user)
}

/// Ctrl-C in each phase of a run (creating its objects, waiting for its agents, probing through
/// exec, removing its objects): the run exits 130 after its cleanup and leaves nothing.
#[test]
fn ctrl_c_in_each_phase_exits_130_and_leaves_nothing_behind() {
    let Some(k) = RealLab::up("rci", "tests/scenarios/healthy.yaml") else {
        return;
    };
    rbac_only(&k);
    let user = k.user("prober");
    let me = "system:serviceaccount:prober-system:prober";
    let phases: [(&str, Phase); 4] = [
        ("apply", |e| {
            e["verb"] == "create" && e["objectRef"]["resource"] == "daemonsets"
        }),
        ("wait", |e| {
            e["verb"] == "watch" && e["objectRef"]["resource"] == "pods"
        }),
        ("exec", |e| e["objectRef"]["subresource"] == "exec"),
        ("cleanup", |e| {
            e["verb"] == "delete" && e["objectRef"]["resource"] == "daemonsets"
        }),
    ];
    for (phase, reached) in phases {
        let before = k.cluster.audit().len();
        let child = spawn_matrix(&k, &user, "prober-system");
        eventually(
            120,
            &format!("the run never reached the {phase} phase"),
            || {
                let seen = k.cluster.audit();
                (!seen[before..].iter().any(|e| by(e, me) && reached(e))).then(String::new)
            },
        );
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
        // `ip netns exec` execs prober in its own place: the child is prober itself.
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
        let out = child.wait_with_output().unwrap();
        // The cleanup phase may finish before the signal lands: then the run simply ends.
        if phase != "cleanup" || !out.status.success() && out.status.code() != Some(1) {
            assert_eq!(
                out.status.code(),
                Some(130),
                "Ctrl-C while {phase}: {}",
                text(&out)
            );
        }
        eventually(
            90,
            &format!("Ctrl-C while {phase} left objects behind"),
            || leftovers(&k).map(|l| format!("{l}\n{}", text(&out))),
        );
    }
}

/// Two runs at once in one namespace: the first gets every agent; the second either does too or
/// refuses, naming the run in its way (never wiping it); nothing is left behind.
#[test]
fn two_concurrent_runs_each_get_their_agents_and_leave_nothing() {
    let Some(k) = RealLab::up("rck", "tests/scenarios/healthy.yaml") else {
        return;
    };
    rbac_only(&k);
    let user = k.user("prober");
    let a = spawn_matrix(&k, &user, "prober-system");
    let me = "system:serviceaccount:prober-system:prober";
    eventually(120, "the first run never probed", || {
        (!k.cluster
            .audit()
            .iter()
            .any(|e| by(e, me) && e["objectRef"]["subresource"] == "exec"))
        .then(String::new)
    });
    let b = spawn_matrix(&k, &user, "prober-system");
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    all_ran(&a);
    if b.status.code() == Some(2) {
        assert!(text(&b).contains("another prober run"), "{}", text(&b));
    } else {
        all_ran(&b);
    }
    nothing_left(&k);
}
