//! Dev-only helpers for prober's tests: the real Kubernetes control plane (`cluster`), the
//! Kubernetes API stand-in (real HTTPS, watches,
//! server-side apply and WebSocket exec on loopback, with the API server's own rules and a
//! kubelet that runs the agents in lab namespaces). Never part of a shipped binary.

// The docs name Kubernetes kinds and fields (DaemonSet, ConfigMap, hostNetwork) as the API does,
// in prose: backticks around every one would bury the text.
#![allow(clippy::doc_markdown)]
// Test code only: it reads fixtures and the clock freely (clippy.toml bans them in shipped code).
#![allow(clippy::disallowed_methods)]

pub mod cluster;
pub mod golden;
pub mod manifests;
pub mod mock;
pub mod skip;
pub mod standin;
