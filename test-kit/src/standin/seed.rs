//! A cluster's own objects from a description of it (a lab's): its nodes (addresses, pod
//! ranges, roles, zones, flannel's VTEP annotations), the `kubernetes` and `kube-dns` Services
//! with their EndpointSlices and `ServiceCIDR`, CoreDNS and its Corefile, flannel's DaemonSet,
//! ConfigMap and one pod per node: what discovery reads on a kubeadm cluster with flannel.

use std::net::Ipv4Addr;

use serde_json::{Value, json};

/// One node of the cluster described.
#[derive(Debug, Clone)]
pub struct Node {
    pub name: String,
    pub address: Ipv4Addr,
    pub pod_cidr: String,
    pub vtep_mac: String,
    pub control_plane: bool,
    pub zone: Option<String>,
}

/// The cluster described: what a lab is built as.
#[derive(Debug, Clone)]
pub struct Cluster {
    pub nodes: Vec<Node>,
    pub pod_cidr: String,
    pub service_cidr: String,
    pub api_service: Ipv4Addr,
    pub api_endpoints: Vec<(Ipv4Addr, u16)>,
    pub dns_service: Ipv4Addr,
    /// The DNS pods: (address, node).
    pub dns_endpoints: Vec<(Ipv4Addr, String)>,
    pub corefile: String,
    pub vni: u32,
    pub vxlan_port: u16,
    /// Where flannel runs: `kube-flannel` (its manifest today) or `kube-system` (older ones).
    pub flannel_namespace: String,
}

/// Marks a seeded pod: the stand-in's kubelet leaves it alone (it stands for what runs already).
pub const SEEDED: &str = "standin.prober/seeded";

fn node(n: &Node, c: &Cluster) -> Value {
    let mut labels = json!({"kubernetes.io/hostname": n.name, "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64"});
    if n.control_plane {
        labels["node-role.kubernetes.io/control-plane"] = json!("");
    }
    if let Some(z) = &n.zone {
        labels["topology.kubernetes.io/zone"] = json!(z);
    }
    let backend = json!({"VNI": c.vni, "VtepMAC": n.vtep_mac}).to_string();
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": n.name, "labels": labels, "annotations": {
            "flannel.alpha.coreos.com/backend-data": backend,
            "flannel.alpha.coreos.com/backend-type": "vxlan",
            "flannel.alpha.coreos.com/public-ip": n.address.to_string()}},
        "spec": {"podCIDR": n.pod_cidr, "podCIDRs": [n.pod_cidr]},
        "status": {
            "addresses": [{"type": "InternalIP", "address": n.address.to_string()},
                          {"type": "Hostname", "address": n.name}],
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "kubelet is posting ready status"}],
            "capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"},
            "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"},
            "nodeInfo": {"osImage": "Debian GNU/Linux 13 (trixie)", "kubeletVersion": "v1.33.0",
                         "containerRuntimeVersion": "containerd://2.0.0",
                         "kernelVersion": "6.12.0", "operatingSystem": "linux",
                         "architecture": "amd64"}}})
}

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
        "status": {"phase": "Active"}})
}

