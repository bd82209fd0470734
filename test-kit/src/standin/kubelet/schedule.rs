//! The scheduler's host-port check: a pod waits, Unschedulable, while another live pod of its
//! node holds one of its host ports.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::super::Inner;
use super::super::rules::host_ports;

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
