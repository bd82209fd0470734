//! A hostNetwork pod's container ports are host ports: each `containerPort` without a `hostPort`
//! gets it as its `hostPort` (`pkg/apis/core/v1/defaults.go`, `defaultHostNetworkPorts` from
//! `SetDefaults_PodSpec`), and the scheduler places no pod on a node where another pod already
//! holds one of its host ports (`pkg/scheduler/framework/plugins/nodeports/node_ports.go`:
//! "node(s) didn't have free ports for the requested pod ports"): it stays Pending.

use serde_json::{Value, json};

pub fn default_host_ports(spec: &mut Value) {
    if spec["hostNetwork"] != true {
        return;
    }
    let Some(containers) = spec["containers"].as_array_mut() else {
        return;
    };
    for c in containers {
        let Some(ports) = c["ports"].as_array_mut() else {
            continue;
        };
        for p in ports {
            if p["hostPort"].as_i64().unwrap_or(0) == 0 {
                p["hostPort"] = p["containerPort"].clone();
            }
        }
    }
}

/// The (protocol, host port) pairs a pod holds on its node.
#[must_use]
pub fn host_ports(pod: &Value) -> Vec<(String, i64)> {
    let mut out = Vec::new();
    for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
        for p in c["ports"].as_array().into_iter().flatten() {
            let port = p["hostPort"].as_i64().unwrap_or(0);
            if port > 0 {
                let proto = p["protocol"].as_str().unwrap_or("TCP").to_string();
                out.push((proto, port));
            }
        }
    }
    out
}

/// The scheduler's message for a pod none of whose `nodes` has its host ports free.
#[must_use]
pub fn unschedulable(nodes: usize) -> Value {
    json!(format!(
        "0/{nodes} nodes are available: 1 node(s) didn't have free ports for the requested pod ports."
    ))
}
