//! Issue #38's defects, each seen failing before its fix. HARNESS: the API stand-in of the test
//! kit (`test_kit::standin`) on stub nodes (no lab, no root: the agents answer simulated results)
//! unless a test says otherwise; the stand-in's faults (`Faults`) make the cluster's behaviour a
//! real control plane shows only under load or failure (a slow delete, an ended watch, etcd
//! compaction). Each test names the harness calls it makes, to be re-pointed at the real API.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use test_kit::standin::{Config, StandIn, Stub, seed, stub};

use super::kit::{IMAGE, no_agent_missing, prober_cmd};
use crate::common::{agent, text};

/// HARNESS: a stand-in with `n` stub nodes whose seeded objects `change` may alter first, each
/// agent's probe phase lasting `probe_phase`; and the directory it lives in.
fn stub_cluster(
    n: usize,
    probe_phase: Duration,
    change: impl FnOnce(&mut Vec<Value>),
) -> (StandIn, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let c = stub::cluster(n);
    let root = stub::node_root(dir.path()).unwrap();
    let mut config = Config::new(
        &dir.path().join("standin"),
        stub::nodes(&c, &root),
        &agent(),
    );
    config.stub = Some(Stub {
        exec_round_trip: Duration::from_millis(100),
        probe_phase,
    });
    let standin = StandIn::start(config).unwrap();
    let mut objects = seed::objects(&c);
    change(&mut objects);
    standin.seed(objects);
    (standin, dir)
}

/// `prober matrix -o json` against `standin` with `extra` arguments.
fn matrix_cmd(standin: &StandIn, wait: &str, extra: &[&str]) -> Command {
    let mut args = vec![
        "matrix",
        "-o",
        "json",
        "--image",
        IMAGE,
        "--agent-wait",
        wait,
    ];
    args.extend_from_slice(extra);
    prober_cmd(&args, &standin.kubeconfig)
}

/// Item 6. HARNESS: stub stand-in; checks the requests it answered (`StandIn::seen`).
#[test]
fn discovery_reads_the_policies_of_the_namespace_the_run_uses() {
    let (s, _dir) = stub_cluster(2, Duration::from_millis(200), |_| {});
    let out = matrix_cmd(&s, "30s", &["--namespace", "probing"])
        .output()
        .unwrap();
    no_agent_missing(&out);
    let read_in = |ns: &str| {
        let path = format!("/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies");
        s.seen().iter().any(|r| r.method == "GET" && r.path == path)
    };
    assert!(
        read_in("probing"),
        "the run's namespace's policies were not read:\n{}",
        text(&out)
    );
    assert!(
        !read_in("prober-system"),
        "another namespace's policies were read for the agents in probing"
    );
}
