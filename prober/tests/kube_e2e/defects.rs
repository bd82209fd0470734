//! Issue #38's defects, each seen failing before its fix. HARNESS: the API stand-in of the test
//! kit (`test_kit::standin`) on stub nodes (no lab, no root: the agents answer simulated results)
//! unless a test says otherwise; the stand-in's faults (`Faults`) make the cluster's behaviour a
//! real control plane shows only under load or failure (a slow delete, an ended watch, etcd
//! compaction). Each test names the harness calls it makes, to be re-pointed at the real API.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use test_kit::standin::{Config, StandIn, Stub, seed, stub};

use super::kit::{IMAGE, no_agent_missing, prober_cmd, report};
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

/// What runs left in the stand-in: objects carrying a run label, pods of prober's agents, and
/// namespaces prober created.
fn leftovers(s: &StandIn) -> Option<String> {
    let mut left = Vec::new();
    for plural in [
        "daemonsets",
        "serviceaccounts",
        "networkpolicies",
        "pods",
        "namespaces",
    ] {
        for o in s.list(plural) {
            let labels = &o["metadata"]["labels"];
            if labels["prober.io/run"].is_string()
                || (plural == "pods" && labels["app.kubernetes.io/name"] == "prober")
            {
                left.push(format!(
                    "{plural}/{} ({})",
                    o["metadata"]["name"],
                    o["status"]["phase"].as_str().unwrap_or("-")
                ));
            }
        }
    }
    (!left.is_empty()).then(|| left.join(", "))
}

