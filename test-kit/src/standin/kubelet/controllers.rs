//! The control loops beside the kubelet: the node lifecycle controller's `NotReady` marks, the
//! DaemonSet controller (one pod per eligible node, a `FailedCreate` event when admission
//! refuses it) and the garbage collector (a DaemonSet's pods go with it).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};

use super::super::api::{self, Status};
use super::super::rules::pod_grace;
use super::super::seed;
use super::super::store::{Key, index, now_rfc3339};
use super::super::{Inner, lock};
use super::RETRY_CREATE;
use super::schedule::target_node;

/// Marks the nodes the faults say are `NotReady` (condition and taints, as the node lifecycle
/// controller sets them) and the others `Ready`.
pub fn apply_node_faults(inner: &Inner) {
    let not_ready = lock(&inner.faults).not_ready.clone();
    let mut s = lock(&inner.store);
    for mut n in s
        .list(index("nodes"), None)
        .into_iter()
        .cloned()
        .collect::<Vec<_>>()
    {
        let name = n["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let down = not_ready.contains(&name);
        let was_down = n["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] != "True");
        if down == was_down {
            continue;
        }
        let ready = if down {
            json!({"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                   "message": "Kubelet stopped posting node status."})
        } else {
            json!({"type": "Ready", "status": "True", "reason": "KubeletReady",
                   "message": "kubelet is posting ready status"})
        };
        let mut conditions: Vec<Value> = n["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c["type"] != "Ready")
            .collect();
        conditions.push(ready);
        n["status"]["conditions"] = json!(conditions);
        let mut taints: Vec<Value> = n["spec"]["taints"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|t| t["key"] != "node.kubernetes.io/unreachable")
            .collect();
        if down {
            for effect in ["NoSchedule", "NoExecute"] {
                taints.push(json!({"key": "node.kubernetes.io/unreachable", "effect": effect}));
            }
        }
        n["spec"]["taints"] = json!(taints);
        s.update(index("nodes"), n);
    }
}

pub(super) fn labels_match(selector: &Value, labels: &Value) -> bool {
    selector
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| &labels[k] == v)
}

pub(super) fn owner_uid(pod: &Value) -> Option<String> {
    pod["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|o| o["controller"] == true)
        .and_then(|o| o["uid"].as_str().map(String::from))
}

pub(super) fn write_event(
    inner: &Inner,
    ns: &str,
    involved: &Value,
    reason: &str,
    message: &str,
    host: &str,
) {
    let component = if host.is_empty() {
        "daemonset-controller"
    } else {
        "kubelet"
    };
    write_event_by(inner, ns, involved, (reason, message), component, host);
}

/// A warning event about `involved`, `(reason, message)`, from `component` (on `host`).
pub(super) fn write_event_by(
    inner: &Inner,
    ns: &str,
    involved: &Value,
    (reason, message): (&str, &str),
    component: &str,
    host: &str,
) {
    let n = {
        let mut k = lock(&inner.kubelet);
        k.events += 1;
        k.events
    };
    let name = format!(
        "{}.{:016x}",
        involved["name"].as_str().unwrap_or_default(),
        n
    );
    let now = now_rfc3339();
    let ev = json!({
        "metadata": {"name": name, "namespace": ns},
        "involvedObject": involved, "reason": reason, "message": message, "type": "Warning",
        "source": {"component": component, "host": host},
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
    });
    lock(&inner.store).create(index("events"), ev);
}

pub(super) fn involved(kind: &str, api_version: &str, o: &Value) -> Value {
    let m = &o["metadata"];
    json!({"kind": kind, "apiVersion": api_version, "namespace": m["namespace"],
           "name": m["name"], "uid": m["uid"]})
}

/// The DaemonSet controller and the garbage collector.
pub(super) fn controllers(inner: &Arc<Inner>) {
    let (daemonsets, pods, nodes) = {
        let s = lock(&inner.store);
        let all = |p: &str| -> Vec<Value> { s.list(index(p), None).into_iter().cloned().collect() };
        (all("daemonsets"), all("pods"), all("nodes"))
    };
    let ds_uids: BTreeSet<String> = daemonsets
        .iter()
        .filter_map(|d| d["metadata"]["uid"].as_str().map(String::from))
        .collect();
    // Garbage collection: a pod whose controlling DaemonSet is gone is deleted.
    for p in &pods {
        if p["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet"
            && owner_uid(p).is_some_and(|u| !ds_uids.contains(&u))
            && p["metadata"]["deletionTimestamp"].is_null()
        {
            mark_deleted(inner, p);
        }
    }
    let placed: BTreeSet<(String, String)> = pods
        .iter()
        .filter_map(|p| Some((owner_uid(p)?, target_node(p)?)))
        .collect();
    for ds in &daemonsets {
        // A seeded DaemonSet stands for one that runs already: its pods are seeded too.
        if ds["metadata"]["labels"][seed::SEEDED] == "true" {
            continue;
        }
        let uid = ds["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if lock(&inner.kubelet)
            .ds_retry
            .get(&uid)
            .is_some_and(|t| Instant::now() < *t)
        {
            continue;
        }
        let ns = ds["metadata"]["namespace"].as_str().unwrap_or_default();
        let template = &ds["spec"]["template"];
        for node in &nodes {
            let node_name = node["metadata"]["name"].as_str().unwrap_or_default();
            if !labels_match(
                &template["spec"]["nodeSelector"],
                &node["metadata"]["labels"],
            ) {
                continue;
            }
            if placed.contains(&(uid.clone(), node_name.to_string())) {
                continue;
            }
            // Never nodeName: the pod asks for its node by a required node affinity, and the
            // scheduler binds it (kubernetes/kubernetes pkg/controller/daemon/
            // daemon_controller.go, syncNodes: util.ReplaceDaemonSetPodNodeNameNodeAffinity).
            let mut spec = template["spec"].clone();
            spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = json!({"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]});
            let pod = json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {
                    "generateName": format!("{}-", ds["metadata"]["name"].as_str().unwrap_or_default()),
                    "namespace": ns,
                    "labels": template["metadata"]["labels"],
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                        "name": ds["metadata"]["name"], "uid": uid, "controller": true,
                        "blockOwnerDeletion": true}],
                },
                "spec": spec,
            });
            if let Err(e) = api::create(inner, index("pods"), pod) {
                refused(inner, ds, &uid, &e);
                break;
            }
        }
    }
}

/// The DaemonSet controller's `FailedCreate` event for a pod admission refused.
pub(super) fn refused(inner: &Inner, ds: &Value, uid: &str, e: &Status) {
    lock(&inner.kubelet)
        .ds_retry
        .insert(uid.to_string(), Instant::now() + RETRY_CREATE);
    let ns = ds["metadata"]["namespace"].as_str().unwrap_or_default();
    write_event(
        inner,
        ns,
        &involved("DaemonSet", "apps/v1", ds),
        "FailedCreate",
        &format!("Error creating: {}", e.message),
        "",
    );
}

/// A graceful delete (the garbage collector's, the namespace controller's): marked, for its
/// node's kubelet to confirm, or removed at once when its grace is 0 (`rules::pod_grace`: a pod
/// no node runs).
pub(super) fn mark_deleted(inner: &Inner, pod: &Value) {
    let mut s = lock(&inner.store);
    if pod_grace::grace(pod, &json!({})) == 0 {
        s.remove(&Key::of(index("pods"), pod));
        return;
    }
    let mut p = pod.clone();
    p["metadata"]["deletionTimestamp"] = json!(now_rfc3339());
    s.update(index("pods"), p);
}
