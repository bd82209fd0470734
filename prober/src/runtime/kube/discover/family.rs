//! IP families: the probes speak IPv4 only, so discovery takes the IPv4 address wherever a
//! dual-stack object lists both, and refuses a cluster whose primary family is IPv6 rather
//! than probing nothing and passing.

use std::net::{IpAddr, Ipv4Addr};

use k8s_openapi::api::core::v1::Node as K8sNode;

use super::DiscoverError;

/// The node's first IPv4 `InternalIP`, whatever its position (dual-stack nodes may list the
/// IPv6 one first). `Ok(None)` when the node lists no `InternalIP` at all; an error when it
/// lists only IPv6 ones.
pub fn node_ipv4(n: &K8sNode) -> Result<Option<Ipv4Addr>, DiscoverError> {
    let internal: Vec<IpAddr> = n
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .into_iter()
        .flatten()
        .filter(|a| a.type_ == "InternalIP")
        .filter_map(|a| a.address.parse().ok())
        .collect();
    if let Some(v4) = internal.iter().find_map(|a| match a {
        IpAddr::V4(v4) => Some(*v4),
        IpAddr::V6(_) => None,
    }) {
        return Ok(Some(v4));
    }
    match internal.first() {
        Some(v6) => Err(DiscoverError::Ipv6 {
            what: format!(
                "node {} has only IPv6 addresses ({v6})",
                n.metadata.name.as_deref().unwrap_or("?")
            ),
        }),
        None => Ok(None),
    }
}

/// The IPv4 address among a Service's `clusterIP` and `clusterIPs`.
#[must_use]
pub fn service_ipv4(spec: &k8s_openapi::api::core::v1::ServiceSpec) -> Option<Ipv4Addr> {
    spec.cluster_ip
        .iter()
        .chain(spec.cluster_ips.iter().flatten())
        .find_map(|ip| ip.parse::<Ipv4Addr>().ok())
}

/// The first IPv4 address among a pod's `podIP` and `podIPs`.
#[must_use]
pub fn pod_ipv4(status: &k8s_openapi::api::core::v1::PodStatus) -> Option<Ipv4Addr> {
    status
        .pod_ip
        .iter()
        .chain(status.pod_ips.iter().flatten().map(|p| &p.ip))
        .find_map(|ip| ip.parse::<Ipv4Addr>().ok())
}
