//! The pod's sandbox: the node's own network namespace for a hostNetwork pod, else a pod
//! sandbox of the node that no other live pod holds.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use serde_json::Value;

use super::super::NodeSpec;
use super::Kubelet;

/// The sandbox the pod gets now (None: none is free).
pub(super) fn choose(k: &Kubelet, node: &NodeSpec, pod: &Value) -> Option<(String, Ipv4Addr)> {
    if pod["spec"]["hostNetwork"] == true {
        Some((node.netns.clone(), node.address))
    } else {
        free_sandbox(k, node)
    }
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
