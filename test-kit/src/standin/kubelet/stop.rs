//! The end of a pod's processes: SIGTERM, then SIGKILL after the grace period, for a replaced
//! or deleted pod and for every pod of a namespace being deleted.

use std::process::Child;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::super::store::{Key, index};
use super::super::{Inner, lock};
use super::controllers::mark_deleted;
use super::{GRACE, pod_key};

pub(super) fn kill(pid: u32, sig: nix::sys::signal::Signal) {
    if let Ok(p) = i32::try_from(pid) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), sig);
    }
}

/// SIGTERM now, SIGKILL after the grace period; reaped on a thread of its own.
pub(super) fn stop(child: Option<Child>, _key: &(String, String), _inner: &Inner) {
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
pub(super) fn delete_pod(inner: &Arc<Inner>, p: &Value) {
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

/// Deletes every object of a namespace (its pods gracefully, as the namespace controller
/// does), then, once every pod is gone, the namespace.
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
    // The namespace controller waits until the pods are gone, however long that takes: a pod
    // on a node whose kubelet is gone is never confirmed, and its namespace stays Terminating
    // (kubernetes/kubernetes pkg/controller/namespace/deletion/namespaced_resources_deleter.go,
    // `deleteAllContent` reports the pods left and the namespace is retried, never given up).
    while !lock(&inner.store).list(index("pods"), Some(ns)).is_empty() {
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
