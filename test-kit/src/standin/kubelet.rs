//! The control loop behind the API: the DaemonSet controller (one pod per eligible node, a
//! `FailedCreate` event when admission refuses it), the garbage collector (a DaemonSet's pods go
//! with it), the scheduler's host-port check, and a kubelet per lab node that starts each pod's
//! command inside the node's network namespace (hostNetwork) or a pod sandbox of its own,
//! Pending -> Running -> Ready (readiness: something listens on the probe's port), restarts it
//! as `restartPolicy: Always` says, and kills it when the pod is deleted.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::rules::host_ports;
use super::store::{Key, index, now_rfc3339};
use super::{Inner, NodeSpec, lock};

mod controllers;
mod process;

pub use controllers::apply_node_faults;
use controllers::{controllers, involved, mark_deleted, write_event};
pub use process::{argv, in_netns};
use process::{listening, start, termination_message};

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

fn kill(pid: u32, sig: nix::sys::signal::Signal) {
    if let Ok(p) = i32::try_from(pid) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), sig);
    }
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
            delete_pod(inner, p);
            continue;
        }
        let status = kubelet_step(inner, p, &held, &node);
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

/// The host ports each node's scheduled, live pods hold: node -> (pod uid, port) pairs.
type Held = BTreeMap<String, Vec<(String, (String, i64))>>;

