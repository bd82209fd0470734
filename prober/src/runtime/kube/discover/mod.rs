//! Discovery (read-only): the cluster as the inventory describes it — nodes, the `kubernetes`
//! and DNS Services and their endpoints, the CNI and how its data path works (overlay, BGP,
//! Typha, pod ranges), where the node's files are, every workload that talks to the API server,
//! with how it does, and the network policies that can select the pod agents. Every list is paginated; reads of things a cluster may not have
//! (CRDs, `ServiceCIDR` before 1.33, a namespace the role does not cover) take 404 and 403 as
//! "absent" and say so.

pub mod calico;
pub mod cidr;
pub mod cilium;
pub mod cni;
pub mod components;
mod datapath;
pub mod family;
pub mod flannel;
pub mod list;
pub mod nodefiles;
pub mod policies;
mod ranges;
pub mod warnings;

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Node as K8sNode, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::ServiceCIDR;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};

use crate::inventory::{Api as ApiSpec, Cluster, Cni, Dns, Family, Inventory, Node};
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
    /// The network policies that can select the pod agents, as read ([`policies`]).
    pub policies: Vec<crate::inventory::PolicyObject>,
    /// The namespace the agents run in, whose namespaced policies `policies` holds ("": the
    /// default, prober-system).
    pub agents_namespace: String,
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

/// Reads the cluster (read-only) for agents in the default namespace: [`read_for`].
pub async fn read(client: &Client) -> Result<Raw, DiscoverError> {
    read_for(client, super::manifests::DEFAULT_NAMESPACE).await
}

