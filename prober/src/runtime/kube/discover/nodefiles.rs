//! Where the node's own files live on each distribution: k3s and RKE2 keep the kubelet's
//! kubeconfig (and k3s its CNI configuration) under `/var/lib/rancher`, EKS and GKE under
//! `/var/lib/kubelet`; kubeadm under `/etc/kubernetes`. Decided from every node, never guessed.

use k8s_openapi::api::core::v1::Node as K8sNode;

use crate::inventory::{Cni, NodeFiles};

/// The annotation kubeadm (before its `NodeLocalCRISocket` default, 1.34) writes on every node
/// it joins: the one mark a kubeadm node carries.
pub const KUBEADM_ANNOTATION: &str = "kubeadm.alpha.kubernetes.io/cri-socket";

/// One node's distribution, from what it carries: k3s and RKE2 set the instance type to their
/// own name and a `k3s://`/`rke2://` provider ID; EKS and GKE nodes have `aws://`/`gce://` and
/// their own labels; kubeadm its annotation. `None`: no mark at all.
#[must_use]
pub fn node_distribution(n: &K8sNode) -> Option<&'static str> {
    let provider = n
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .unwrap_or_default();
    let labels = n.metadata.labels.as_ref();
    let instance = labels
        .and_then(|l| l.get("node.kubernetes.io/instance-type"))
        .map(String::as_str)
        .unwrap_or_default();
    let labelled = |prefix: &str| labels.is_some_and(|l| l.keys().any(|k| k.starts_with(prefix)));
    let annotated = |key: &str| {
        n.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(key))
    };
    if provider.starts_with("k3s://") || instance == "k3s" {
        Some("k3s")
    } else if provider.starts_with("rke2://") || instance == "rke2" {
        Some("rke2")
    } else if provider.starts_with("aws://") && labelled("eks.amazonaws.com/") {
        Some("eks")
    } else if provider.starts_with("gce://") && labelled("cloud.google.com/gke-") {
        Some("gke")
    } else if annotated(KUBEADM_ANNOTATION) {
        Some("kubeadm")
    } else {
        None
    }
}

/// The cluster's distribution, when every node says the same one. Nodes that disagree (a
/// kubeadm control plane with k3s workers) or carry no mark give `None`: the host agent then
/// mounts none of the distribution's files, since a `File` host path that is missing on a node
/// stops its agent there (`FailedMount`), and a guess is not a fact.
#[must_use]
pub fn distribution(nodes: &[K8sNode]) -> Option<&'static str> {
    let mut found = nodes.iter().map(node_distribution);
    let first = found.next()??;
    found.all(|d| d == Some(first)).then_some(first)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn node(provider: Option<&str>, instance: Option<&str>, kubeadm: bool) -> K8sNode {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "n",
                "labels": instance.map(|i| serde_json::json!({"node.kubernetes.io/instance-type": i})),
                "annotations": kubeadm.then(|| serde_json::json!({KUBEADM_ANNOTATION: "unix:///run/containerd/containerd.sock"})),
            },
            "spec": {"providerID": provider},
        }))
        .unwrap()
    }

    #[test]
    fn the_distribution_is_decided_from_every_node_and_never_guessed() {
        let k3s = node(Some("k3s://a"), Some("k3s"), false);
        let kubeadm = node(None, None, true);
        let bare = node(None, None, false);
        assert_eq!(distribution(&[k3s.clone(), k3s.clone()]), Some("k3s"));
        assert_eq!(
            distribution(&[kubeadm.clone(), kubeadm.clone()]),
            Some("kubeadm")
        );
        // The first node alone decided it: k3s here, and kubeadm's paths mounted on the rest.
        assert_eq!(distribution(&[k3s.clone(), kubeadm.clone()]), None);
        assert_eq!(distribution(&[kubeadm.clone(), k3s]), None);
        // No mark: not "kubeadm" by default.
        assert_eq!(distribution(&[bare.clone(), bare]), None);
        assert_eq!(distribution(&[]), None);
    }
}
