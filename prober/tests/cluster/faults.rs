//! Runs meeting what real nodes and a real API server do: a rerun while the last run's
//! namespace terminates, an exec stream cut by a node, agents that start late, agents missing
//! for a reason the cluster states (a NotReady node, a pod sandbox the CNI cannot make).

use std::time::Instant;

use crate::common::text;
use crate::kit::*;
use serde_json::Value;

fn not_run(r: &Value, node: &str) -> Vec<String> {
    r["agents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["node"] == node && a["ran"] == false)
        .map(|a| {
            format!(
                "{}: {}",
                a["agent"],
                a["detail"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// A run right after another that created (and deleted) its own namespace, as an administrator
/// runs them: the namespace may still be Terminating, and the second run must neither fail with
/// a raw 403 nor leave anything.
#[test]
fn a_rerun_while_the_last_namespace_terminates_runs() {
    let Some(k) = RealLab::up("rcr", "tests/scenarios/healthy.yaml") else {
        return;
    };
    let admin = k.cluster.admin.clone();
    let first = matrix(&k, &admin, "90s", &["--namespace", "prober-rr"]);
    all_ran(&first);
    let second = matrix(&k, &admin, "90s", &["--namespace", "prober-rr"]);
    all_ran(&second);
    nothing_left(&k);
}

/// n2's kubelet cuts every exec stream after 200 bytes: that node's agents are reported with
/// the broken stream as the cause; the other agents' results are kept.
#[test]
fn an_exec_stream_cut_by_the_node_is_reported_with_its_cause_and_the_rest_kept() {
    let Some(k) = RealLab::up("rcc", "tests/scenarios/healthy.yaml") else {
        return;
    };
    crate::flow::rbac_only(&k);
    let user = k.user("prober");
    k.cluster.fault("n2", "exec-cut", Some("200")).unwrap();
    let started = Instant::now();
    let out = matrix(&k, &user, "90s", &[]);
    eprintln!("run with a cut exec stream took {:?}", started.elapsed());
    let r = report(&out);
    assert!(
        r["results"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["from"]["node"] == "n1" && x["outcome"] == "ok"),
        "n1's results were lost:\n{}",
        text(&out)
    );
    let n2 = not_run(&r, "n2");
    assert!(
        !n2.is_empty(),
        "the cut stream was not reported as n2's agents failing:\n{}",
        text(&out)
    );
    assert!(
        n2.iter().all(|d| !d.contains("did not finish within")),
        "n2's agents should be reported with the broken stream as the cause: {n2:?}"
    );
    nothing_left(&k);
}

/// n3's containers start 40 s late (a slow image pull): the wait keeps watching, quiet for
/// longer than any read timeout, and the run goes on with every agent.
#[test]
fn agents_starting_40_seconds_late_are_waited_for() {
    let Some(k) = RealLab::up("rcp", "tests/scenarios/healthy.yaml") else {
        return;
    };
    crate::flow::rbac_only(&k);
    let user = k.user("prober");
    k.cluster.fault("n3", "slow-start", Some("40")).unwrap();
    all_ran(&matrix(&k, &user, "120s", &[]));
    nothing_left(&k);
}

/// Why an agent is missing, per node, in the cluster's own words: n3 has no pod sandbox to give
/// (the broken-CNI case prober exists for) and says `FailedCreatePodSandBox`, not
/// `ContainerCreating`; an image that cannot be pulled says so.
#[test]
fn missing_agents_are_explained_by_their_pods_events() {
    let Some(k) = RealLab::up_with("rcw", "tests/scenarios/healthy.yaml", |c| {
        c.nodes
            .iter_mut()
            .find(|n| n.name == "n3")
            .unwrap()
            .sandboxes
            .clear();
    }) else {
        return;
    };
    crate::flow::rbac_only(&k);
    let user = k.user("prober");
    k.cluster.fault("n2", "pull-error", Some("")).unwrap();
    let out = matrix(&k, &user, "25s", &[]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let r = report(&out);
    let n3 = not_run(&r, "n3");
    assert!(
        n3.iter()
            .any(|d| d.starts_with("\"pod\"") && d.contains("FailedCreatePodSandBox")),
        "n3: {n3:?}\n{}",
        text(&out)
    );
    let n2 = not_run(&r, "n2");
    assert!(
        !n2.is_empty()
            && n2.iter().all(|d| d.contains("ImagePullBackOff")
                || d.contains("ErrImagePull")
                || d.contains("pull")),
        "n2: {n2:?}\n{}",
        text(&out)
    );
    nothing_left(&k);
}