/// Reads the cluster (read-only) for agents in `agents_namespace` (whose namespaced policies
/// are the ones that can select them): the nodes first, then the rest within a budget that
/// grows with the number of nodes.
pub async fn read_for(client: &Client, agents_namespace: &str) -> Result<Raw, DiscoverError> {
    let mut raw = Raw {
        nodes: list_nodes(client).await?,
        agents_namespace: agents_namespace.to_string(),
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

/// Whether the cluster has no namespace `ns` (deploy/base grants `get` on the namespaces
/// discovery reads). Refused or unknown: not known to be absent.
async fn namespace_absent(client: &Client, ns: &str) -> bool {
    let got = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .get(ns)
        .await;
    matches!(list::found(got), Ok(Found::Absent))
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
        let refused_before = raw.forbidden.len();
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
        // RBAC answers before the namespace is looked up: a namespace this cluster does not
        // have is refused (403), not absent (404). Only one that exists is worth a warning.
        if raw.forbidden.len() > refused_before && namespace_absent(client, ns).await {
            raw.forbidden.truncate(refused_before);
        }
    }
    if let Some(name) = components::corefile_configmap(&raw.deployments) {
        raw.corefile = configmap(client, raw, "kube-system", &name)
            .await?
            .and_then(|d| d.get("Corefile").cloned());
    }
    read_cni(client, raw).await?;
    // The namespace the run's agents are in: only its namespaced policies can select them, and
    // diagnosis judges the agents there (`Cluster::agents_namespace`).
    let ns = raw.agents_namespace.clone();
    raw.policies = policies::read(client, &ns, &mut raw.forbidden).await?;
    Ok(())
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

/// Endpoints of the IPv4 and IPv6 slices (by `addressType`; FQDN slices are left out), on the
/// port `pick` chooses (else `default_port`), with the node each runs on; endpoints that are
/// not ready are left out.
fn slice_endpoints(
    slices: &[EndpointSlice],
    pick: impl Fn(&k8s_openapi::api::discovery::v1::EndpointPort) -> bool,
    default_port: u16,
) -> Vec<(SocketAddr, Option<String>)> {
    let mut out = Vec::new();
    for s in slices {
        let want = match s.address_type.as_str() {
            "IPv4" => Family::Ipv4,
            "IPv6" => Family::Ipv6,
            _ => continue,
        };
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
                if let Ok(ip) = a.parse::<IpAddr>()
                    && Family::of(ip) == want
                {
                    out.push((SocketAddr::new(ip, port), e.node_name.clone()));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The first of each family's values, in `families`' order (the primary family first), as
/// the inventory's `x` and `xs` pair: `xs` only when there are several.
fn primary_and_all<T: Copy>(all: &[T]) -> Option<(T, Vec<T>)> {
    let first = *all.first()?;
    Some((
        first,
        if all.len() > 1 {
            all.to_vec()
        } else {
            Vec::new()
        },
    ))
}

/// The API endpoints as the `kubernetes` `EndpointSlice`s list them (the primary family only,
/// that Service being single-stack), each followed by its node's address of the other family on
/// the same port: kube-apiserver's default bind address (`0.0.0.0`) listens on both, so each
/// API server is probed over each family the node has.
fn other_family_endpoints(
    listed: impl Iterator<Item = SocketAddr>,
    nodes: &[Node],
) -> Vec<SocketAddr> {
    let mut out: Vec<SocketAddr> = Vec::new();
    for ep in listed {
        let same_node = nodes
            .iter()
            .find(|n| n.ips().any(|ip| ip == ep.ip()))
            .into_iter()
            .flat_map(Node::ips)
            .map(|ip| SocketAddr::new(ip, ep.port()));
        for a in std::iter::once(ep).chain(same_node) {
            if !out.contains(&a) {
                out.push(a);
            }
        }
    }
    out
}

/// Builds the inventory from what discovery read, in every IP family the cluster has: the
/// `kubernetes` Service's `ClusterIP` says which family is primary (`podCIDR`, `serviceCIDR`,
/// `service`: that Service is single-stack even in a dual-stack cluster); the other family,
/// where the nodes, their pod ranges, the `ServiceCIDR`s or the DNS Service have it, follows
/// in `podCIDRs`, `serviceCIDRs`, `services`. Agents are unknown until deployed.
pub fn build(raw: &Raw) -> Result<Inventory, DiscoverError> {
    let api_svc = raw
        .api_service
        .as_ref()
        .ok_or(DiscoverError::NoApiService)?;
    let spec = api_svc.spec.as_ref().ok_or(DiscoverError::NoApiService)?;
    let api_ips = family::service_ips(spec);
    let primary = *api_ips.first().ok_or(DiscoverError::NoApiService)?;
    let port = spec
        .ports
        .as_ref()
        .and_then(|p| p.first())
        .map_or(443, |p| u16::try_from(p.port).unwrap_or(443));
    let (cni, agent) = cni::detect(&raw.daemonsets, &raw.nodes);
    let dp = datapath::data_path(raw, cni, agent);
    let nodes = datapath::nodes_of(raw, cni, &dp);
    let dns_eps = slice_endpoints(
        &raw.dns_slices,
        |p| p.protocol.as_deref() == Some("UDP") && p.port == Some(53),
        53,
    );
    let dns = raw
        .dns_service
        .as_ref()
        .and_then(|s| s.spec.as_ref())
        .map(family::service_ips)
        .and_then(|ips| {
            let ips: Vec<SocketAddr> = ips.into_iter().map(|ip| SocketAddr::new(ip, 53)).collect();
            primary_and_all(&ips)
        })
        .map(|(service, services)| Dns {
            service,
            services,
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
    let dns_cluster_ips: Vec<IpAddr> = dns
        .iter()
        .flat_map(|d| d.cluster_ips().map(|a| a.ip()))
        .collect();
    let found = ranges::Found {
        raw,
        dp: &dp,
        cni,
        nodes: &nodes,
        dns_eps: &dns_eps,
    };
    let (pod_cidrs, service_cidrs) = found.ranges(&api_ips, &dns_cluster_ips);
    let api_endpoints = slice_endpoints(
        &raw.api_slices,
        |p| p.name.as_deref() == Some("https"),
        6443,
    );
    let api_endpoints = other_family_endpoints(api_endpoints.into_iter().map(|(a, _)| a), &nodes);
    let services: Vec<SocketAddr> = api_ips
        .iter()
        .map(|&ip| SocketAddr::new(ip, port))
        .collect();
    let (pod_cidr, pod_cidrs) = primary_and_all(&pod_cidrs).ok_or(DiscoverError::NoApiService)?;
    let (service_cidr, service_cidrs) =
        primary_and_all(&service_cidrs).ok_or(DiscoverError::NoApiService)?;
    let distribution = nodefiles::distribution(&raw.nodes);
    Ok(Inventory {
        cluster: Cluster {
            cni,
            pod_cidr,
            pod_cidrs,
            service_cidr,
            service_cidrs,
            overlay: dp.overlay,
            api: ApiSpec {
                service: SocketAddr::new(primary, port),
                services: if services.len() > 1 {
                    services
                } else {
                    Vec::new()
                },
                endpoints: api_endpoints,
            },
            dns,
            bgp: dp.bgp.clone(),
            node_files: distribution.map(|d| nodefiles::node_files(d, cni)),
            policies: raw.policies.clone(),
            // Said only when it is not the default, so inventories of the default stay as
            // they were.
            agents_namespace: Some(raw.agents_namespace.clone())
                .filter(|n| !n.is_empty() && n != super::manifests::DEFAULT_NAMESPACE),
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