/// Waits up to `secs` for `done`, else panics with `what` and the last reason.
fn eventually(secs: u64, what: &str, mut done: impl FnMut() -> Option<String>) {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        match done() {
            None => return,
            Some(why) if Instant::now() > until => panic!("{what}: {why}"),
            Some(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
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

/// Item 8. HARNESS: stub stand-in whose deletes are answered 3 s late (`Faults::slow_deletes`);
/// SIGINT while the agents probe, and while the run removes them: each run exits 130 (a script
/// knows it was cut short), after removing what it created.
#[test]
fn an_interrupt_in_any_phase_exits_130_after_cleaning_up() {
    let (s, _dir) = stub_cluster(2, Duration::from_secs(4), |_| {});
    s.faults(|f| f.slow_deletes = Some(Duration::from_secs(3)));
    for phase in ["probing", "cleanup"] {
        let since = s.seen().len();
        let child = matrix_cmd(&s, "30s", &[])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        eventually(60, &format!("{phase}: the phase never came"), || {
            let seen = s.seen();
            let hit = seen[since..].iter().any(|r| match phase {
                // An exec session answered: the agents probe (4 s each).
                "probing" => r.path.ends_with("/exec") && r.code == 101,
                // The first DaemonSet's delete answered: four more deletes, 3 s each, to go.
                _ => r.method == "DELETE",
            });
            (!hit).then(|| format!("{} requests", seen.len() - since))
        });
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
            nix::sys::signal::Signal::SIGINT,
        )
        .unwrap();
        let out: Output = child.wait_with_output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(
            said.contains("interrupted: stopping with what was gathered"),
            "{phase}: {said}"
        );
        assert_eq!(out.status.code(), Some(130), "{phase}: {}", text(&out));
        let r = report(&out);
        assert_eq!(r["summary"]["exitCode"], 130, "{phase}: {}", r["summary"]);
        assert_eq!(r["summary"]["interrupted"], true, "{phase}");
        eventually(30, &format!("{phase}: the run left objects"), || {
            leftovers(&s)
        });
    }
}

/// Item 3. HARNESS: stub stand-in; every watch is ended by the server after 1 s
/// (`Faults::watch_end`), then etcd compacts (`StandIn::compact`): a watch re-opened at its old
/// version is told 410 "too old resource version". A warning written after that must still
/// explain the missing agent: the wait lists again and watches from the list's version.
#[test]
fn an_expired_events_watch_lists_again_and_keeps_the_warnings() {
    let (s, _dir) = stub_cluster(2, Duration::from_millis(200), |_| {});
    s.faults(|f| {
        f.watch_end = Some(Duration::from_secs(1));
        f.pending
            .insert("node-00001".into(), Duration::from_secs(600));
    });
    let child = matrix_cmd(&s, "12s", &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pod = String::new();
    eventually(30, "no agent pod on node-00001", || {
        let found = s.list("pods").into_iter().find(|p| {
            p["spec"]["nodeName"] == "node-00001"
                && p["metadata"]["labels"]["app.kubernetes.io/component"] == "pod-agent"
        });
        pod = found
            .and_then(|p| p["metadata"]["name"].as_str().map(String::from))
            .unwrap_or_default();
        pod.is_empty().then(|| "not yet".to_string())
    });
    // The watches opened so far end within a second; every re-open at their versions is 410.
    std::thread::sleep(Duration::from_millis(1500));
    s.compact();
    std::thread::sleep(Duration::from_millis(2500));
    s.create_all([json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": format!("{pod}.marker"), "namespace": "prober-system"},
        "involvedObject": {"kind": "Pod", "apiVersion": "v1", "name": pod,
                           "namespace": "prober-system"},
        "reason": "FailedMount", "type": "Warning",
        "message": "MountVolume.SetUp failed for volume \"marker-7\": not found",
        "source": {"component": "kubelet", "host": "node-00001"},
    })])
    .unwrap();
    let out = child.wait_with_output().unwrap();
    let r = report(&out);
    let detail = r["agents"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["node"] == "node-00001" && a["agent"] == "pod" && a["ran"] == false)
        .and_then(|a| a["detail"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(
        detail.contains("FailedMount") && detail.contains("marker-7"),
        "the warning written after the compaction was lost: {detail:?}\n{}",
        text(&out)
    );
}

/// Item 2. HARNESS: stub stand-in; node-00001 is `NotReady` (`Faults::not_ready`): the agents
/// tolerate its taints, so their pods are bound there, and no kubelet confirms their graceful
/// deletion (nor, then, the namespace's). Two runs back to back both exit 3 naming that node;
/// the second neither waits for nor fails on the first's namespace; once the node is back,
/// nothing of prober's is left.
#[test]
fn two_runs_with_a_not_ready_node_both_report_it_and_the_second_does_not_wait() {
    let (s, _dir) = stub_cluster(3, Duration::from_millis(200), |_| {});
    s.faults(|f| {
        f.not_ready.insert("node-00001".into());
    });
    for attempt in ["first", "second"] {
        let out = matrix_cmd(&s, "10s", &[]).output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(3), "{attempt}: {}", text(&out));
        let r = report(&out);
        let missing: Vec<&Value> = r["agents"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["ran"] == false)
            .collect();
        assert!(
            !missing.is_empty()
                && missing.iter().all(|a| a["node"] == "node-00001"
                    && a["detail"].as_str().is_some_and(|d| d.contains("NotReady"))),
            "{attempt}: {missing:?}"
        );
        assert!(
            !said.contains("still being deleted"),
            "{attempt} run waited for an earlier run's namespace:\n{said}"
        );
    }
    // The second run left nothing either, while the node is still NotReady.
    eventually(30, "the runs left objects on the NotReady node", || {
        leftovers(&s)
    });
    s.faults(|f| {
        f.not_ready.clear();
    });
    eventually(30, "the runs left objects", || leftovers(&s));
}

/// Item 1. HARNESS: stub stand-in whose node-00002 has 5m of allocatable CPU, less than the
/// agents' 10m requests: the `DaemonSet` controller still makes its pods (a required node affinity
/// naming the node, never `nodeName`), the scheduler leaves them Pending with its own message,
/// and the run says that for node-00002 instead of "no agent pod was created there".
#[test]
fn an_agent_the_scheduler_cannot_place_is_reported_with_the_schedulers_words() {
    let (s, _dir) = stub_cluster(3, Duration::from_millis(200), |objects| {
        let n = objects
            .iter_mut()
            .find(|o| o["kind"] == "Node" && o["metadata"]["name"] == "node-00002")
            .unwrap();
        n["status"]["allocatable"]["cpu"] = json!("5m");
    });
    let out = matrix_cmd(&s, "10s", &[]).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let r = report(&out);
    let missing: Vec<&Value> = r["agents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["ran"] == false)
        .collect();
    assert_eq!(missing.len(), 2, "{missing:?}\n{}", text(&out));
    for a in &missing {
        let detail = a["detail"].as_str().unwrap_or_default();
        assert!(
            a["node"] == "node-00002"
                && detail.contains("0/3 nodes are available: 1 Insufficient cpu"),
            "{a}\n{}",
            text(&out)
        );
    }
    eventually(30, "the run left objects", || leftovers(&s));
}

/// Item 5. HARNESS: stub stand-in whose exec connections end as soon as the command exits
/// (`Faults::exec_reset_on_exit`, what the kubelet's streaming server does), read slowly
/// (`Faults::exec_slow`): an agent that exits with its last results still on their way loses
/// them, and its exit status, to the reset. On either exec protocol, every agent's results
/// must all arrive and the run must count no agent's session as failed.
#[test]
fn a_slow_reader_gets_every_result_when_the_agent_exits() {
    for v4 in [false, true] {
        let (s, _dir) = stub_cluster(2, Duration::from_millis(200), |_| {});
        s.faults(|f| {
            f.exec_reset_on_exit = true;
            f.exec_slow = Some((512, Duration::from_millis(50)));
            f.exec_v4_only = v4;
        });
        let out = matrix_cmd(&s, "30s", &[]).output().unwrap();
        no_agent_missing(&out);
        let r = report(&out);
        let lost: Vec<&Value> = r["results"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|x| x["outcome"] != "ok")
            .collect();
        assert!(
            lost.is_empty() && out.status.code() == Some(0),
            "v4 only: {v4}: {lost:?}\n{}",
            text(&out)
        );
        eventually(30, "the run left objects", || leftovers(&s));
    }
}
