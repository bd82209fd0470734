//! Discovery (read-only): the cluster as the inventory describes it — nodes, the `kubernetes`
//! and DNS Services and their endpoints, the CNI and how its data path works (overlay, BGP,
//! Typha, pod ranges), where the node's files are, and every workload that talks to the API
//! server, with how it does. Every list is paginated; reads of things a cluster may not have
//! (CRDs, `ServiceCIDR` before 1.33, a namespace the role does not cover) take 404 and 403 as
//! "absent" and say so.

pub mod calico;
pub mod cidr;
pub mod cilium;
pub mod cni;
pub mod components;
pub mod family;
pub mod flannel;
pub mod list;
pub mod nodefiles;
pub mod warnings;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Node as K8sNode, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::ServiceCIDR;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};

use crate::inventory::{
    Agents, Api as ApiSpec, Cidr, Cluster, Cni, Dns, Inventory, Node, Overlay, OverlayMode,
};
use list::Found;

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

/// Each page of the node list gets this long; everything after it gets this plus
/// `PER_NODE` for each node, so a large cluster is not cut off by a fixed budget.
pub const BASE_BUDGET: Duration = Duration::from_secs(15);
pub const PER_NODE: Duration = Duration::from_millis(20);

/// The time discovery allows itself after listing `nodes` nodes.
#[must_use]
pub fn budget(nodes: usize) -> Duration {
    BASE_BUDGET + PER_NODE * u32::try_from(nodes).unwrap_or(u32::MAX)
}

#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    #[error("cannot {what}: {}", super::words::words(.source))]
    Api { what: String, source: kube::Error },
    #[error("no answer within {secs} s while trying to {what}")]
    Deadline { what: String, secs: u64 },
    #[error("the cluster has no `kubernetes` Service ClusterIP")]
    NoApiService,
    #[error(
        "{what}: the probes speak IPv4 only for now, so IPv6-only clusters and dual-stack \
         clusters whose primary family is IPv6 are not supported (dual-stack with IPv4 first is)"
    )]
    Ipv6 { what: String },
}

/// Everything discovery reads, before it becomes an inventory.
#[derive(Debug, Default, Clone)]
pub struct Raw {
    pub nodes: Vec<K8sNode>,
    pub api_service: Option<Service>,
    pub api_slices: Vec<EndpointSlice>,
    pub service_cidrs: Vec<ServiceCIDR>,
    pub dns_service: Option<Service>,
    pub dns_slices: Vec<EndpointSlice>,
    pub corefile: Option<String>,
    pub daemonsets: Vec<DaemonSet>,
    pub deployments: Vec<Deployment>,
    /// The CNI's `ConfigMaps` (`net-conf.json`, `cilium-config`), by (namespace, name).
    pub configmaps: BTreeMap<(String, String), BTreeMap<String, String>>,
    pub cilium_nodes: Vec<DynamicObject>,
    pub calico: calico::Raw,
    /// What the coordinator was not allowed to read (403): the inventory is partial there.
    pub forbidden: Vec<String>,
}

fn api_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> DiscoverError {
    let what = what.into();
    move |source| DiscoverError::Api { what, source }
}

/// Lists the nodes page by page, each page under `BASE_BUDGET`.
async fn list_nodes(client: &Client) -> Result<Vec<K8sNode>, DiscoverError> {
    let api = Api::<K8sNode>::all(client.clone());
    let mut lp = ListParams::default().limit(list::PAGE);
    let mut nodes = Vec::new();
    loop {
        let page = tokio::time::timeout(BASE_BUDGET, api.list(&lp))
            .await
            .map_err(|_| DiscoverError::Deadline {
                what: "list nodes".into(),
                secs: BASE_BUDGET.as_secs(),
            })?
            .map_err(api_err("list nodes"))?;
        nodes.extend(page.items);
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => lp = lp.continue_token(&token),
            _ => return Ok(nodes),
        }
    }
}

