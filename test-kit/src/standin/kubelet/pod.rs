//! A pod's way to a running container: its kubelet's record of it, the scheduler's host-port
//! check, the node's faults, its sandbox and its volumes; each may keep it Pending.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use super::super::{Inner, lock};
use super::controllers::{involved, write_event};
use super::schedule::{Held, unschedulable};
use super::status::waiting;
use super::volumes::host_path_error;
use super::{PodRun, container, faults, node_spec, pod_key, sandbox, stop};

/// The pod's next status (None: leave it as it is).
pub(super) fn step(inner: &Arc<Inner>, pod: &Value, held: &Held, node: &str) -> Option<Value> {
    let spec_node = node_spec(inner, node)?.clone();
    let key = pod_key(pod);
    let uid = pod["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let faults = lock(&inner.faults).clone();
    let mut k = lock(&inner.kubelet);
    if k.pods.get(&key).is_some_and(|p| p.uid != uid)
        && let Some(old) = k.pods.remove(&key)
    {
        stop(old.child, &key, inner);
    }
    let p = k.pods.entry(key.clone()).or_insert_with(|| PodRun {
        uid: uid.clone(),
        node: node.to_string(),
        created: Instant::now(),
        scheduled: false,
        sandbox: None,
        child: None,
        stub: false,
        started_at: None,
        restarts: 0,
        next_start: None,
        last_exit: None,
        last_message: None,
        ready: false,
        evented: BTreeSet::new(),
    });
    // The scheduler: a host port another pod of this node holds keeps the pod Pending.
    if !p.scheduled {
        if let Some(status) = unschedulable(inner, pod, held, node) {
            return Some(status);
        }
        p.scheduled = true;
    }
    let host_ip = spec_node.address;
    if faults.not_ready.contains(node) {
        return Some(faults::not_ready());
    }
    if faults
        .pending
        .get(node)
        .is_some_and(|d| p.created.elapsed() < *d)
    {
        return Some(waiting(pod, "ContainerCreating", "", p, host_ip));
    }
    let host_network = pod["spec"]["hostNetwork"] == true;
    if p.sandbox.is_none() {
        // The CNI sets up only pod networks: a hostNetwork pod needs none.
        if faults.sandbox.contains(node) && !host_network {
            if p.evented.insert("FailedCreatePodSandBox".into()) {
                drop(k);
                write_event(
                    inner,
                    &key.0,
                    &involved("Pod", "v1", pod),
                    "FailedCreatePodSandBox",
                    faults::SANDBOX,
                    node,
                );
                k = lock(&inner.kubelet);
            }
            let p = k.pods.get(&key)?;
            return Some(waiting(pod, "ContainerCreating", "", p, host_ip));
        }
        let sandbox = sandbox::choose(&k, &spec_node, pod);
        let p = k.pods.get_mut(&key)?;
        p.sandbox = sandbox;
        if p.sandbox.is_none() {
            return Some(waiting(pod, "ContainerCreating", "", p, host_ip));
        }
    }
    let p = k.pods.get_mut(&key)?;
    if let Some(why) = host_path_error(&spec_node.root, pod) {
        if p.evented.insert("FailedMount".into()) {
            drop(k);
            write_event(
                inner,
                &key.0,
                &involved("Pod", "v1", pod),
                "FailedMount",
                &why,
                node,
            );
            k = lock(&inner.kubelet);
        }
        let p = k.pods.get(&key)?;
        return Some(waiting(pod, "ContainerCreating", "", p, host_ip));
    }
    if faults.image_pull {
        let (reason, msg) = faults::image_pull(pod, p.created);
        return Some(waiting(pod, reason, &msg, p, host_ip));
    }
    // The container: started, exited (restarted as restartPolicy says), running.
    container::step(inner, pod, &key.1, p, host_ip)
}
