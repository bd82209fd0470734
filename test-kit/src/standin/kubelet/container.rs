//! The pod's container once its sandbox is up: started, exited (restarted as `restartPolicy`
//! says, after the crash-loop back-off, or the pod Succeeded or Failed), running and ready.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::super::Inner;
use super::super::store::now_rfc3339;
use super::PodRun;
use super::process::start;
use super::readiness::ready;
use super::status::{running, waiting};
use super::termination::termination_message;

/// The pod's next status (None: leave it as it is) once its sandbox is made.
pub(super) fn step(
    inner: &Inner,
    pod: &Value,
    name: &str,
    p: &mut PodRun,
    host_ip: Ipv4Addr,
) -> Option<Value> {
    let (netns, ip) = p.sandbox.clone()?;
    if let Some(c) = p.child.as_mut()
        && let Ok(Some(exit)) = c.try_wait()
    {
        p.child = None;
        p.ready = false;
        p.last_exit = Some(exit.code().unwrap_or(137));
        p.last_message = p
            .last_exit
            .and_then(|code| termination_message(inner, pod, code));
        let policy = pod["spec"]["restartPolicy"].as_str().unwrap_or("Always");
        let restart = policy == "Always" || (policy == "OnFailure" && !exit.success());
        if restart {
            p.restarts += 1;
            let backoff = Duration::from_secs(1) * 2u32.pow(p.restarts.min(4) - 1);
            p.next_start = Some(Instant::now() + backoff);
        } else {
            let phase = if exit.success() {
                "Succeeded"
            } else {
                "Failed"
            };
            return Some(json!({"phase": phase, "hostIP": host_ip.to_string()}));
        }
    }
    if inner.config.stub.is_some() {
        // A stub agent: Running and Ready at once, with no process.
        if !p.stub {
            p.stub = true;
            p.started_at = Some(now_rfc3339());
        }
        p.ready = true;
    } else if p.child.is_none() {
        if p.next_start.is_some_and(|t| Instant::now() < t) {
            let msg = format!(
                "back-off restarting failed container={} pod={name}",
                pod["spec"]["containers"][0]["name"]
                    .as_str()
                    .unwrap_or_default(),
            );
            return Some(waiting(pod, "CrashLoopBackOff", &msg, p, host_ip));
        }
        if p.last_exit.is_some()
            && !matches!(
                pod["spec"]["restartPolicy"].as_str(),
                None | Some("Always" | "OnFailure")
            )
        {
            return None;
        }
        match start(inner, pod, &netns) {
            Ok(child) => {
                p.child = Some(child);
                p.started_at = Some(now_rfc3339());
                p.next_start = None;
            }
            Err(e) => {
                return Some(waiting(pod, "CreateContainerError", &e, p, host_ip));
            }
        }
    }
    p.ready = ready(pod, p);
    Some(running(pod, p, host_ip, ip))
}