/// Reads the cluster (read-only): the nodes first, then the rest within a budget that grows
/// with the number of nodes.
pub async fn read(client: &Client) -> Result<Raw, DiscoverError> {
    let mut raw = Raw {
        nodes: list_nodes(client).await?,
        ..Raw::default()
    };
    let budget = budget(raw.nodes.len());
    tokio::time::timeout(budget, read_rest(client, &mut raw))
        .await
        .map_err(|_| DiscoverError::Deadline {
            what: "read the cluster's Services, workloads and CNI configuration".into(),
            secs: budget.as_secs(),
        })??;
    Ok(raw)
}

/// A list that may be absent (404: empty) or forbidden (403: empty, and noted).
async fn tolerant<K>(
    api: Api<K>,
    lp: &ListParams,
    what: String,
    forbidden: &mut Vec<String>,
) -> Result<Vec<K>, DiscoverError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match list::found(list::all(&api, lp).await).map_err(api_err(what.clone()))? {
        Found::Yes(v) => Ok(v),
        Found::Absent => Ok(Vec::new()),
        Found::Forbidden => {
            forbidden.push(what);
            Ok(Vec::new())
        }
    }
}

/// A `ConfigMap`'s data, tolerating 404 and 403.
async fn configmap(
    client: &Client,
    raw: &mut Raw,
    ns: &str,
    name: &str,
) -> Result<Option<BTreeMap<String, String>>, DiscoverError> {
    let what = format!("get configmap {ns}/{name}");
    let got = Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get(name)
        .await;
    match list::found(got).map_err(api_err(what.clone()))? {
        Found::Yes(cm) => {
            let data = cm.data.unwrap_or_default();
            raw.configmaps
                .insert((ns.to_string(), name.to_string()), data.clone());
            Ok(Some(data))
        }
        Found::Absent => Ok(None),
        Found::Forbidden => {
            raw.forbidden.push(what);
            Ok(None)
        }
    }
}

fn crd(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

async fn custom(
    client: &Client,
    raw: &mut Raw,
    resource: &ApiResource,
) -> Result<Vec<DynamicObject>, DiscoverError> {
    let api = Api::<DynamicObject>::all_with(client.clone(), resource);
    let what = format!("list {}.{}", resource.plural, resource.group);
    tolerant(api, &ListParams::default(), what, &mut raw.forbidden).await
}

async fn slices(client: &Client, ns: &str, svc: &str) -> Result<Vec<EndpointSlice>, DiscoverError> {
    let api = Api::<EndpointSlice>::namespaced(client.clone(), ns);
    let lp = ListParams::default().labels(&format!("kubernetes.io/service-name={svc}"));
    list::all(&api, &lp)
        .await
        .map_err(api_err(format!("list endpointslices of {ns}/{svc}")))
}

async fn read_rest(client: &Client, raw: &mut Raw) -> Result<(), DiscoverError> {
    raw.api_service = Api::<Service>::namespaced(client.clone(), "default")
        .get_opt("kubernetes")
        .await
        .map_err(api_err("get service default/kubernetes"))?;
    raw.api_slices = slices(client, "default", "kubernetes").await?;
    raw.service_cidrs = tolerant(
        Api::<ServiceCIDR>::all(client.clone()),
        &ListParams::default(),
        "list servicecidrs".into(),
        &mut raw.forbidden,
    )
    .await?;
    // The DNS Service by its label, not its name: RKE2 calls it rke2-coredns-rke2-coredns.
    let dns = list::all(
        &Api::<Service>::namespaced(client.clone(), "kube-system"),
        &ListParams::default().labels("k8s-app=kube-dns"),
    )
    .await
    .map_err(api_err(
        "list services in kube-system labelled k8s-app=kube-dns",
    ))?;
    raw.dns_service = dns
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some("kube-dns"))
        .or_else(|| dns.first())
        .cloned();
    if let Some(name) = raw
        .dns_service
        .as_ref()
        .and_then(|s| s.metadata.name.clone())
    {
        raw.dns_slices = slices(client, "kube-system", &name).await?;
    }
    for ns in WORKLOAD_NAMESPACES {
        let lp = ListParams::default();
        let ds = tolerant(
            Api::<DaemonSet>::namespaced(client.clone(), ns),
            &lp,
            format!("list daemonsets in {ns}"),
            &mut raw.forbidden,
        )
        .await?;
        raw.daemonsets.extend(ds);
        let deploy = tolerant(
            Api::<Deployment>::namespaced(client.clone(), ns),
            &lp,
            format!("list deployments in {ns}"),
            &mut raw.forbidden,
        )
        .await?;
        raw.deployments.extend(deploy);
    }
    if let Some(name) = components::corefile_configmap(&raw.deployments) {
        raw.corefile = configmap(client, raw, "kube-system", &name)
            .await?
            .and_then(|d| d.get("Corefile").cloned());
    }
    read_cni(client, raw).await
}

