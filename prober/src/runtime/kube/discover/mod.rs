//! Discovery (read-only): the cluster as the inventory describes it — nodes, the `kubernetes` and
//! `kube-dns` Services and their endpoints, the CNI, kube-proxy, and every workload that talks to
//! the API server, with how it does.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Node as K8sNode, PodSpec, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Client;
use kube::api::{Api, ListParams};

use crate::inventory::{
    Agents, Api as ApiSpec, ApiAccess, Cidr, Cluster, Cni, Component, Dns, Inventory, Node,
    Overlay, Vtep,
};

/// Namespaces whose workloads are checked for how they reach the API server.
pub const WORKLOAD_NAMESPACES: [&str; 8] = [
    "kube-system",
    "kube-flannel",
    "calico-system",
    "tigera-operator",
    "ingress-nginx",
    "flux-system",
    "argocd",
    "cert-manager",
];

#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    #[error("cannot {what}: {source}")]
    Api { what: String, source: kube::Error },
    #[error("the cluster has no `kubernetes` Service ClusterIP")]
    NoApiService,
}

/// Everything discovery reads, before it becomes an inventory.
#[derive(Debug, Default, Clone)]
pub struct Raw {
    pub nodes: Vec<K8sNode>,
    pub api_service: Option<Service>,
    pub api_slices: Vec<EndpointSlice>,
    pub dns_service: Option<Service>,
    pub dns_slices: Vec<EndpointSlice>,
    pub corefile: Option<String>,
    pub daemonsets: Vec<DaemonSet>,
    pub deployments: Vec<Deployment>,
}

fn api_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> DiscoverError {
    let what = what.into();
    move |source| DiscoverError::Api { what, source }
}

/// Reads the cluster (about twenty GETs, all read-only).
pub async fn read(client: &Client) -> Result<Raw, DiscoverError> {
    let mut raw = Raw {
        nodes: Api::<K8sNode>::all(client.clone())
            .list(&ListParams::default())
            .await
            .map_err(api_err("list nodes"))?
            .items,
        ..Raw::default()
    };
    raw.api_service = Api::<Service>::namespaced(client.clone(), "default")
        .get_opt("kubernetes")
        .await
        .map_err(api_err("get service default/kubernetes"))?;
    let slices = |ns: &str, svc: &str| {
        let api = Api::<EndpointSlice>::namespaced(client.clone(), ns);
        let lp = ListParams::default().labels(&format!("kubernetes.io/service-name={svc}"));
        async move { api.list(&lp).await.map(|l| l.items) }
    };
    raw.api_slices = slices("default", "kubernetes")
        .await
        .map_err(api_err("list endpointslices of default/kubernetes"))?;
    raw.dns_service = Api::<Service>::namespaced(client.clone(), "kube-system")
        .get_opt("kube-dns")
        .await
        .map_err(api_err("get service kube-system/kube-dns"))?;
    if raw.dns_service.is_some() {
        raw.dns_slices = slices("kube-system", "kube-dns")
            .await
            .map_err(api_err("list endpointslices of kube-system/kube-dns"))?;
        let cm = Api::<ConfigMap>::namespaced(client.clone(), "kube-system")
            .get_opt("coredns")
            .await
            .map_err(api_err("get configmap kube-system/coredns"))?;
        raw.corefile = cm
            .and_then(|c| c.data)
            .and_then(|d| d.get("Corefile").cloned());
    }
    for ns in WORKLOAD_NAMESPACES {
        raw.daemonsets.extend(
            Api::<DaemonSet>::namespaced(client.clone(), ns)
                .list(&ListParams::default())
                .await
                .map_err(api_err(format!("list daemonsets in {ns}")))?
                .items,
        );
        raw.deployments.extend(
            Api::<Deployment>::namespaced(client.clone(), ns)
                .list(&ListParams::default())
                .await
                .map_err(api_err(format!("list deployments in {ns}")))?
                .items,
        );
    }
    Ok(raw)
}

fn internal_ip(n: &K8sNode) -> Option<Ipv4Addr> {
    n.status
        .as_ref()?
        .addresses
        .as_ref()?
        .iter()
        .find(|a| a.type_ == "InternalIP")
        .and_then(|a| a.address.parse().ok())
}

fn roles(n: &K8sNode) -> Vec<String> {
    let mut r: Vec<String> = n
        .metadata
        .labels
        .iter()
        .flatten()
        .filter_map(|(k, _)| k.strip_prefix("node-role.kubernetes.io/").map(String::from))
        .collect();
    r.sort();
    r
}

