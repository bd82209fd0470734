//! Which CNI runs, from its agent `DaemonSet`: by pod labels and container names first (names
//! vary by installer: `rke2-canal`, GKE's `anetd`), then by the annotations flannel leaves on
//! nodes when it runs inside another process (k3s) with no `DaemonSet` at all.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node as K8sNode, PodSpec};

use super::flannel;
use crate::inventory::Cni;

fn pod(ds: &DaemonSet) -> Option<&PodSpec> {
    ds.spec.as_ref()?.template.spec.as_ref()
}

fn pod_label<'a>(ds: &'a DaemonSet, key: &str) -> Option<&'a str> {
    ds.spec
        .as_ref()?
        .template
        .metadata
        .as_ref()?
        .labels
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

fn has_container(ds: &DaemonSet, name: &str) -> bool {
    pod(ds).is_some_and(|p| {
        p.containers
            .iter()
            .chain(p.init_containers.iter().flatten())
            .any(|c| c.name == name)
    })
}

/// The CNI whose node agent this `DaemonSet` is, if it is one.
#[must_use]
pub fn agent_of(ds: &DaemonSet) -> Option<Cni> {
    let name = ds.metadata.name.as_deref().unwrap_or_default();
    let app = pod_label(ds, "k8s-app");
    if app == Some("canal")
        || (has_container(ds, "calico-node") && has_container(ds, "kube-flannel"))
    {
        Some(Cni::Canal)
    } else if has_container(ds, "calico-node") {
        Some(Cni::Calico)
    } else if app == Some("cilium") && has_container(ds, "cilium-agent") {
        // Not cilium-envoy (the L7 proxy) nor cilium-operator: their label differs.
        Some(Cni::Cilium)
    } else if has_container(ds, "kube-flannel") || name.starts_with("kube-flannel") {
        Some(Cni::Flannel)
    } else if app == Some("aws-node") || name == "aws-node" {
        Some(Cni::AwsVpc)
    } else if name.starts_with("weave-net") {
        Some(Cni::Weave)
    } else if name.starts_with("antrea-agent") {
        Some(Cni::Antrea)
    } else if name.starts_with("kube-router") {
        Some(Cni::KubeRouter)
    } else {
        None
    }
}

/// The CNI and its agent `DaemonSet` (none for flannel inside k3s).
#[must_use]
pub fn detect<'a>(daemonsets: &'a [DaemonSet], nodes: &[K8sNode]) -> (Cni, Option<&'a DaemonSet>) {
    // Canal before Calico, Calico before flannel: Canal's DaemonSet has both containers.
    let order = [
        Cni::Canal,
        Cni::Calico,
        Cni::Cilium,
        Cni::Flannel,
        Cni::AwsVpc,
        Cni::Weave,
        Cni::Antrea,
        Cni::KubeRouter,
    ];
    for cni in order {
        if let Some(ds) = daemonsets.iter().find(|d| agent_of(d) == Some(cni)) {
            return (cni, Some(ds));
        }
    }
    if flannel::annotated(nodes) {
        return (Cni::Flannel, None);
    }
    (Cni::Other, None)
}

/// The `ConfigMap` a `DaemonSet` mounts as `volume` (e.g. flannel's `flannel-cfg`).
#[must_use]
pub fn configmap_volume(ds: &DaemonSet, volume: &str) -> Option<String> {
    pod(ds)?
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == volume)?
        .config_map
        .as_ref()
        .map(|c| c.name.clone())
}

/// The agent's pod template.
#[must_use]
pub fn pod_spec(ds: &DaemonSet) -> Option<&PodSpec> {
    pod(ds)
}