/// The CNI's own configuration, read only where its agent says which CNI it is.
async fn read_cni(client: &Client, raw: &mut Raw) -> Result<(), DiscoverError> {
    let (cni, agent) = cni::detect(&raw.daemonsets, &raw.nodes);
    let agent = agent.cloned();
    let ns = agent
        .as_ref()
        .and_then(|d| d.metadata.namespace.clone())
        .unwrap_or_else(|| "kube-system".into());
    match cni {
        Cni::Flannel | Cni::Canal => {
            if let Some(cm) = agent
                .as_ref()
                .and_then(|d| cni::configmap_volume(d, "flannel-cfg"))
            {
                configmap(client, raw, &ns, &cm).await?;
            }
        }
        Cni::Cilium => {
            let config = configmap(client, raw, &ns, "cilium-config").await?;
            if !config.as_ref().is_some_and(cilium::uses_node_pod_cidrs) {
                raw.cilium_nodes = custom(
                    client,
                    raw,
                    &crd("cilium.io", "v2", "CiliumNode", "ciliumnodes"),
                )
                .await?;
            }
        }
        Cni::Calico => read_calico(client, raw, &ns).await?,
        _ => {}
    }
    Ok(())
}

async fn read_calico(client: &Client, raw: &mut Raw, ns: &str) -> Result<(), DiscoverError> {
    let operator = ns != "kube-system"
        || raw
            .deployments
            .iter()
            .any(|d| d.metadata.name.as_deref() == Some("tigera-operator"));
    if ns == "kube-system" {
        raw.calico.config = configmap(client, raw, "kube-system", "calico-config").await?;
    }
    if operator {
        raw.calico.installations = custom(
            client,
            raw,
            &crd("operator.tigera.io", "v1", "Installation", "installations"),
        )
        .await?;
    }
    let group = "crd.projectcalico.org";
    raw.calico.ip_pools = custom(client, raw, &crd(group, "v1", "IPPool", "ippools")).await?;
    raw.calico.bgp_configurations = custom(
        client,
        raw,
        &crd(group, "v1", "BGPConfiguration", "bgpconfigurations"),
    )
    .await?;
    raw.calico.felix_configurations = custom(
        client,
        raw,
        &crd(group, "v1", "FelixConfiguration", "felixconfigurations"),
    )
    .await?;
    raw.calico.block_affinities = custom(
        client,
        raw,
        &crd(group, "v1", "BlockAffinity", "blockaffinities"),
    )
    .await?;
    let typha_ns = raw
        .deployments
        .iter()
        .find(|d| d.metadata.name.as_deref() == Some("calico-typha"))
        .and_then(|d| d.metadata.namespace.clone());
    if let Some(tns) = typha_ns {
        raw.calico.typha_pods = tolerant(
            Api::<Pod>::namespaced(client.clone(), &tns),
            &ListParams::default().labels("k8s-app=calico-typha"),
            format!("list calico-typha pods in {tns}"),
            &mut raw.forbidden,
        )
        .await?;
    }
    Ok(())
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

/// Endpoints of IPv4 slices, on the port `pick` chooses (else `default_port`), with the node
/// each runs on; endpoints that are not ready are left out.
fn slice_endpoints(
    slices: &[EndpointSlice],
    pick: impl Fn(&k8s_openapi::api::discovery::v1::EndpointPort) -> bool,
    default_port: u16,
) -> Vec<(SocketAddr, Option<String>)> {
    let mut out = Vec::new();
    for s in slices.iter().filter(|s| s.address_type == "IPv4") {
        let port = s
            .ports
            .iter()
            .flatten()
            .find(|p| pick(p))
            .and_then(|p| p.port)
            .and_then(|p| u16::try_from(p).ok())
            .unwrap_or(default_port);
        for e in &s.endpoints {
            if e.conditions.as_ref().and_then(|c| c.ready) == Some(false) {
                continue;
            }
            for a in &e.addresses {
                if let Ok(ip) = a.parse::<Ipv4Addr>() {
                    out.push((SocketAddr::new(IpAddr::V4(ip), port), e.node_name.clone()));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

fn config<'a>(
    raw: &'a Raw,
    agent: Option<&DaemonSet>,
    name: &str,
) -> Option<&'a BTreeMap<String, String>> {
    let ns = agent
        .and_then(|d| d.metadata.namespace.clone())
        .unwrap_or_else(|| "kube-system".into());
    raw.configmaps.get(&(ns, name.to_string()))
}

/// The CNI's facts: overlay, BGP, per-node ranges, VTEPs and served ports, cluster pod range.
struct DataPath {
    overlay: Option<Overlay>,
    bgp: Option<crate::inventory::Bgp>,
    /// Per node: pod ranges that replace `spec.podCIDR` (`CiliumNodes`, Calico blocks); `None`
    /// keeps `spec.podCIDR`; an empty list means "none" (EKS).
    node_cidrs: Option<BTreeMap<String, Vec<Cidr>>>,
    cluster_cidr: Option<Cidr>,
    typha_nodes: Vec<String>,
    /// Cilium's tunnel endpoints by node, from the `CiliumNodes` (when read).
    cilium_vteps: BTreeMap<String, Ipv4Addr>,
    /// The CNI ports every node serves, before Typha.
    serves: Option<Vec<u16>>,
}

fn data_path(raw: &Raw, cni: Cni, agent: Option<&DaemonSet>) -> DataPath {
    let mut dp = DataPath {
        overlay: None,
        bgp: None,
        node_cidrs: None,
        cluster_cidr: None,
        typha_nodes: Vec::new(),
        cilium_vteps: BTreeMap::new(),
        serves: None,
    };
    match cni {
        Cni::Flannel | Cni::Canal => {
            let cm = agent
                .and_then(|d| cni::configmap_volume(d, "flannel-cfg"))
                .and_then(|name| config(raw, agent, &name));
            let conf = cm
                .and_then(|c| c.get("net-conf.json"))
                .and_then(|t| flannel::net_conf(t));
            let veth_mtu = cm
                .and_then(|c| c.get("veth_mtu"))
                .and_then(|m| m.trim().parse().ok())
                .filter(|m| *m != 0);
            dp.overlay = flannel::overlay(&raw.nodes, conf.as_ref(), veth_mtu);
            dp.cluster_cidr = conf.and_then(|c| c.network);
            // flannel serves no TCP port to other nodes; Canal's calico-node runs no BIRD.
            dp.serves = Some(Vec::new());
        }
        Cni::Cilium => {
            let empty = BTreeMap::new();
            let c = config(raw, agent, "cilium-config").unwrap_or(&empty);
            let anetd = agent.and_then(|d| d.metadata.name.as_deref()) == Some("anetd");
            // Dataplane V2 needs VPC-native routing: never a tunnel.
            dp.overlay = if anetd { None } else { cilium::overlay(c) };
            dp.cluster_cidr = cilium::cluster_pod_cidr(c);
            if !cilium::uses_node_pod_cidrs(c) && !raw.cilium_nodes.is_empty() {
                dp.node_cidrs = Some(cilium::node_pod_cidrs(&raw.cilium_nodes));
            }
            dp.cilium_vteps = cilium::internal_ips(&raw.cilium_nodes);
            // GKE does not document whether anetd runs cilium-health: probe no port there.
            dp.serves = Some(if !anetd && cilium::health_checking(c) {
                vec![cilium::HEALTH_PORT]
            } else {
                Vec::new()
            });
        }
        Cni::Calico => {
            let pod = agent.and_then(cni::pod_spec);
            let f = calico::facts(&raw.calico, pod);
            dp.overlay = f.overlay;
            dp.cluster_cidr = f.pool;
            if !f.blocks.is_empty() {
                dp.node_cidrs = Some(f.blocks);
            }
            dp.serves = Some(if f.bgp.is_some() {
                vec![calico::BGP_PORT]
            } else {
                Vec::new()
            });
            dp.bgp = f.bgp;
            dp.typha_nodes = f.typha_nodes;
        }
        Cni::AwsVpc => {
            // Pods take secondary addresses of the node's VPC subnet: no per-node range.
            dp.node_cidrs = Some(BTreeMap::new());
            dp.serves = Some(Vec::new());
        }
        Cni::Weave | Cni::Antrea | Cni::KubeRouter | Cni::Other => {}
    }
    dp
}

fn nodes_of(raw: &Raw, cni: Cni, dp: &DataPath) -> Result<Vec<Node>, DiscoverError> {
    let mut nodes = Vec::new();
    for n in &raw.nodes {
        // The agents run on Linux nodes only (their node selector): a Windows node has none.
        let os = n
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("kubernetes.io/os"));
        if os.is_some_and(|os| os != "linux") {
            continue;
        }
        let Some(address) = family::node_ipv4(n)? else {
            continue;
        };
        let name = n.metadata.name.clone().unwrap_or_default();
        // Every range, in order: a Calico node owns several IPAM blocks.
        let mut ranges: Vec<Cidr> = match &dp.node_cidrs {
            Some(map) => map.get(&name).cloned().unwrap_or_default(),
            None => n
                .spec
                .as_ref()
                .map(|s| {
                    s.pod_cidr
                        .iter()
                        .chain(s.pod_cidrs.iter().flatten())
                        .filter_map(|c| cidr::parse(c))
                        .collect()
                })
                .unwrap_or_default(),
        };
        ranges.dedup();
        let pod_cidr = ranges.first().copied();
        let vtep = match (cni, dp.overlay.as_ref().map(Overlay::mode)) {
            (Cni::Flannel | Cni::Canal, Some(OverlayMode::Vxlan)) => flannel::vtep(n, pod_cidr),
            (Cni::Calico, Some(mode)) => calico::vtep(n, mode),
            (Cni::Cilium, Some(_)) => cilium::vtep(n, &dp.cilium_vteps),
            _ => None,
        };
        let serves = dp.serves.clone().map(|mut ports| {
            if dp.typha_nodes.contains(&name) {
                ports.push(calico::TYPHA_PORT);
            }
            ports
        });
        nodes.push(Node {
            roles: roles(n)
                .into_iter()
                .map(crate::inventory::NodeRole::from)
                .collect(),
            address,
            pod_cidr,
            pod_cidrs: if ranges.len() > 1 { ranges } else { Vec::new() },
            host_root: Some(PathBuf::from("/host")),
            vtep,
            zone: n
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("topology.kubernetes.io/zone").cloned()),
            serves: serves.map(|p| p.into_iter().filter_map(probe_proto::Port::new).collect()),
            agents: Agents {
                host: None,
                pod: None,
            },
            name,
        });
    }
    Ok(nodes)
}

/// The pod range when neither the CNI nor the nodes state one, from the pods' own addresses:
/// the DNS endpoints (pods); and with the AWS VPC CNI the nodes' addresses too, since its pods
/// take secondary addresses of their node's VPC subnet. The smallest prefix holding them all.
fn pods_from_addresses(
    cni: Cni,
    dns_eps: &[(SocketAddr, Option<String>)],
    nodes: &[Node],
) -> Option<Cidr> {
    let host = |addr: Ipv4Addr| Cidr { addr, len: 32 };
    let mut seen: Vec<Cidr> = dns_eps
        .iter()
        .filter_map(|(a, _)| match a.ip() {
            IpAddr::V4(v4) => Some(host(v4)),
            IpAddr::V6(_) => None,
        })
        .collect();
    if cni == Cni::AwsVpc {
        seen.extend(nodes.iter().map(|n| host(n.address)));
    }
    // One or two pods say little about the range's size: never narrower than a /24.
    cidr::covering(&seen).map(|c| {
        if c.len > 24 {
            cidr::around(c.addr, 24)
        } else {
            c
        }
    })
}

/// Builds the inventory from what discovery read. Agents are unknown until deployed.
pub fn build(raw: &Raw) -> Result<Inventory, DiscoverError> {
    let api_svc = raw
        .api_service
        .as_ref()
        .ok_or(DiscoverError::NoApiService)?;
    let spec = api_svc.spec.as_ref().ok_or(DiscoverError::NoApiService)?;
    let primary = spec
        .cluster_ip
        .as_deref()
        .and_then(|ip| ip.parse::<IpAddr>().ok())
        .ok_or(DiscoverError::NoApiService)?;
    let ip = match primary {
        IpAddr::V4(v4) => v4,
        IpAddr::V6(v6) => {
            return Err(DiscoverError::Ipv6 {
                what: format!(
                    "the cluster's primary IP family is IPv6 (the kubernetes Service is {v6})"
                ),
            });
        }
    };
    let port = spec
        .ports
        .as_ref()
        .and_then(|p| p.first())
        .map_or(443, |p| u16::try_from(p.port).unwrap_or(443));
    let (cni, agent) = cni::detect(&raw.daemonsets, &raw.nodes);
    let dp = data_path(raw, cni, agent);
    let nodes = nodes_of(raw, cni, &dp)?;
    let dns_eps = slice_endpoints(
        &raw.dns_slices,
        |p| p.protocol.as_deref() == Some("UDP") && p.port == Some(53),
        53,
    );
    let dns = raw
        .dns_service
        .as_ref()
        .and_then(|s| family::service_ipv4(s.spec.as_ref()?))
        .map(|dns_ip| Dns {
            service: SocketAddr::new(IpAddr::V4(dns_ip), 53),
            endpoints: dns_eps.iter().map(|(a, _)| *a).collect(),
            names: vec!["kubernetes.default.svc.cluster.local".into()],
            corefile: raw.corefile.clone(),
        });
    let mut dns_nodes: Vec<String> = dns_eps.iter().filter_map(|(_, n)| n.clone()).collect();
    dns_nodes.sort();
    dns_nodes.dedup();
    let components = components::components(
        &raw.daemonsets,
        &raw.deployments,
        &dns_nodes,
        &dp.typha_nodes,
    );
    let node_cidrs: Vec<Cidr> = nodes.iter().flat_map(Node::pod_ranges).collect();
    let pod_cidr = dp
        .cluster_cidr
        .or_else(|| cidr::pods_from_nodes(&node_cidrs))
        .or_else(|| pods_from_addresses(cni, &dns_eps, &nodes))
        // Nothing to derive it from: every address (0.0.0.0/0, which `warnings` says).
        .unwrap_or(Cidr {
            addr: Ipv4Addr::UNSPECIFIED,
            len: 0,
        });
    let node_addrs: Vec<Ipv4Addr> = nodes.iter().map(|n| n.address).collect();
    let service_cidr = cidr::services(&raw.service_cidrs, ip, &node_cidrs, &node_addrs);
    let api_endpoints = slice_endpoints(
        &raw.api_slices,
        |p| p.name.as_deref() == Some("https"),
        6443,
    );
    let distribution = nodefiles::distribution(&raw.nodes);
    Ok(Inventory {
        cluster: Cluster {
            cni,
            pod_cidr,
            service_cidr,
            overlay: dp.overlay,
            api: ApiSpec {
                service: SocketAddr::new(IpAddr::V4(ip), port),
                endpoints: api_endpoints.into_iter().map(|(a, _)| a).collect(),
            },
            dns,
            bgp: dp.bgp.clone(),
            node_files: distribution.map(|d| nodefiles::node_files(d, cni)),
            policies: Vec::new(),
        },
        nodes,
        components,
        agent_bin: None,
    })
}

/// A node's annotation, as CNIs write them (flannel's backend, Calico's tunnel addresses).
pub(super) fn annotation<'a>(n: &'a K8sNode, key: &str) -> Option<&'a str> {
    n.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}
