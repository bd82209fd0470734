//! A run through the stand-in and its faults: discovery and the matrix against the lab's own
//! inventory, the scheduled flow, a rerun, a cut exec stream, slow and missing agents.

use std::time::{Duration, Instant};

use crate::common::{comparable_inventory, prober, text};
use crate::kit::*;
use serde_json::Value;
use std::process::Command;
use test_kit::standin::StandIn;

#[test]
fn discover_and_matrix_through_the_standin_match_the_labs_inventory_and_leave_nothing() {
    let Some(k) = KubeLab::up("ke2m", "tests/scenarios/flannel-8472.yaml", Some("prober")) else {
        return;
    };
    // Every request is authorised against deploy/base's RBAC, as a cluster admin applied it
    // (the namespace, the coordinator's service account and roles; not the agents yet).
    k.standin
        .create_all(deploy_base(|d| !is_agent_daemonset(d)))
        .unwrap();

    // discover -o yaml: the lab's own inventory, as far as discovery can know it.
    let out = run(&["discover", "-o", "json"], k.kubeconfig());
    assert!(out.status.success(), "{}", text(&out));
    let mut found: Value = serde_json::from_slice(&out.stdout).unwrap();
    // deploy/base's allow NetworkPolicy, created above, is read as a policy of the agents'
    // namespace; the lab's scenario has none.
    let policies = found["cluster"]["policies"].take();
    assert_eq!(
        policies[0]["metadata"]["name"], "prober-agents",
        "{policies}"
    );
    found["cluster"].as_object_mut().unwrap().remove("policies");
    let mut lab: Value =
        serde_json::to_value(prober::lab::build::inventory(&k.scenario, &k.lab.layout)).unwrap();
    comparable_inventory(&mut found);
    comparable_inventory(&mut lab);
    assert_eq!(
        serde_json::to_string_pretty(&found).unwrap(),
        serde_json::to_string_pretty(&lab).unwrap(),
        "discovery through the stand-in differs from the lab's inventory"
    );

    // matrix --kubeconfig, no inventory: this run's own agents, created and removed.
    let out = matrix_through(&k, "60s");
    let kube = report(&out);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let expected = k.scenario.expanded_expect().findings;
    for want in &expected {
        assert!(
            kube["findings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| want.matches(&serde_json::from_value(f.clone()).unwrap())),
            "the kube run misses {want:?}:\n{}",
            text(&out)
        );
    }
    nothing_left(&k);
    assert!(
        !text(&out).contains(k.standin.token()),
        "the token was printed"
    );

    // The same lab probed from its inventory (agents now deploy/base's, serving every node):
    // exactly the same findings.
    k.standin
        .create_all(deploy_base(is_agent_daemonset))
        .unwrap();
    agents_ready(&k, k.lab.layout.nodes.len() * 2);
    let out = Command::new(prober())
        .args(["matrix", "-o", "json", "--inventory"])
        .arg(&k.lab.inventory_path)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let inventory = report(&out);
    assert_eq!(
        findings(&kube),
        findings(&inventory),
        "the kube run's findings:\n{:#}\nits failed results:\n{:#}",
        kube["findings"],
        failed(&kube)
    );
}

/// A stand-in without a lab: its rules, through the real kube client (no root needed).
fn prober_events(s: &StandIn) -> Vec<String> {
    s.list("events")
        .iter()
        .filter(|e| e["metadata"]["labels"]["app.kubernetes.io/name"] == "prober")
        .map(|e| e["reason"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The scheduled mode (the `CronJob`'s own arguments) against deploy/base's agents, twice: the
/// API server accepts its Events, the memory is written, the second run announces nothing new.
#[test]
fn the_scheduled_flow_twice_announces_each_change_once_and_remembers_it() {
    let Some(k) = KubeLab::up(
        "ke2s",
        "tests/scenarios/flannel-8472.yaml",
        Some("prober-scheduled"),
    ) else {
        return;
    };
    // deploy/scheduled: the base, its own RBAC (the CronJob's service account), and the
    // optional bindings for the CNI namespace this cluster has.
    k.standin.create_all(deploy_base(|_| true)).unwrap();
    k.standin
        .create_all(deploy_file("deploy/scheduled/rbac.yaml"))
        .unwrap();
    k.standin
        .create_all(deploy_file("deploy/base/optional/kube-flannel.yaml"))
        .unwrap();
    agents_ready(&k, k.lab.layout.nodes.len() * 2);
    let args = ["matrix", "--use-existing", "--remember", "-o", "json"];
    let first = run(&args, k.kubeconfig());
    assert_eq!(first.status.code(), Some(1), "{}", text(&first));
    let refused = refused(&k.standin, 0);
    assert!(refused.is_empty(), "refused: {refused:?}\n{}", text(&first));
    let announced = prober_events(&k.standin);
    assert!(
        announced.iter().any(|r| r == "FirewallGap"),
        "{announced:?}\n{}",
        text(&first)
    );
    assert!(
        k.standin
            .get("configmaps", "prober-system", "prober-last-report")
            .is_some(),
        "no memory written:\n{}",
        text(&first)
    );
    let second = run(&args, k.kubeconfig());
    assert_eq!(second.status.code(), Some(1), "{}", text(&second));
    assert_eq!(
        prober_events(&k.standin),
        announced,
        "the second run announced again:\n{}",
        text(&second)
    );
    // A permanent install is used as it is: nothing created, nothing removed.
    assert_eq!(
        k.standin
            .list("daemonsets")
            .iter()
            .filter(|d| d["metadata"]["namespace"] == "prober-system")
            .count(),
        2
    );
}

/// A run right after another that created (and deleted) its own namespace: the namespace is
/// still Terminating (its deletion outlasts the first run's wait for it), and the second run
/// must neither fail with a raw 403 nor leave anything.
#[test]
fn a_rerun_while_the_last_namespace_terminates_runs() {
    let Some(k) = KubeLab::up_with("ke2r", "tests/scenarios/healthy.yaml", None, |_, c| {
        c.terminating = Duration::from_secs(20);
    }) else {
        return;
    };
    let first = matrix_through(&k, "60s");
    report(&first);
    assert!(
        k.standin
            .get("namespaces", "", "prober-system")
            .is_some_and(|n| n["status"]["phase"] == "Terminating"),
        "the first run's namespace should be terminating:\n{}",
        text(&first)
    );
    let second = matrix_through(&k, "60s");
    let r = report(&second);
    assert!(
        r["results"].as_array().is_some_and(|v| !v.is_empty()),
        "{}",
        text(&second)
    );
    nothing_left(&k);
}

/// An exec stream that breaks mid-run: that agent's probes are reported with the cause within
/// seconds; the other agents' results are kept.
#[test]
fn an_exec_stream_cut_mid_run_is_reported_with_its_cause_and_the_rest_kept() {
    let Some(k) = KubeLab::up("ke2c", "tests/scenarios/healthy.yaml", None) else {
        return;
    };
    k.standin.faults(|f| f.exec_cut = Some(("n2".into(), 200)));
    let started = Instant::now();
    let out = matrix_through(&k, "60s");
    let took = started.elapsed();
    let r = report(&out);
    let from = |node: &str| {
        r["results"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|x| x["from"]["node"] == node)
            .cloned()
            .collect::<Vec<_>>()
    };
    assert!(
        from("n1").iter().any(|x| x["outcome"] == "ok"),
        "n1's results were lost:\n{}",
        text(&out)
    );
    let n2_failed: Vec<String> = r["agents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["node"] == "n2" && a["ran"] == false)
        .map(|a| a["detail"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(
        !n2_failed.is_empty(),
        "the cut stream was not reported as n2's agent failing:\n{}",
        text(&out)
    );
    // The cause is the broken stream, not the plan's deadline (how long it took is printed,
    // not asserted: a busy machine is slow).
    eprintln!("run with a cut exec stream took {took:?}; n2: {n2_failed:?}");
    assert!(
        n2_failed
            .iter()
            .all(|d| !d.contains("did not finish within")
                && ["stream", "connection", "closed", "lost", "broke"]
                    .iter()
                    .any(|w| d.contains(w))),
        "n2's agent should be reported with the broken stream as its cause: {n2_failed:?}"
    );
    nothing_left(&k);
}

/// Agents Pending for 40 s on one node (a slow image pull): the wait keeps watching, quiet
/// for longer than any read timeout, and the run goes on with every agent.
#[test]
fn agents_pending_for_40_seconds_are_waited_for() {
    let Some(k) = KubeLab::up("ke2p", "tests/scenarios/healthy.yaml", None) else {
        return;
    };
    k.standin.faults(|f| {
        f.pending.insert("n3".into(), Duration::from_secs(40));
    });
    no_agent_missing(&matrix_through(&k, "90s"));
    nothing_left(&k);
}

/// Why an agent is missing, per node, in the cluster's own words: a `NotReady` node says so, a
/// pod sandbox the CNI could not make says `FailedCreatePodSandBox` (the broken-CNI case prober
/// exists for), not `ContainerCreating`.
#[test]
fn missing_agents_are_explained_by_their_nodes_and_pods_events() {
    let Some(k) = KubeLab::up("ke2w", "tests/scenarios/healthy.yaml", None) else {
        return;
    };
    k.standin.faults(|f| {
        f.not_ready.insert("n2".into());
        f.sandbox.insert("n3".into());
    });
    let out = matrix_through(&k, "20s");
    let r = report(&out);
    let detail = |node: &str, agent: &str| {
        r["agents"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["node"] == node && a["agent"] == agent && a["ran"] == false)
            .and_then(|a| a["detail"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    let n2 = detail("n2", "host");
    assert!(n2.contains("NotReady"), "n2: {n2:?}\n{}", text(&out));
    let n3 = detail("n3", "pod");
    assert!(
        n3.contains("FailedCreatePodSandBox"),
        "n3: {n3:?}\n{}",
        text(&out)
    );
    nothing_left(&k);
}

/// A result stream passed on slowly (a big matrix, a slow coordinator): the session lives past
/// its deadline (here the plan's 1.2 s plus 10 s) while results keep arriving, and every agent's
/// results are kept.
#[test]
fn a_slow_result_stream_that_keeps_flowing_outlives_the_session_deadline() {
    let Some(k) = KubeLab::up("ke2w", "tests/scenarios/healthy.yaml", None) else {
        return;
    };
    k.standin
        .faults(|f| f.exec_slow = Some((48, Duration::from_millis(200))));
    let started = Instant::now();
    let out = matrix_cmd(&k, "60s", None)
        .args(["--timeout", "100ms"])
        .output()
        .unwrap();
    eprintln!("the slowed run took {:?}", started.elapsed());
    no_agent_missing(&out);
    nothing_left(&k);
}
