//! Readiness: the readiness probe's port listens in the pod's network namespace.

use std::process::Child;

use serde_json::Value;

use super::PodRun;

/// Whether the pod is ready: a stub at once, a container with no readiness probe while it runs,
/// one with an `httpGet` probe once something listens on the probe's port.
pub(super) fn ready(pod: &Value, p: &PodRun) -> bool {
    let port = pod["spec"]["containers"][0]["readinessProbe"]["httpGet"]["port"].as_u64();
    let pid = p.child.as_ref().map(Child::id);
    match (port, pid) {
        _ if p.stub => true,
        (Some(port), Some(pid)) => listening(pid, port),
        (None, Some(_)) => true,
        _ => false,
    }
}

/// Whether a TCP socket listens on `port` in the network namespace of process `pid`
/// (`/proc/PID/net/tcp` shows that namespace's sockets).
fn listening(pid: u32, port: u64) -> bool {
    // An agent on `::` (both families, its default) is listed in tcp6 only; the kubelet's
    // httpGet to the pod's IPv4 address reaches it all the same.
    ["tcp", "tcp6"].iter().any(|file| {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{file}")) else {
            return false;
        };
        text.lines().skip(1).any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3
                && f[3] == "0A"
                && f[1]
                    .rsplit(':')
                    .next()
                    .and_then(|h| u64::from_str_radix(h, 16).ok())
                    == Some(port)
        })
    })
}