/// flannel's `backend-data` annotation: `{"VNI":1,"VtepMAC":"aa:bb:..."}`.
fn flannel_vtep(n: &K8sNode, pod_cidr: Option<Cidr>) -> Option<Vtep> {
    let data = n
        .metadata
        .annotations
        .as_ref()?
        .get("flannel.alpha.coreos.com/backend-data")?;
    let v: serde_json::Value = serde_json::from_str(data).ok()?;
    let mac = v.get("VtepMAC")?.as_str()?.to_string();
    Some(Vtep {
        address: pod_cidr?.addr,
        mac: probe_proto::MacAddr::try_from(mac).ok()?,
    })
}

fn slice_endpoints(
    slices: &[EndpointSlice],
    port_name: Option<&str>,
    default_port: u16,
) -> Vec<(SocketAddr, Option<String>)> {
    let mut out = Vec::new();
    for s in slices {
        let port = s
            .ports
            .iter()
            .flatten()
            .find(|p| port_name.is_none() || p.name.as_deref() == port_name)
            .and_then(|p| p.port)
            .and_then(|p| u16::try_from(p).ok())
            .unwrap_or(default_port);
        for e in &s.endpoints {
            if e.conditions.as_ref().and_then(|c| c.ready) == Some(false) {
                continue;
            }
            for a in &e.addresses {
                if let Ok(ip) = a.parse::<IpAddr>() {
                    out.push((SocketAddr::new(ip, port), e.node_name.clone()));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The CNI, from its agent `DaemonSet`'s name.
#[must_use]
pub fn cni_of(daemonsets: &[DaemonSet]) -> Cni {
    let names: Vec<&str> = daemonsets
        .iter()
        .filter_map(|d| d.metadata.name.as_deref())
        .collect();
    let has = |p: &str| names.iter().any(|n| n.starts_with(p));
    if has("canal") {
        Cni::Canal
    } else if has("calico-node") {
        Cni::Calico
    } else if has("cilium") {
        Cni::Cilium
    } else if has("kube-flannel") || has("flannel") {
        Cni::Flannel
    } else if has("weave-net") {
        Cni::Weave
    } else if has("antrea-agent") {
        Cni::Antrea
    } else if has("kube-router") {
        Cni::KubeRouter
    } else {
        Cni::Other
    }
}

fn role_of(name: &str, namespace: &str) -> &'static str {
    const CNI: [&str; 9] = [
        "calico-node",
        "kube-flannel",
        "flannel",
        "cilium",
        "weave-net",
        "canal",
        "antrea-agent",
        "kube-router",
        "kube-multus",
    ];
    if CNI.iter().any(|c| name.starts_with(c)) && !name.starts_with("cilium-operator") {
        "cni"
    } else if name == "coredns" || name == "kube-dns" {
        "dns"
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

/// `direct` when every container (init containers included) sets `KUBERNETES_SERVICE_HOST`,
/// else `service`: one container on the Service path is enough for a cycle.
fn api_access(pod: &PodSpec) -> ApiAccess {
    let all = pod.init_containers.iter().flatten().chain(&pod.containers);
    let direct = |c: &k8s_openapi::api::core::v1::Container| {
        c.env.iter().flatten().any(|e| {
            e.name == "KUBERNETES_SERVICE_HOST" && e.value.as_deref().is_some_and(|v| !v.is_empty())
        })
    };
    if all.clone().count() > 0 && all.clone().all(direct) {
        ApiAccess::Direct
    } else {
        ApiAccess::Service
    }
}

fn component(
    kind: &str,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    pod: Option<&PodSpec>,
    nodes: Vec<String>,
) -> Option<Component> {
    let pod = pod?;
    let name = meta.name.clone()?;
    let namespace = meta.namespace.clone().unwrap_or_default();
    let containers = pod
        .init_containers
        .iter()
        .flatten()
        .chain(&pod.containers)
        .map(|c| c.name.clone())
        .collect();
    Some(Component {
        role: role_of(&name, &namespace).into(),
        kind: kind.into(),
        host_network: pod.host_network.unwrap_or(false),
        api_access: api_access(pod),
        containers,
        nodes,
        name,
        namespace,
    })
}

fn nodes_of(raw: &Raw) -> Vec<Node> {
    let mut nodes = Vec::new();
    for n in &raw.nodes {
        let Some(address) = internal_ip(n) else {
            continue;
        };
        let pod_cidr = n
            .spec
            .as_ref()
            .and_then(|s| s.pod_cidr.clone())
            .and_then(|c| Cidr::try_from(c).ok());
        nodes.push(Node {
            name: n.metadata.name.clone().unwrap_or_default(),
            roles: roles(n),
            address,
            pod_cidr,
            host_root: Some(PathBuf::from("/host")),
            vtep: flannel_vtep(n, pod_cidr),
            zone: n
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("topology.kubernetes.io/zone").cloned()),
            agents: Agents {
                host: None,
                pod: None,
            },
        });
    }
    nodes
}

fn components_of(raw: &Raw, dns_nodes: &[String]) -> Vec<Component> {
    let mut components: BTreeMap<(String, String), Component> = BTreeMap::new();
    for d in &raw.daemonsets {
        if let Some(c) = component(
            "DaemonSet",
            &d.metadata,
            d.spec.as_ref().and_then(|s| s.template.spec.as_ref()),
            Vec::new(),
        ) {
            components.insert((c.namespace.clone(), c.name.clone()), c);
        }
    }
    for d in &raw.deployments {
        let name = d.metadata.name.as_deref().unwrap_or_default();
        let nodes = if role_of(name, "") == "dns" {
            dns_nodes.to_vec()
        } else {
            Vec::new()
        };
        if let Some(c) = component(
            "Deployment",
            &d.metadata,
            d.spec.as_ref().and_then(|s| s.template.spec.as_ref()),
            nodes,
        ) {
            components.insert((c.namespace.clone(), c.name.clone()), c);
        }
    }
    components.into_values().collect()
}

/// Builds the inventory from what discovery read. Agents are unknown until deployed.
pub fn build(raw: &Raw) -> Result<Inventory, DiscoverError> {
    let api_svc = raw
        .api_service
        .as_ref()
        .ok_or(DiscoverError::NoApiService)?;
    let ip = api_svc
        .spec
        .as_ref()
        .and_then(|s| s.cluster_ip.as_deref())
        .and_then(|ip| ip.parse::<IpAddr>().ok())
        .ok_or(DiscoverError::NoApiService)?;
    let port = api_svc
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .and_then(|p| p.first())
        .map_or(443, |p| u16::try_from(p.port).unwrap_or(443));
    let cni = cni_of(&raw.daemonsets);
    let nodes = nodes_of(raw);
    let overlay = match cni {
        Cni::Flannel | Cni::Canal if nodes.iter().any(|n| n.vtep.is_some()) => Some(Overlay {
            mode: "vxlan".into(),
            port: 8472,
            vni: 1,
            mtu: Some(1450),
        }),
        Cni::Cilium => Some(Overlay {
            mode: "vxlan".into(),
            port: 8472,
            vni: 1,
            mtu: None,
        }),
        _ => None,
    };
    let dns_eps = slice_endpoints(&raw.dns_slices, Some("dns"), 53);
    let dns = raw
        .dns_service
        .as_ref()
        .and_then(|s| {
            s.spec
                .as_ref()?
                .cluster_ip
                .as_deref()?
                .parse::<IpAddr>()
                .ok()
        })
        .map(|ip| Dns {
            service: SocketAddr::new(ip, 53),
            endpoints: dns_eps.iter().map(|(a, _)| *a).collect(),
            names: vec!["kubernetes.default.svc.cluster.local".into()],
            corefile: raw.corefile.clone(),
        });
    let dns_nodes: Vec<String> = dns_eps.iter().filter_map(|(_, n)| n.clone()).collect();
    let components = components_of(raw, &dns_nodes);
    let service_cidr = Cidr {
        addr: match ip {
            IpAddr::V4(a) => Ipv4Addr::from(u32::from(a) & 0xfff0_0000),
            IpAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
        },
        len: 12,
    };
    let pod_cidr = nodes.iter().find_map(|n| n.pod_cidr).map_or(
        Cidr {
            addr: Ipv4Addr::UNSPECIFIED,
            len: 0,
        },
        |c| Cidr {
            addr: Ipv4Addr::from(u32::from(c.addr) & 0xffff_0000),
            len: 16,
        },
    );
    Ok(Inventory {
        cluster: Cluster {
            cni,
            pod_cidr,
            service_cidr,
            overlay,
            api: ApiSpec {
                service: SocketAddr::new(ip, port),
                endpoints: slice_endpoints(&raw.api_slices, Some("https"), 6443)
                    .into_iter()
                    .map(|(a, _)| a)
                    .collect(),
            },
            dns,
        },
        nodes,
        components,
    })
}
