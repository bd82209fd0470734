//! Where the node's own files live on each distribution: k3s and RKE2 keep the kubelet's
//! kubeconfig (and k3s its CNI configuration) under `/var/lib/rancher`, EKS and GKE under
//! `/var/lib/kubelet`; kubeadm under `/etc/kubernetes`.

use k8s_openapi::api::core::v1::Node as K8sNode;

use crate::inventory::{Cni, NodeFiles};

/// The distribution, from what its nodes carry: k3s and RKE2 set the instance type to their
/// own name and a `k3s://`/`rke2://` provider ID; EKS and GKE nodes have `aws://`/`gce://`.
#[must_use]
pub fn distribution(nodes: &[K8sNode]) -> &'static str {
    let n = nodes.first();
    let provider = n
        .and_then(|n| n.spec.as_ref()?.provider_id.as_deref())
        .unwrap_or_default();
    let instance = n
        .and_then(|n| {
            n.metadata
                .labels
                .as_ref()?
                .get("node.kubernetes.io/instance-type")
        })
        .map(String::as_str)
        .unwrap_or_default();
    let labelled = |prefix: &str| {
        n.and_then(|n| n.metadata.labels.as_ref())
            .is_some_and(|l| l.keys().any(|k| k.starts_with(prefix)))
    };
    if provider.starts_with("k3s://") || instance == "k3s" {
        "k3s"
    } else if provider.starts_with("rke2://") || instance == "rke2" {
        "rke2"
    } else if provider.starts_with("aws://") && labelled("eks.amazonaws.com/") {
        "eks"
    } else if provider.starts_with("gce://") && labelled("cloud.google.com/gke-") {
        "gke"
    } else {
        "kubeadm"
    }
}

/// The files the node checks read, for this distribution and CNI.
#[must_use]
pub fn node_files(distribution: &str, cni: Cni) -> NodeFiles {
    let (cni_conf_dir, kubelet) = match distribution {
        "k3s" => (
            "/var/lib/rancher/k3s/agent/etc/cni/net.d",
            "/var/lib/rancher/k3s/agent/kubelet.kubeconfig",
        ),
        "rke2" => (
            "/etc/cni/net.d",
            "/var/lib/rancher/rke2/agent/kubelet.kubeconfig",
        ),
        "eks" | "gke" => ("/etc/cni/net.d", "/var/lib/kubelet/kubeconfig"),
        _ => ("/etc/cni/net.d", "/etc/kubernetes/kubelet.conf"),
    };
    NodeFiles {
        distribution: distribution.to_string(),
        cni_conf_dir: cni_conf_dir.into(),
        kubelet_kubeconfig: kubelet.into(),
        // Calico's CNI plugin (Canal's too) calls the API server with its own kubeconfig.
        cni_kubeconfig: matches!(cni, Cni::Calico | Cni::Canal)
            .then(|| format!("{cni_conf_dir}/calico-kubeconfig").into()),
    }
}
