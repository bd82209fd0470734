//! What real nodes do to a run: an agent the scheduler cannot place, a node gone NotReady whose
//! pods' deletion no kubelet will confirm.

use crate::common::text;
use crate::flow::rbac_only;
use crate::kit::*;
use serde_json::Value;

fn agents_not_run(r: &Value) -> Vec<(String, String, String)> {
    r["agents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["ran"] == false)
        .map(|a| {
            (
                a["node"].as_str().unwrap_or_default().to_string(),
                a["agent"].as_str().unwrap_or_default().to_string(),
                a["detail"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// n3 has too little CPU for the agents' requests: the DaemonSet controller still makes its
/// pods (with a node affinity naming n3, never `nodeName`), the scheduler leaves them Pending
/// with its own message, and the run says so for n3 instead of "no agent pod was created".
#[test]
fn an_agent_the_scheduler_cannot_place_is_reported_with_the_schedulers_words() {
    let Some(k) = RealLab::up_with("rcu", "tests/scenarios/healthy.yaml", |c| {
        let n3 = c.nodes.iter_mut().find(|n| n.name == "n3").unwrap();
        n3.cpu = "5m".into();
    }) else {
        return;
    };
    rbac_only(&k);
    let user = k.user("prober");
    let out = matrix(&k, &user, "20s", &[]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let missing = agents_not_run(&report(&out));
    assert!(!missing.is_empty(), "{}", text(&out));
    for (node, agent, detail) in &missing {
        assert_eq!(node, "n3", "only n3's agents are missing: {missing:?}");
        assert!(
            detail.contains("Insufficient cpu"),
            "n3's {agent} agent: {detail:?}\n{}",
            text(&out)
        );
    }
    nothing_left(&k);
}

/// n2's kubelet stops answering (its shim cannot reach the API server): the node goes NotReady,
/// the agents tolerate it and are bound there, and their graceful deletion is never confirmed.
/// Two runs back to back both report n2 and exit 3; the second does not wait for the first's
/// leftovers; nothing of prober's is left once n2 is back.
#[test]
fn two_runs_with_a_not_ready_node_both_report_it_and_the_second_does_not_wait() {
    let Some(k) = RealLab::up("rcn", "tests/scenarios/healthy.yaml") else {
        return;
    };
    rbac_only(&k);
    let user = k.user("prober");
    k.cluster.fault("n2", "not-ready", Some("")).unwrap();
    eventually(60, "n2 never went NotReady", || {
        let n = k.cluster.get_json(&["get", "node", "n2"]).ok()?;
        let ready = n["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "Ready")
            .map(|c| c["status"].clone());
        (ready == Some(Value::from("True"))).then(|| n["status"].to_string())
    });
    for attempt in ["first", "second"] {
        let started = std::time::Instant::now();
        let out = matrix(&k, &user, "20s", &[]);
        let took = started.elapsed();
        eprintln!("{attempt} run took {took:?}");
        assert_eq!(out.status.code(), Some(3), "{attempt}: {}", text(&out));
        let missing = agents_not_run(&report(&out));
        assert!(
            missing.iter().all(|(n, _, _)| n == "n2") && !missing.is_empty(),
            "{attempt}: {missing:?}\n{}",
            text(&out)
        );
        assert!(
            !text(&out).contains("still terminating"),
            "{attempt} run waited for an earlier run's namespace:\n{}",
            text(&out)
        );
    }
    k.cluster.fault("n2", "not-ready", None).unwrap();
    nothing_left(&k);
}
