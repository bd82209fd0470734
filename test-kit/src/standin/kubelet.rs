//! The control loop behind the API: the controllers (`controllers`), and a kubelet per lab node
//! that starts each pod's command inside the node's network namespace (hostNetwork) or a pod
//! sandbox of its own, Pending -> Running -> Ready (readiness: something listens on the probe's
//! port), restarts it as `restartPolicy: Always` says, and kills it when the pod is deleted.
//! This module holds the kubelet's state and the loop; each step of a pod's life has its own.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::process::Child;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::store::{Key, index};
use super::{Inner, NodeSpec, lock};

mod container;
mod controllers;
mod faults;
mod pod;
mod process;
mod readiness;
mod sandbox;
mod schedule;
mod status;
mod stop;
mod termination;
mod volumes;

pub use controllers::apply_node_faults;
use controllers::controllers;
pub use process::{argv, in_netns};
use schedule::held_ports;
pub use stop::finish_namespace;
use stop::{delete_pod, kill, stop};

/// How often the loop looks, besides every change.
const PERIOD: Duration = Duration::from_millis(200);
/// A deleted pod's processes get SIGTERM, and SIGKILL after this (the grace period, shortened).
const GRACE: Duration = Duration::from_secs(2);
/// A refused DaemonSet pod is tried again after this (the controller's back-off).
const RETRY_CREATE: Duration = Duration::from_secs(2);

/// A process the kubelet runs now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Running {
    pub namespace: String,
    pub pod: String,
    pub node: String,
    pub pid: u32,
    /// `container` or `exec`.
    pub what: &'static str,
}

#[derive(Debug)]
struct PodRun {
    uid: String,
    node: String,
    created: Instant,
    scheduled: bool,
    /// (network namespace, pod IP) once the sandbox is made.
    sandbox: Option<(String, Ipv4Addr)>,
    child: Option<Child>,
    /// Running without a process (`Config::stub`).
    stub: bool,
    started_at: Option<String>,
    restarts: u32,
    next_start: Option<Instant>,
    last_exit: Option<i32>,
    /// The last termination's message (`FallbackToLogsOnError`: its log's tail).
    last_message: Option<String>,
    ready: bool,
    /// Events already written for this pod, by reason.
    evented: BTreeSet<String>,
}

#[derive(Debug, Default)]
pub struct Kubelet {
    pods: BTreeMap<(String, String), PodRun>,
    /// Exec sessions: (namespace, pod) -> pids.
    execs: BTreeMap<(String, String), Vec<u32>>,
    /// DaemonSet uid -> when its pod creation may be tried again.
    ds_retry: BTreeMap<String, Instant>,
    events: u64,
}

impl Kubelet {
    pub fn running(&self) -> Vec<Running> {
        let mut out = Vec::new();
        for ((ns, name), p) in &self.pods {
            if let Some(c) = &p.child {
                out.push(Running {
                    namespace: ns.clone(),
                    pod: name.clone(),
                    node: p.node.clone(),
                    pid: c.id(),
                    what: "container",
                });
            }
        }
        for ((ns, name), pids) in &self.execs {
            let node = self
                .pods
                .get(&(ns.clone(), name.clone()))
                .map(|p| p.node.clone())
                .unwrap_or_default();
            out.extend(pids.iter().map(|pid| Running {
                namespace: ns.clone(),
                pod: name.clone(),
                node: node.clone(),
                pid: *pid,
                what: "exec",
            }));
        }
        out
    }

    pub fn kill_all(&mut self) {
        for p in self.pods.values_mut() {
            if let Some(mut c) = p.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        for pids in std::mem::take(&mut self.execs).values() {
            for pid in pids {
                kill(*pid, nix::sys::signal::Signal::SIGKILL);
            }
        }
    }

    /// The sandbox (network namespace, pod IP) of a running pod, for exec.
    pub fn sandbox(&self, ns: &str, name: &str) -> Option<(String, Ipv4Addr, String)> {
        let p = self.pods.get(&(ns.to_string(), name.to_string()))?;
        if p.child.is_none() && !p.stub {
            return None;
        }
        let (netns, ip) = p.sandbox.clone()?;
        Some((netns, ip, p.node.clone()))
    }

    pub fn add_exec(&mut self, ns: &str, name: &str, pid: u32) {
        self.execs
            .entry((ns.to_string(), name.to_string()))
            .or_default()
            .push(pid);
    }

    pub fn remove_exec(&mut self, ns: &str, name: &str, pid: u32) {
        let key = (ns.to_string(), name.to_string());
        if let Some(v) = self.execs.get_mut(&key) {
            v.retain(|p| *p != pid);
            if v.is_empty() {
                self.execs.remove(&key);
            }
        }
    }
}

/// Runs the loop until the runtime stops.
pub async fn run(inner: Arc<Inner>) {
    let mut tick = inner.tick.subscribe();
    loop {
        // A step is synchronous work over every pod: off the runtime's workers, so that the
        // API keeps answering meanwhile.
        tokio::task::block_in_place(|| step(&inner));
        tokio::select! {
            _ = tick.changed() => {}
            () = tokio::time::sleep(PERIOD) => {}
        }
        // Changes come in bursts (a DaemonSet, then its pods): let them settle.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn node_spec<'a>(inner: &'a Inner, name: &str) -> Option<&'a NodeSpec> {
    inner.config.nodes.iter().find(|n| n.name == name)
}

fn pod_key(p: &Value) -> (String, String) {
    (
        p["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        p["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

fn step(inner: &Arc<Inner>) {
    controllers(inner);
    schedule::bind(inner);
    let pods: Vec<Value> = lock(&inner.store)
        .list(index("pods"), None)
        .into_iter()
        .cloned()
        .collect();
    let live: BTreeSet<(String, String)> = pods.iter().map(pod_key).collect();
    // Processes of pods that no longer exist at all.
    {
        let mut k = lock(&inner.kubelet);
        let gone: Vec<(String, String)> = k
            .pods
            .keys()
            .filter(|key| !live.contains(key))
            .cloned()
            .collect();
        for key in gone {
            if let Some(p) = k.pods.remove(&key) {
                stop(p.child, &key, inner);
            }
            for pid in k.execs.remove(&key).unwrap_or_default() {
                kill(pid, nix::sys::signal::Signal::SIGKILL);
            }
        }
    }
    let held = held_ports(&pods);
    for p in &pods {
        // Only pods of the kubelets this stand-in runs (a seeded kube-system pod is left as is).
        let node = p["spec"]["nodeName"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if node_spec(inner, &node).is_none()
            || p["metadata"]["labels"]["standin.prober/seeded"] == "true"
        {
            continue;
        }
        if p["metadata"]["deletionTimestamp"].is_string() {
            // Only a working kubelet confirms a graceful delete: on a NotReady node the pod
            // stays, Terminating, until it is deleted with grace 0 (`rules::pod_grace`).
            if !lock(&inner.faults).not_ready.contains(&node) {
                delete_pod(inner, p);
            }
            continue;
        }
        let status = pod::step(inner, p, &held, &node);
        if let Some(status) = status
            && p["status"] != status
        {
            let mut q = p.clone();
            q["status"] = status;
            let mut s = lock(&inner.store);
            // Written only while it is the same object (not deleted meanwhile).
            if s.get(&Key::of(index("pods"), &q))
                .is_some_and(|c| c["metadata"]["uid"] == q["metadata"]["uid"])
            {
                s.update(index("pods"), q);
            }
        }
    }
    inner.changed();
}
