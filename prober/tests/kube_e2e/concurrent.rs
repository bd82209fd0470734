//! Runs beside other live host agents on the stand-in (still to move to the real control plane,
//! where it needs an administrator's rights in three namespaces); Ctrl-C in each phase and two
//! runs at once run against the real one (`prober/tests/cluster/concurrent.rs`).

use std::process::Output;
use std::time::Duration;

use crate::common::text;
use crate::kit::*;

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
