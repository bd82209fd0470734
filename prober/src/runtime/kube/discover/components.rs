//! The workloads that matter to the network or talk to the API server: their role, where they
//! run, and how they reach the API server (the kubernetes Service, a fixed address, or their
//! own kubeconfig).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::cni;
use crate::inventory::{ApiAccess, Component};

fn template_label<'a>(meta: Option<&'a ObjectMeta>, key: &str) -> Option<&'a str> {
    meta?.labels.as_ref()?.get(key).map(String::as_str)
}

/// The DNS server's `Deployment`: labelled `k8s-app: kube-dns` (kubeadm, k3s, RKE2's
/// `rke2-coredns-rke2-coredns`, EKS, GKE's kube-dns), or named like one.
#[must_use]
pub fn is_dns(d: &Deployment) -> bool {
    let name = d.metadata.name.as_deref().unwrap_or_default();
    let label = d
        .spec
        .as_ref()
        .and_then(|s| template_label(s.template.metadata.as_ref(), "k8s-app"));
    label == Some("kube-dns") || name == "coredns" || name == "kube-dns"
}

/// The `ConfigMap` holding the `CoreDNS` Corefile: the one the DNS `Deployment` with a
/// `coredns` container mounts (`coredns`, `rke2-coredns-rke2-coredns`); none for kube-dns (GKE).
#[must_use]
pub fn corefile_configmap(deployments: &[Deployment]) -> Option<String> {
    let d = deployments.iter().find(|d| {
        d.metadata.namespace.as_deref() == Some("kube-system")
            && is_dns(d)
            && pod(d).is_some_and(|p| p.containers.iter().any(|c| c.name == "coredns"))
    })?;
    let p = pod(d)?;
    Some(
        p.volumes
            .iter()
            .flatten()
            .find_map(|v| v.config_map.as_ref().map(|c| c.name.clone()))
            .unwrap_or_else(|| "coredns".into()),
    )
}

fn pod(d: &Deployment) -> Option<&PodSpec> {
    d.spec.as_ref()?.template.spec.as_ref()
}

fn sets_service_env(c: &Container) -> bool {
    c.env.iter().flatten().any(|e| {
        e.name == "KUBERNETES_SERVICE_HOST" && e.value.as_deref().is_some_and(|v| !v.is_empty())
    })
}

fn own_kubeconfig(c: &Container) -> bool {
    let args: Vec<&String> = c
        .command
        .iter()
        .flatten()
        .chain(c.args.iter().flatten())
        .collect();
    args.iter().any(|a| a.starts_with("--kubeconfig"))
        // kube-proxy's --config file names its kubeconfig (kubeadm, EKS).
        || (c.name == "kube-proxy" && args.iter().any(|a| a.starts_with("--config")))
}

/// `kubeconfig` when a regular container is given its own kubeconfig (kube-proxy); `direct`
/// when every regular container sets `KUBERNETES_SERVICE_HOST` and no init container that
/// calls the API is left on the Service (init containers that set nothing never call it, like
/// Cilium's `mount-cgroup`); else `service`: one container on the Service path makes a cycle.
fn api_access(pod: &PodSpec) -> ApiAccess {
    if pod.containers.iter().any(own_kubeconfig) {
        return ApiAccess::Kubeconfig;
    }
    let regular_direct = !pod.containers.is_empty() && pod.containers.iter().all(sets_service_env);
    if regular_direct {
        ApiAccess::Direct
    } else {
        ApiAccess::Service
    }
}

fn role(kind: &str, meta: &ObjectMeta, cni_agent: bool, dns: bool) -> &'static str {
    let name = meta.name.as_deref().unwrap_or_default();
    let namespace = meta.namespace.as_deref().unwrap_or_default();
    if cni_agent || (kind == "DaemonSet" && name.starts_with("kube-multus")) {
        "cni"
    } else if dns {
        "dns"
    } else if name == "calico-typha" {
        "typha"
    } else if name == "kube-proxy" {
        "proxy"
    } else if name.contains("ingress") || namespace == "ingress-nginx" {
        "ingress"
    } else if namespace == "flux-system" || namespace == "argocd" {
        "gitops"
    } else {
        "other"
    }
}

fn component(
    kind: &str,
    meta: &ObjectMeta,
    pod: Option<&PodSpec>,
    role: &str,
    nodes: Vec<String>,
) -> Option<Component> {
    let pod = pod?;
    Some(Component {
        name: meta.name.clone()?,
        namespace: meta.namespace.clone().unwrap_or_default(),
        kind: kind.into(),
        role: role.into(),
        host_network: pod.host_network.unwrap_or(false),
        api_access: api_access(pod),
        containers: pod
            .init_containers
            .iter()
            .flatten()
            .chain(&pod.containers)
            .map(|c| c.name.clone())
            .collect(),
        nodes,
    })
}

/// Every `DaemonSet` and `Deployment` as a component; the DNS `Deployment` runs where its
/// endpoints are, Typha where its pods are.
#[must_use]
pub fn components(
    daemonsets: &[DaemonSet],
    deployments: &[Deployment],
    dns_nodes: &[String],
    typha_nodes: &[String],
) -> Vec<Component> {
    let mut out: BTreeMap<(String, String), Component> = BTreeMap::new();
    for d in daemonsets {
        let is_cni = cni::agent_of(d).is_some();
        let r = role("DaemonSet", &d.metadata, is_cni, false);
        let spec = d.spec.as_ref().and_then(|s| s.template.spec.as_ref());
        if let Some(c) = component("DaemonSet", &d.metadata, spec, r, Vec::new()) {
            out.insert((c.namespace.clone(), c.name.clone()), c);
        }
    }
    for d in deployments {
        let dns = is_dns(d)
            && d.metadata.namespace.as_deref() == Some("kube-system")
            && !d
                .metadata
                .name
                .as_deref()
                .unwrap_or_default()
                .ends_with("autoscaler");
        let r = role("Deployment", &d.metadata, false, dns);
        let nodes = match r {
            "dns" => dns_nodes.to_vec(),
            "typha" => typha_nodes.to_vec(),
            _ => Vec::new(),
        };
        if let Some(c) = component("Deployment", &d.metadata, pod(d), r, nodes) {
            out.insert((c.namespace.clone(), c.name.clone()), c);
        }
    }
    out.into_values().collect()
}
