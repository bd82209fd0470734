//! The kube flow end to end: the real `prober` binary, with a kubeconfig, against the API
//! stand-in of the test kit (real HTTPS, watches, server-side apply, WebSocket exec, the API
//! server's own rules and the project's own `deploy/` RBAC), whose kubelet runs the agents'
//! `DaemonSet` pods inside a lab's namespaces. One test binary by area: the stand-in's own rules
//! through the real kube client (`rules`); a run and its faults (`flow`); interrupted and
//! concurrent runs (`concurrent`); issue #38's defects, each on the harness it names (`defects`); the shared lab-and-stand-in harness (`kit`). Tests without a
//! lab run anywhere; lab tests skip in one line without root.

// A test: it reads fixtures and the clock freely (clippy.toml bans them in shipped code).
#![allow(clippy::disallowed_methods)]

#[path = "../common/mod.rs"]
mod common;

mod concurrent;
mod defects;
mod flow;
mod kit;
mod rules;
mod stub;
