//! The project's manifests on the real control plane, applied as a user applies them: deploy/base
//! with `kubectl apply -k` (server-side apply), its agents scheduled and Ready, and the scheduled
//! mode's CronJob run by a node as a Job with in-cluster config, twice.

use crate::common::text;
use crate::kit::*;
use serde_json::Value;

/// The Events prober wrote about its findings (reasons), oldest first.
fn prober_events(k: &RealLab) -> Vec<String> {
    let v = k
        .cluster
        .get_json(&[
            "get",
            "events",
            "-n",
            "prober-system",
            "-l",
            "app.kubernetes.io/name=prober",
        ])
        .unwrap();
    let mut e: Vec<(String, String)> = v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            (
                e["metadata"]["creationTimestamp"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                e["reason"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    e.sort();
    e.into_iter().map(|(_, r)| r).collect()
}

/// Creates a Job from the CronJob (as `kubectl create job --from=cronjob/prober` does) and waits
/// for it to end; returns its pod's log and whether it succeeded.
fn run_job(k: &RealLab, name: &str) -> (String, bool) {
    k.cluster
        .kubectl(&[
            "create",
            "job",
            name,
            "--from=cronjob/prober",
            "-n",
            "prober-system",
        ])
        .unwrap();
    let mut done = None;
    eventually(240, "the scheduled Job never finished", || {
        let j = k
            .cluster
            .get_json(&["get", "job", name, "-n", "prober-system"])
            .ok()?;
        let conds = j["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let state = conds.iter().find_map(|c| {
            (c["status"] == "True" && (c["type"] == "Complete" || c["type"] == "Failed"))
                .then(|| c["type"].as_str().unwrap_or_default().to_string())
        });
        match state {
            Some(s) => {
                done = Some(s == "Complete");
                None
            }
            None => Some(format!("{j}\n{}", k.cluster.log("nodeshim-n2"))),
        }
    });
    let log = k
        .cluster
        .kubectl(&["logs", &format!("job/{name}"), "-n", "prober-system"])
        .unwrap_or_default();
    (log, done.unwrap_or(false))
}

/// deploy/scheduled applied with `kubectl apply -k`: the agents' DaemonSets scheduled by the real
/// scheduler and Ready by their own readiness probes; the CronJob's run, a pod of the cluster
/// with in-cluster config (its projected service-account token, the `kubernetes` Service's
/// ClusterIP through the lab's kube-proxy), finds the gap, writes its memory and its Events; the
/// second run announces nothing new. Every request of both runs is allowed by the manifests'
/// own RBAC.
#[test]
fn the_scheduled_cronjob_runs_in_cluster_twice_remembering_and_announcing_once() {
    let Some(k) = RealLab::up("rcs", "tests/scenarios/flannel-8472.yaml") else {
        return;
    };
    apply_k(&k, "deploy/scheduled");
    let flannel = std::fs::read_to_string(
        crate::common::root().join("deploy/base/optional/kube-flannel.yaml"),
    )
    .unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&flannel).unwrap();
    k.cluster
        .apply(
            &docs
                .into_iter()
                .filter(|d| !d.is_null())
                .collect::<Vec<_>>(),
        )
        .unwrap();
    pods_ready(&k, "prober-system", k.lab.layout.nodes.len() * 2);
    let since = k.cluster.audit().len();

    let (log, ok) = run_job(&k, "run-1");
    assert!(
        !ok,
        "the first run should fail the Job (a path fails):\n{log}"
    );
    let announced = prober_events(&k);
    assert!(
        announced.iter().any(|r| r == "FirewallGap"),
        "{announced:?}\n{log}"
    );
    k.cluster
        .get_json(&[
            "get",
            "configmap",
            "prober-last-report",
            "-n",
            "prober-system",
        ])
        .unwrap_or_else(|e| panic!("no memory written ({e}):\n{log}"));

    let (log2, ok2) = run_job(&k, "run-2");
    assert!(!ok2, "{log2}");
    assert_eq!(
        prober_events(&k),
        announced,
        "the second run announced again:\n{log2}"
    );
    let refused = refused(&k, since);
    assert!(
        refused.is_empty(),
        "the API server refused: {refused:#?}\n{log}\n{log2}"
    );
    // The permanent install is used as it is: nothing created, nothing removed.
    let ds = k
        .cluster
        .get_json(&["get", "daemonsets", "-n", "prober-system"])
        .unwrap();
    assert_eq!(
        ds["items"].as_array().map_or(0, Vec::len),
        2,
        "{}",
        text_of(&ds)
    );
}

fn text_of(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// deploy/base applied with `kubectl apply -k`, then `prober matrix --use-existing` from the
/// control-plane node: its agents are used as they are and the run's findings are the lab's.
#[test]
fn deploy_base_applied_with_kubectl_serves_a_use_existing_run() {
    let Some(k) = RealLab::up("rcb", "tests/scenarios/flannel-8472.yaml") else {
        return;
    };
    apply_k(&k, "deploy/base");
    pods_ready(&k, "prober-system", k.lab.layout.nodes.len() * 2);
    let user = k.user("prober");
    let out = run(&k, &["matrix", "--use-existing", "-o", "json"], &user);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let r = report(&out);
    assert!(
        r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["kind"] == "firewall-gap" && f["port"] == 8472),
        "{}",
        text(&out)
    );
}
