//! Runs on stub nodes (`test_kit::standin::stub`: no lab, no namespace, agents that answer
//! simulated results and send nothing): the exec path's handling of the API server's 429s.
//! They need no root and run anywhere.

use std::time::Duration;

use test_kit::standin::{Config, StandIn, Stub, seed, stub};

use super::kit::{IMAGE, no_agent_missing, prober_cmd};
use crate::common::agent;

/// `prober matrix -o json` against `standin`, waiting `wait` for its agents.
fn matrix(standin: &StandIn, wait: &str) -> std::process::Output {
    let args = [
        "matrix",
        "-o",
        "json",
        "--image",
        IMAGE,
        "--agent-wait",
        wait,
    ];
    prober_cmd(&args, &standin.kubeconfig).output().unwrap()
}

/// A stand-in with `n` stub nodes, and the directory it lives in.
fn stub_standin(n: usize) -> (StandIn, tempfile::TempDir) {
    stub_standin_with(n, |_, _| {})
}

/// `stub_standin`, with the nodes changed by `change` (given the directory) first.
fn stub_standin_with(
    n: usize,
    change: impl FnOnce(&mut Vec<test_kit::standin::NodeSpec>, &std::path::Path),
) -> (StandIn, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let c = stub::cluster(n);
    let root = stub::node_root(dir.path()).unwrap();
    let mut nodes = stub::nodes(&c, &root);
    change(&mut nodes, dir.path());
    let mut config = Config::new(&dir.path().join("standin"), nodes, &agent());
    config.stub = Some(Stub {
        exec_round_trip: Duration::from_millis(100),
        probe_phase: Duration::from_millis(200),
    });
    let standin = StandIn::start(config).unwrap();
    standin.seed(seed::objects(&c));
    (standin, dir)
}

#[test]
fn a_throttled_exec_is_retried_after_the_servers_retry_after() {
    let (standin, _dir) = stub_standin(2);
    // The first exec is answered 429 with Retry-After: 3. kube's client retries it itself after
    // the header (its default `server_retry` layer); without that layer exec.rs's own retry used
    // to wait a fixed 0.5 s, and now reads the Status's `retryAfterSeconds` too.
    standin.faults(|f| f.throttle_exec = Some((1, 3)));
    let out = matrix(&standin, "1m");
    no_agent_missing(&out);
    let seen = standin.seen();
    let throttled = seen
        .iter()
        .find(|s| s.path.ends_with("/exec") && s.code == 429)
        .expect("the stand-in throttled an exec");
    let retry = seen
        .iter()
        .find(|s| s.path == throttled.path && s.at > throttled.at)
        .expect("the throttled exec was retried");
    let waited = retry.at - throttled.at;
    assert!(
        waited >= Duration::from_secs(3),
        "retried after {waited:?}, before the Retry-After of 3 s"
    );
    assert_eq!(retry.code, 101, "{retry:?}");
}

#[test]
fn a_server_speaking_only_the_v4_exec_protocol_still_gets_every_agents_results() {
    let (standin, _dir) = stub_standin(2);
    // An API server before 1.30: `v4.channel.k8s.io` only, no channel to close stdin with.
    standin.faults(|f| f.exec_v4_only = true);
    let out = matrix(&standin, "1m");
    no_agent_missing(&out);
    let report = super::kit::report(&out);
    let results = report["results"].as_array().map_or(0, Vec::len);
    assert!(results > 0, "no results:\n{}", crate::common::text(&out));
    let execs = standin
        .seen()
        .iter()
        .filter(|s| s.path.ends_with("/exec") && s.code == 101)
        .count();
    assert!(execs >= 4, "{execs} exec sessions for 4 agents");
}

#[test]
fn a_missing_host_path_file_is_reported_as_failed_mount_on_its_node() {
    // The second node has no /etc/resolv.conf: the host agent's `File` hostPath cannot mount.
    let (standin, _dir) = stub_standin_with(2, |nodes, dir| {
        let bare = dir.join("bare-root");
        std::fs::create_dir_all(&bare).unwrap();
        nodes[1].root = bare;
    });
    let out = matrix(&standin, "10s");
    let report = super::kit::report(&out);
    let missing: Vec<&serde_json::Value> = report["agents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["ran"] == false)
        .collect();
    assert_eq!(missing.len(), 1, "{missing:?}");
    assert_eq!(missing[0]["node"], "node-00001", "{missing:?}");
    assert_eq!(missing[0]["agent"], "host", "{missing:?}");
    let detail = missing[0]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("FailedMount"), "{detail}");
}