/// Every object of the cluster described, in the order a cluster would have made them.
#[must_use]
pub fn objects(c: &Cluster) -> Vec<Value> {
    let mut names = vec!["default", "kube-system", "kube-public", "kube-node-lease"];
    if !names.contains(&c.flannel_namespace.as_str()) {
        names.push(&c.flannel_namespace);
    }
    let mut out: Vec<Value> = names.into_iter().map(namespace).collect();
    out.extend(c.nodes.iter().map(|n| node(n, c)));
    out.push(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kubernetes", "namespace": "default",
                     "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"clusterIP": c.api_service.to_string(), "clusterIPs": [c.api_service.to_string()],
                 "type": "ClusterIP",
                 "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": c.api_endpoints.first().map_or(6443, |e| e.1)}]}}));
    out.push(json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "kubernetes", "namespace": "default",
                     "labels": {"kubernetes.io/service-name": "kubernetes"}},
        "addressType": "IPv4",
        "endpoints": c.api_endpoints.iter().map(|(a, _)| json!({"addresses": [a.to_string()], "conditions": {"ready": true}})).collect::<Vec<_>>(),
        "ports": [{"name": "https", "port": c.api_endpoints.first().map_or(6443, |e| e.1), "protocol": "TCP"}]}));
    out.push(
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
        "metadata": {"name": "kubernetes"}, "spec": {"cidrs": [c.service_cidr]}}),
    );
    out.push(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kube-dns", "namespace": "kube-system",
                     "labels": {"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"}},
        "spec": {"clusterIP": c.dns_service.to_string(), "clusterIPs": [c.dns_service.to_string()],
                 "type": "ClusterIP", "selector": {"k8s-app": "kube-dns"},
                 "ports": [{"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                           {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53}]}}));
    out.push(json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "kube-dns-standin", "namespace": "kube-system",
                     "labels": {"kubernetes.io/service-name": "kube-dns"}},
        "addressType": "IPv4",
        "endpoints": c.dns_endpoints.iter().map(|(a, n)| json!({"addresses": [a.to_string()], "conditions": {"ready": true}, "nodeName": n})).collect::<Vec<_>>(),
        "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}, {"name": "dns-tcp", "port": 53, "protocol": "TCP"}]}));
    out.push(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "coredns", "namespace": "kube-system", "labels": {"k8s-app": "kube-dns"}},
        "spec": {"replicas": c.dns_endpoints.len(), "selector": {"matchLabels": {"k8s-app": "kube-dns"}},
                 "template": {"metadata": {"labels": {"k8s-app": "kube-dns"}},
                   "spec": {"containers": [{"name": "coredns", "image": "registry.k8s.io/coredns/coredns:v1.12.0",
                            "args": ["-conf", "/etc/coredns/Corefile"],
                            "volumeMounts": [{"name": "config-volume", "mountPath": "/etc/coredns"}]}],
                            "volumes": [{"name": "config-volume", "configMap": {"name": "coredns"}}]}}}}));
    out.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "coredns", "namespace": "kube-system"}, "data": {"Corefile": c.corefile}}));
    let net_conf = json!({"Network": c.pod_cidr, "EnableNFTables": false,
        "Backend": {"Type": "vxlan", "VNI": c.vni, "Port": c.vxlan_port}});
    out.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kube-flannel-cfg", "namespace": c.flannel_namespace,
                     "labels": {"app": "flannel", "tier": "node"}},
        "data": {"net-conf.json": serde_json::to_string_pretty(&net_conf).unwrap_or_default()}}));
    let flannel_spec = json!({"hostNetwork": true, "serviceAccountName": "flannel",
        "containers": [{"name": "kube-flannel", "image": "ghcr.io/flannel-io/flannel:v0.26.0",
            "command": ["/opt/bin/flanneld"], "args": ["--ip-masq", "--kube-subnet-mgr"],
            "volumeMounts": [{"name": "run", "mountPath": "/run/flannel"},
                             {"name": "flannel-cfg", "mountPath": "/etc/kube-flannel/"}]}],
        "initContainers": [{"name": "install-cni", "image": "ghcr.io/flannel-io/flannel:v0.26.0"}],
        "volumes": [{"name": "run", "hostPath": {"path": "/run/flannel"}},
                    {"name": "cni", "hostPath": {"path": "/etc/cni/net.d"}},
                    {"name": "flannel-cfg", "configMap": {"name": "kube-flannel-cfg"}}]});
    out.push(json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "kube-flannel-ds", "namespace": c.flannel_namespace,
                     "labels": {"app": "flannel", "k8s-app": "flannel", SEEDED: "true"}},
        "spec": {"selector": {"matchLabels": {"app": "flannel"}},
                 "template": {"metadata": {"labels": {"app": "flannel", "tier": "node"}},
                              "spec": flannel_spec}},
        "status": {"desiredNumberScheduled": c.nodes.len(), "numberReady": c.nodes.len()}}));
    for n in &c.nodes {
        let mut spec = flannel_spec.clone();
        spec["nodeName"] = json!(n.name);
        out.push(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("kube-flannel-ds-{}", n.name), "namespace": c.flannel_namespace,
                         "labels": {"app": "flannel", "tier": "node", SEEDED: "true"}},
            "spec": spec,
            "status": {"phase": "Running", "hostIP": n.address.to_string(), "podIP": n.address.to_string(),
                       "conditions": [{"type": "Ready", "status": "True"}]}}));
    }
    out
}
