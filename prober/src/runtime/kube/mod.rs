//! The Kubernetes runtime: discovery, the agents as DaemonSets, and (next) probing through
//! `pods/exec`, which works while the pod network, ClusterIPs and DNS are broken.

pub mod discover;
pub mod manifests;
