//! The pod statuses the kubelet writes: a container's status, a Pending pod waiting for a
//! reason, and a Running pod with its readiness.

use std::net::Ipv4Addr;

use serde_json::{Value, json};

use super::PodRun;

fn container_status(pod: &Value, state: &Value, ready: bool, p: &PodRun) -> Value {
    let c = &pod["spec"]["containers"][0];
    let mut s = json!({"name": c["name"], "image": c["image"], "imageID": "",
        "ready": ready, "restartCount": p.restarts, "started": state.get("running").is_some(),
        "state": state});
    if let Some(code) = p.last_exit {
        s["lastState"] = json!({"terminated": {"exitCode": code,
            "reason": if code == 0 { "Completed" } else { "Error" }}});
        if let Some(m) = &p.last_message {
            s["lastState"]["terminated"]["message"] = json!(m);
        }
    }
    json!([s])
}

pub(super) fn waiting(
    pod: &Value,
    reason: &str,
    message: &str,
    p: &PodRun,
    host_ip: Ipv4Addr,
) -> Value {
    let mut w = json!({"reason": reason});
    if !message.is_empty() {
        w["message"] = json!(message);
    }
    json!({"phase": "Pending", "hostIP": host_ip.to_string(),
        "conditions": [{"type": "PodScheduled", "status": "True"},
                       {"type": "Ready", "status": "False", "reason": "ContainersNotReady"}],
        "containerStatuses": container_status(pod, &json!({"waiting": w}), false, p)})
}

/// A Running pod's status, its conditions as ready as `p.ready` says.
pub(super) fn running(pod: &Value, p: &PodRun, host_ip: Ipv4Addr, ip: Ipv4Addr) -> Value {
    let ready = if p.ready { "True" } else { "False" };
    json!({
        "phase": "Running", "hostIP": host_ip.to_string(), "podIP": ip.to_string(),
        "podIPs": [{"ip": ip.to_string()}], "startTime": p.started_at,
        "conditions": [{"type": "PodScheduled", "status": "True"},
                       {"type": "Initialized", "status": "True"},
                       {"type": "ContainersReady", "status": ready},
                       {"type": "Ready", "status": ready}],
        "containerStatuses": container_status(pod,
            &json!({"running": {"startedAt": p.started_at}}), p.ready, p),
    })
}
