//! The kube flow end to end against the real control plane: kube-apiserver, etcd,
//! kube-controller-manager and kube-scheduler built from the Kubernetes source, and a node shim
//! (virtual-kubelet) per lab node running the pods as processes in the lab's namespaces
//! (`test_kit::cluster`). The real `prober` and `kubectl` binaries talk to it from the
//! control-plane node's namespace. The harness (`kit`); a run and what it leaves (`flow`); the
//! project's manifests applied as a user would (`deploy`).
//! Without root, or without the control plane's binaries, each test skips in one line.

// A test: it reads fixtures and the clock freely (clippy.toml bans them in shipped code).
#![allow(clippy::disallowed_methods)]
// The docs name Kubernetes kinds (DaemonSet, CronJob) in prose, as the API does.
#![allow(clippy::doc_markdown)]

#[path = "../common/mod.rs"]
mod common;

mod concurrent;
mod deploy;
mod faults;
mod flow;
mod kit;
mod nodes;
mod preflight;
mod upstream;
