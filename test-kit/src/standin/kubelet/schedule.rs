//! The scheduler: it binds a pod that names no node to the node its required node affinity
//! asks for (a DaemonSet's pods), unless that node's allocatable CPU cannot hold its requests;
//! then the pod stays Pending, `PodScheduled=False`, with the scheduler's own message and a
//! `FailedScheduling` event. And its host-port check: a pod waits, Unschedulable, while another
//! live pod of its node holds one of its host ports.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::super::rules::host_ports;
use super::super::store::{Key, index};
use super::super::{Inner, lock};
use super::controllers::{involved, write_event_by};

/// The node a pod is for: its `nodeName`, else the one node its required node affinity names
/// by `metadata.name` (kubernetes/kubernetes pkg/controller/daemon/util/daemonset_util.go,
/// `GetTargetNodeName`).
pub(super) fn target_node(pod: &Value) -> Option<String> {
    if let Some(n) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
        return Some(n.to_string());
    }
    let terms = &pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"];
    terms.as_array()?.iter().find_map(|t| {
        t["matchFields"].as_array()?.iter().find_map(|f| {
            let values = f["values"].as_array()?;
            (f["key"] == "metadata.name" && f["operator"] == "In" && values.len() == 1)
                .then(|| values[0].as_str().map(String::from))?
        })
    })
}

/// A CPU quantity in millicores (`10m`, `2`, `0.5`); None when it does not parse.
fn millicores(q: &Value) -> Option<i64> {
    let q = q.as_str()?;
    if let Some(m) = q.strip_suffix('m') {
        return m.parse().ok();
    }
    #[allow(clippy::cast_possible_truncation)]
    q.parse::<f64>().ok().map(|c| (c * 1000.0).round() as i64)
}

/// The CPU a pod's containers request, in millicores.
fn requested(pod: &Value) -> i64 {
    pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| millicores(&c["resources"]["requests"]["cpu"]))
        .sum()
}

/// The scheduler's refusal, as `FitError.Error` writes it (kubernetes/kubernetes
/// pkg/scheduler/framework/types.go): each reason prefixed by its node count, sorted as
/// strings, then the preemption's own verdict.
fn fit_error(nodes: usize, filters: &[String], preemption: &[String]) -> String {
    let histogram = |reasons: &[String]| {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for r in reasons {
            *counts.entry(r.as_str()).or_default() += 1;
        }
        let mut v: Vec<String> = counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
        v.sort();
        v.join(", ")
    };
    format!(
        "0/{nodes} nodes are available: {}. preemption: 0/{nodes} nodes are available: {}.",
        histogram(filters),
        histogram(preemption)
    )
}

/// Binds every pod that names no node yet to its target node when it fits there, else marks it
/// Unschedulable (once, with a `FailedScheduling` event).
pub(super) fn bind(inner: &Inner) {
    let (pods, nodes) = {
        let s = lock(&inner.store);
        let all = |p: &str| -> Vec<Value> { s.list(index(p), None).into_iter().cloned().collect() };
        (all("pods"), all("nodes"))
    };
    for pod in &pods {
        let unbound = pod["spec"]["nodeName"].as_str().is_none_or(str::is_empty);
        if !unbound || !pod["metadata"]["deletionTimestamp"].is_null() {
            continue;
        }
        let Some(target) = target_node(pod) else {
            continue;
        };
        let want = requested(pod);
        let mut filters = Vec::new();
        let mut preemption = Vec::new();
        let mut fits = false;
        for n in &nodes {
            let name = n["metadata"]["name"].as_str().unwrap_or_default();
            if name != target {
                filters.push("node(s) didn't match Pod's node affinity/selector".to_string());
                preemption.push("Preemption is not helpful for scheduling".to_string());
                continue;
            }
            let used: i64 = pods
                .iter()
                .filter(|p| {
                    p["spec"]["nodeName"] == name && p["metadata"]["deletionTimestamp"].is_null()
                })
                .map(requested)
                .sum();
            match millicores(&n["status"]["allocatable"]["cpu"]) {
                Some(free) if used + want > free => {
                    filters.push("Insufficient cpu".to_string());
                    preemption.push("No preemption victims found for incoming pod".to_string());
                }
                _ => fits = true,
            }
        }
        let mut p = pod.clone();
        if fits {
            // The binding: the node, and PodScheduled (the kubelet writes the rest).
            p["spec"]["nodeName"] = json!(target);
            p["status"] = json!({"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "True"}]});
        } else {
            let message = fit_error(nodes.len(), &filters, &preemption);
            let status = json!({"phase": "Pending", "conditions": [{"type": "PodScheduled",
                "status": "False", "reason": "Unschedulable", "message": message}]});
            if p["status"] == status {
                continue;
            }
            p["status"] = status;
            let ns = p["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            write_event_by(
                inner,
                &ns,
                &involved("Pod", "v1", pod),
                ("FailedScheduling", &message),
                "default-scheduler",
                "",
            );
        }
        let mut s = lock(&inner.store);
        if s.get(&Key::of(index("pods"), &p))
            .is_some_and(|c| c["metadata"]["uid"] == p["metadata"]["uid"])
        {
            s.update(index("pods"), p);
        }
    }
}

/// The host ports each node's scheduled, live pods hold: node -> (pod uid, port) pairs.
pub(super) type Held = BTreeMap<String, Vec<(String, (String, i64))>>;

pub(super) fn held_ports(pods: &[Value]) -> Held {
    let mut held = Held::new();
    for o in pods {
        let scheduled = o["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "PodScheduled" && c["status"] == "True");
        if !scheduled || !o["metadata"]["deletionTimestamp"].is_null() {
            continue;
        }
        let (Some(node), Some(uid)) = (
            o["spec"]["nodeName"].as_str(),
            o["metadata"]["uid"].as_str(),
        ) else {
            continue;
        };
        let entry = held.entry(node.to_string()).or_default();
        entry.extend(
            host_ports::host_ports(o)
                .into_iter()
                .map(|hp| (uid.to_string(), hp)),
        );
    }
    held
}

/// The pod's Pending status when a host port it asks for is held on its node by another pod.
pub(super) fn unschedulable(inner: &Inner, pod: &Value, held: &Held, node: &str) -> Option<Value> {
    let mine = host_ports::host_ports(pod);
    let taken = held
        .get(node)
        .into_iter()
        .flatten()
        .any(|(uid, hp)| pod["metadata"]["uid"] != uid.as_str() && mine.contains(hp));
    taken.then(|| {
        json!({"phase": "Pending", "conditions": [{"type": "PodScheduled",
        "status": "False", "reason": "Unschedulable",
        "message": host_ports::unschedulable(inner.config.nodes.len())}]})
    })
}
