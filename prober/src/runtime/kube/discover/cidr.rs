//! The cluster's address ranges: the Service range (from the `ServiceCIDR` object, else a
//! distribution default that holds the `kubernetes` `ClusterIP`) and covering prefixes.

use std::net::Ipv4Addr;

use k8s_openapi::api::networking::v1::ServiceCIDR;

use crate::inventory::Cidr;

/// An IPv4 CIDR from text; `None` for IPv6 or garbage.
#[must_use]
pub fn parse(s: &str) -> Option<Cidr> {
    Cidr::try_from(s.trim().to_string()).ok()
}

fn mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    }
}

/// The network `len` bits long that contains `ip`.
#[must_use]
pub fn around(ip: Ipv4Addr, len: u8) -> Cidr {
    Cidr {
        addr: Ipv4Addr::from(u32::from(ip) & mask(len)),
        len,
    }
}

fn overlaps(a: Cidr, b: Cidr) -> bool {
    a.contains(b.addr) || b.contains(a.addr)
}

/// The smallest prefix holding every one of `cidrs` (`None` when there is none).
#[must_use]
pub fn covering(cidrs: &[Cidr]) -> Option<Cidr> {
    let first = *cidrs.first()?;
    let mut len = cidrs.iter().map(|c| c.len).min().unwrap_or(0);
    while len > 0
        && !cidrs
            .iter()
            .all(|c| around(c.addr, len).addr == around(first.addr, len).addr)
    {
        len -= 1;
    }
    Some(around(first.addr, len))
}

/// The cluster's pod range when no CNI configuration states it: the /16 around the nodes'
/// ranges when it holds them all (flannel's and k3s's defaults are /16s), else their covering
/// prefix.
#[must_use]
pub fn pods_from_nodes(node_cidrs: &[Cidr]) -> Option<Cidr> {
    let first = *node_cidrs.first()?;
    let sixteen = around(first.addr, 16.min(first.len));
    if node_cidrs.iter().all(|c| sixteen.contains(c.addr)) {
        Some(sixteen)
    } else {
        covering(node_cidrs)
    }
}

/// Service ranges that distributions default to: kubeadm, k3s and RKE2, EKS (two choices).
const DEFAULTS: [(&str, u8); 4] = [
    ("10.96.0.0", 12),
    ("10.43.0.0", 16),
    ("10.100.0.0", 16),
    ("172.20.0.0", 16),
];

/// The Service range: the `kubernetes` `ServiceCIDR` object when the API serves it (1.33+),
/// else the first distribution default holding the `kubernetes` `ClusterIP` that overlaps no
/// node address or node pod range, else the /16 around that `ClusterIP`.
#[must_use]
pub fn services(
    objects: &[ServiceCIDR],
    cluster_ip: Ipv4Addr,
    taken: &[Cidr],
    nodes: &[Ipv4Addr],
) -> Cidr {
    let from_object = objects
        .iter()
        .filter(|o| o.metadata.name.as_deref() == Some("kubernetes"))
        .chain(objects.iter())
        .flat_map(|o| o.spec.iter().flat_map(|s| s.cidrs.iter().flatten()))
        .filter_map(|c| parse(c))
        .find(|c| c.contains(cluster_ip));
    if let Some(c) = from_object {
        return c;
    }
    DEFAULTS
        .iter()
        .filter_map(|(a, len)| a.parse().ok().map(|addr| Cidr { addr, len: *len }))
        .find(|c| {
            c.contains(cluster_ip)
                && !taken.iter().any(|t| overlaps(*c, *t))
                && !nodes.iter().any(|n| c.contains(*n))
        })
        .unwrap_or_else(|| around(cluster_ip, 16))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> Cidr {
        parse(s).unwrap()
    }

    #[test]
    fn covering_prefixes() {
        assert_eq!(
            covering(&[c("10.0.0.0/24"), c("10.0.1.0/24"), c("10.0.2.0/24")]),
            Some(c("10.0.0.0/22"))
        );
        assert_eq!(
            pods_from_nodes(&[c("10.42.0.0/24"), c("10.42.2.0/24")]),
            Some(c("10.42.0.0/16"))
        );
        assert_eq!(covering(&[]), None);
    }

    #[test]
    fn a_default_service_range_never_swallows_pods_or_nodes() {
        let ip = "10.43.0.1".parse().unwrap();
        // 10.96.0.0/12 does not hold 10.43.0.1; 10.43.0.0/16 does.
        assert_eq!(
            services(&[], ip, &[c("10.42.0.0/24")], &[]),
            c("10.43.0.0/16")
        );
        // GKE: no default fits, the /16 around the ClusterIP (not a /12 over the pods).
        let gke = "10.56.0.1".parse().unwrap();
        assert_eq!(
            services(&[], gke, &[c("10.52.0.0/24")], &[]),
            c("10.56.0.0/16")
        );
    }
}
