//! Interrupted and concurrent runs: Ctrl-C in each phase, two runs at once.

use std::process::Output;
use std::time::Duration;

use crate::common::text;
use crate::kit::*;

/// Starts `prober matrix -o json` through the stand-in in `namespace`, not waiting for it.
fn spawn_matrix(k: &KubeLab, wait: &str, namespace: Option<&str>) -> std::process::Child {
    matrix_cmd(k, wait, namespace)
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
        let child = spawn_matrix(&k, "60s", None);
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

/// A lab for two runs at once: pods enough for both runs' pod agents, and a namespace that goes
/// within a second of its deletion (one with few objects often does).
fn lab_for_two(name: &str) -> Option<KubeLab> {
    KubeLab::up_with(name, "tests/scenarios/healthy.yaml", None, |s, c| {
        s.pods_per_node = 2;
        c.terminating = Duration::from_secs(1);
    })
}

/// Runs A in `ns_a`, then B in `ns_b` once A probes (A's host agents are listening on every
/// node by then, and A's cleanup comes first); returns both outputs.
fn a_then_b(k: &KubeLab, ns_a: Option<&str>, ns_b: Option<&str>) -> (Output, Output) {
    let a = spawn_matrix(k, "60s", ns_a);
    eventually(60, "the first run never probed", || {
        (!k.standin.seen().iter().any(|r| r.path.ends_with("/exec"))).then(String::new)
    });
    let b = spawn_matrix(k, "60s", ns_b);
    (a.wait_with_output().unwrap(), b.wait_with_output().unwrap())
}

/// Two runs at once in one namespace: the first gets every agent; the second either does too or
/// refuses, naming the run in its way (never wiping it); nothing is left behind.
#[test]
fn two_concurrent_runs_each_get_their_agents_and_leave_nothing() {
    let Some(k) = lab_for_two("ke2k") else {
        return;
    };
    let (a, b) = a_then_b(&k, None, None);
    no_agent_missing(&a);
    if b.status.code() == Some(2) {
        assert!(text(&b).contains("another prober run"), "{}", text(&b));
    } else {
        no_agent_missing(&b);
    }
    nothing_left(&k);
}

/// The ports the host agents of the run that printed `out` served on, from its results.
fn host_agent_ports(out: &Output) -> Vec<u64> {
    let r = report(out);
    let mut ports: Vec<u64> = r["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|x| x["outcome"] == "ok" && x["to"]["agent"] == "host")
        .filter(|x| x["to"]["protocol"] == "tcp")
        .filter_map(|x| x["to"]["port"].as_u64())
        .filter(|p| (9917..10_017).contains(p))
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// Host agents share each node's host network: a run beside other live prober host agents
/// (deploy/base's permanent ones, and another run's kept in another namespace) takes a port
/// none of them holds, and every run gets its host agents' results.
#[test]
fn runs_beside_other_live_host_agents_take_a_free_port_and_get_every_agent() {
    let Some(k) = KubeLab::up_with("ke2p", "tests/scenarios/healthy.yaml", None, |s, c| {
        // deploy/base's pod agents, then one run's, then another's.
        s.pods_per_node = 3;
        c.terminating = Duration::from_secs(1);
    }) else {
        return;
    };
    k.standin.create_all(deploy_base(|_| true)).unwrap();
    agents_ready(&k, k.lab.layout.nodes.len() * 2);
    // Run A in its own namespace, its agents kept (live until they expire): deploy/base's
    // host agents hold 9917 on every node.
    let a = matrix_cmd(&k, "30s", Some("prober-a"))
        .arg("--keep-agents")
        .output()
        .unwrap();
    no_agent_missing(&a);
    assert_eq!(host_agent_ports(&a), [9918], "{}", text(&a));
    assert!(
        text(&a).contains("port 9917 is held by the permanent host agents in prober-system"),
        "{}",
        text(&a)
    );
    // Run B in a third namespace, while A's host agents still serve.
    let b = matrix_through_ns(&k, "prober-b");
    no_agent_missing(&b);
    assert_eq!(host_agent_ports(&b), [9919], "{}", text(&b));
    // Asked for a port A's agents hold: refused before anything is created, naming A.
    let c = matrix_cmd(&k, "30s", Some("prober-c"))
        .args(["--host-agent-port", "9918"])
        .output()
        .unwrap();
    assert_eq!(c.status.code(), Some(2), "{}", text(&c));
    assert!(
        text(&c).contains("port 9918 is held on the nodes by prober run"),
        "{}",
        text(&c)
    );
    let out = run(&["cleanup", "--all", "-n", "prober-a"], k.kubeconfig());
    assert!(out.status.success(), "{}", text(&out));
    // deploy/base's agents stay; nothing of a run does.
    eventually(60, "the runs left objects or processes behind", || {
        leftovers_beside(&k, Some("prober-system"))
    });
}

/// `matrix_cmd` in `namespace`, run to its end.
fn matrix_through_ns(k: &KubeLab, namespace: &str) -> Output {
    matrix_cmd(k, "30s", Some(namespace)).output().unwrap()
}