fn held_ports(pods: &[Value]) -> Held {
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

/// SIGTERM now, SIGKILL after the grace period; reaped on a thread of its own.
fn stop(child: Option<Child>, _key: &(String, String), _inner: &Inner) {
    let Some(mut c) = child else { return };
    kill(c.id(), nix::sys::signal::Signal::SIGTERM);
    std::thread::spawn(move || {
        let until = Instant::now() + GRACE;
        while Instant::now() < until {
            if let Ok(Some(_)) = c.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
        let _ = c.wait();
    });
}

/// A deleted pod: its processes killed, then the object removed.
fn delete_pod(inner: &Arc<Inner>, p: &Value) {
    let key = pod_key(p);
    let (child, execs) = {
        let mut k = lock(&inner.kubelet);
        let child = k.pods.get_mut(&key).and_then(|r| r.child.take());
        (child, k.execs.remove(&key).unwrap_or_default())
    };
    for pid in execs {
        kill(pid, nix::sys::signal::Signal::SIGKILL);
    }
    let inner = inner.clone();
    let obj_key = Key::of(index("pods"), p);
    let uid = p["metadata"]["uid"].clone();
    std::thread::spawn(move || {
        if let Some(mut c) = child {
            kill(c.id(), nix::sys::signal::Signal::SIGTERM);
            let until = Instant::now() + GRACE;
            while Instant::now() < until && !matches!(c.try_wait(), Ok(Some(_))) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        let mut s = lock(&inner.store);
        if s.get(&obj_key).is_some_and(|c| c["metadata"]["uid"] == uid) {
            s.remove(&obj_key);
        }
        drop(s);
        lock(&inner.kubelet)
            .pods
            .remove(&(obj_key.ns.clone(), obj_key.name.clone()));
        inner.changed();
    });
}

/// Deletes every object of a namespace (its pods' processes killed), then the namespace.
pub async fn finish_namespace(inner: &Arc<Inner>, ns: &str) {
    let pods: Vec<Value> = lock(&inner.store)
        .list(index("pods"), Some(ns))
        .into_iter()
        .cloned()
        .collect();
    for p in &pods {
        if p["metadata"]["deletionTimestamp"].is_null() {
            mark_deleted(inner, p);
        }
    }
    inner.changed();
    // The namespace controller waits until the pods are gone.
    let until = Instant::now() + GRACE * 3;
    while Instant::now() < until && !lock(&inner.store).list(index("pods"), Some(ns)).is_empty() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    {
        let mut s = lock(&inner.store);
        for key in s.keys_in(ns) {
            s.remove(&key);
        }
        s.remove(&Key::new(index("namespaces"), "", ns));
    }
    inner.changed();
}

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

fn waiting(pod: &Value, reason: &str, message: &str, p: &PodRun, host_ip: Ipv4Addr) -> Value {
    let mut w = json!({"reason": reason});
    if !message.is_empty() {
        w["message"] = json!(message);
    }
    json!({"phase": "Pending", "hostIP": host_ip.to_string(),
        "conditions": [{"type": "PodScheduled", "status": "True"},
                       {"type": "Ready", "status": "False", "reason": "ContainersNotReady"}],
        "containerStatuses": container_status(pod, &json!({"waiting": w}), false, p)})
}

/// Whether a hostPath volume's path exists under the node's root as its `type` requires, as
/// the kubelet's hostPath type check (`pkg/volume/hostpath/host_path.go`, `checkType`) does.
fn host_path_error(root: &Path, pod: &Value) -> Option<String> {
    for v in pod["spec"]["volumes"].as_array().into_iter().flatten() {
        let hp = &v["hostPath"];
        let Some(path) = hp["path"].as_str() else {
            continue;
        };
        let on_node: PathBuf = root.join(path.trim_start_matches('/'));
        let problem = match hp["type"].as_str().unwrap_or_default() {
            "File" if !on_node.is_file() => Some("is not a file"),
            "Directory" if !on_node.is_dir() => Some("is not a directory"),
            _ => None,
        };
        if let Some(p) = problem {
            return Some(format!(
                "MountVolume.SetUp failed for volume {:?} : hostPath type check failed: {path} {p}",
                v["name"].as_str().unwrap_or_default()
            ));
        }
    }
    None
}

/// The free pod sandbox of a node: one no other live pod holds.
fn free_sandbox(k: &Kubelet, node: &NodeSpec) -> Option<(String, Ipv4Addr)> {
    let used: BTreeSet<&String> = k
        .pods
        .values()
        .filter(|p| p.node == node.name)
        .filter_map(|p| p.sandbox.as_ref().map(|s| &s.0))
        .collect();
    node.pod_sandboxes
        .iter()
        .find(|(ns, _)| !used.contains(ns))
        .cloned()
}

/// The pod's next status (None: leave it as it is).
#[allow(clippy::too_many_lines)]
fn kubelet_step(inner: &Arc<Inner>, pod: &Value, held: &Held, node: &str) -> Option<Value> {
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
        let mine = host_ports::host_ports(pod);
        let taken = held
            .get(node)
            .into_iter()
            .flatten()
            .any(|(uid, hp)| pod["metadata"]["uid"] != uid.as_str() && mine.contains(hp));
        if taken {
            return Some(
                json!({"phase": "Pending", "conditions": [{"type": "PodScheduled",
                "status": "False", "reason": "Unschedulable",
                "message": host_ports::unschedulable(inner.config.nodes.len())}]}),
            );
        }
        p.scheduled = true;
    }
    let host_ip = spec_node.address;
    if faults.not_ready.contains(node) {
        // A NotReady node's kubelet does nothing; the pod stays as it is.
        return Some(
            json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}),
        );
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
            let msg = "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox: plugin type=\"flannel\" failed (add): failed to delegate add: failed to set bridge addr: \"cni0\" already has an IP address different from 10.244.0.1/24";
            if p.evented.insert("FailedCreatePodSandBox".into()) {
                drop(k);
                write_event(
                    inner,
                    &key.0,
                    &involved("Pod", "v1", pod),
                    "FailedCreatePodSandBox",
                    msg,
                    node,
                );
                k = lock(&inner.kubelet);
            }
            let p = k.pods.get(&key)?;
            return Some(waiting(pod, "ContainerCreating", "", p, host_ip));
        }
        let sandbox = if host_network {
            Some((spec_node.netns.clone(), spec_node.address))
        } else {
            free_sandbox(&k, &spec_node)
        };
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
        let image = pod["spec"]["containers"][0]["image"]
            .as_str()
            .unwrap_or_default();
        let (reason, msg) = if p.created.elapsed() < Duration::from_secs(2) {
            (
                "ErrImagePull",
                format!(
                    "failed to pull and unpack image \"{image}\": failed to resolve reference \"{image}\": {image}: not found"
                ),
            )
        } else {
            (
                "ImagePullBackOff",
                format!("Back-off pulling image \"{image}\""),
            )
        };
        return Some(waiting(pod, reason, &msg, p, host_ip));
    }
    let (netns, ip) = p.sandbox.clone()?;
    // The container: started, exited (restarted as restartPolicy says), running.
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
                "back-off restarting failed container={} pod={}",
                pod["spec"]["containers"][0]["name"]
                    .as_str()
                    .unwrap_or_default(),
                key.1
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
    // Readiness: the readiness probe's port listens in the pod's network namespace.
    let port = pod["spec"]["containers"][0]["readinessProbe"]["httpGet"]["port"].as_u64();
    let pid = p.child.as_ref().map(Child::id);
    p.ready = match (port, pid) {
        _ if p.stub => true,
        (Some(port), Some(pid)) => listening(pid, port),
        (None, Some(_)) => true,
        _ => false,
    };
    let ready = if p.ready { "True" } else { "False" };
    Some(json!({
        "phase": "Running", "hostIP": host_ip.to_string(), "podIP": ip.to_string(),
        "podIPs": [{"ip": ip.to_string()}], "startTime": p.started_at,
        "conditions": [{"type": "PodScheduled", "status": "True"},
                       {"type": "Initialized", "status": "True"},
                       {"type": "ContainersReady", "status": ready},
                       {"type": "Ready", "status": ready}],
        "containerStatuses": container_status(pod,
            &json!({"running": {"startedAt": p.started_at}}), p.ready, p),
    }))
}
