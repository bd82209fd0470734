//! The cluster's address ranges: the Service range (from the `ServiceCIDR` object, else a
//! distribution default that holds the `kubernetes` `ClusterIP`) and covering prefixes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use k8s_openapi::api::networking::v1::ServiceCIDR;

use crate::inventory::Cidr;

/// A CIDR of either family from text; `None` for garbage.
#[must_use]
pub fn parse(s: &str) -> Option<Cidr> {
    Cidr::try_from(s.trim().to_string()).ok()
}

fn mask(len: u8, bits: u8) -> u128 {
    let host = u32::from(bits.saturating_sub(len));
    let ones = u128::MAX >> (128 - u32::from(bits));
    ones & ones.checked_shl(host).unwrap_or(0)
}

/// The network `len` bits long that contains `ip` (of either family).
#[must_use]
pub fn around(ip: IpAddr, len: u8) -> Cidr {
    let addr = match ip {
        IpAddr::V4(a) => {
            let m = u32::try_from(mask(len, 32)).unwrap_or(u32::MAX);
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & m))
        }
        IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask(len, 128))),
    };
    Cidr { addr, len }
}

fn overlaps(a: Cidr, b: Cidr) -> bool {
    a.contains(b.addr) || b.contains(a.addr)
}

/// The smallest prefix holding every one of `cidrs` (`None` when there is none); all of one
/// family.
#[must_use]
pub fn covering(cidrs: &[Cidr]) -> Option<Cidr> {
    let first = *cidrs.first()?;
    if cidrs.iter().any(|c| c.family() != first.family()) {
        return None;
    }
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
/// ranges when it holds them all (flannel's and k3s's defaults are /16s; for IPv6 the /56
/// around /64s, kubeadm's dual-stack default), else their covering prefix. All of one family.
#[must_use]
pub fn pods_from_nodes(node_cidrs: &[Cidr]) -> Option<Cidr> {
    let first = *node_cidrs.first()?;
    let wide = match first.family() {
        crate::inventory::Family::Ipv4 => 16,
        crate::inventory::Family::Ipv6 => 56,
    };
    let sixteen = around(first.addr, wide.min(first.len));
    if node_cidrs.iter().all(|c| sixteen.contains(c.addr)) {
        Some(sixteen)
    } else {
        covering(node_cidrs)
    }
}

/// Service ranges that distributions default to: kubeadm, k3s and RKE2, EKS (two choices);
/// k3s's IPv6 default.
const DEFAULTS: [(&str, u8); 5] = [
    ("10.96.0.0", 12),
    ("10.43.0.0", 16),
    ("10.100.0.0", 16),
    ("172.20.0.0", 16),
    ("2001:cafe:43::", 112),
];

/// The Service range holding `cluster_ip` (of either family): the `kubernetes` `ServiceCIDR`
/// object when the API serves it (1.33+), else the first distribution default holding the
/// `ClusterIP` that overlaps no node address or node pod range, else the /16 (IPv6: the /112,
/// kube-apiserver's largest) around that `ClusterIP`.
#[must_use]
pub fn services(
    objects: &[ServiceCIDR],
    cluster_ip: IpAddr,
    taken: &[Cidr],
    nodes: &[IpAddr],
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
        .unwrap_or_else(|| {
            around(
                cluster_ip,
                match cluster_ip {
                    IpAddr::V4(_) => 16,
                    IpAddr::V6(_) => 112,
                },
            )
        })
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
        let ip: IpAddr = "10.43.0.1".parse().unwrap();
        // 10.96.0.0/12 does not hold 10.43.0.1; 10.43.0.0/16 does.
        assert_eq!(
            services(&[], ip, &[c("10.42.0.0/24")], &[]),
            c("10.43.0.0/16")
        );
        // GKE: no default fits, the /16 around the ClusterIP (not a /12 over the pods).
        let gke: IpAddr = "10.56.0.1".parse().unwrap();
        assert_eq!(
            services(&[], gke, &[c("10.52.0.0/24")], &[]),
            c("10.56.0.0/16")
        );
    }

    /// IPv6 ranges are covered and defaulted like IPv4 ones; the families never mix.
    #[test]
    fn ipv6_prefixes() {
        assert_eq!(
            covering(&[c("fd00:10:244:1::/64"), c("fd00:10:244:3::/64")]),
            Some(c("fd00:10:244::/62"))
        );
        assert_eq!(
            pods_from_nodes(&[c("fd00:10:244:1::/64"), c("fd00:10:244:2::/64")]),
            Some(c("fd00:10:244::/56"))
        );
        assert_eq!(covering(&[c("10.0.0.0/24"), c("fd00::/64")]), None);
        let ip: IpAddr = "fd00:10:96::1".parse().unwrap();
        assert_eq!(services(&[], ip, &[], &[]), c("fd00:10:96::/112"));
        let k3s: IpAddr = "2001:cafe:43::1".parse().unwrap();
        assert_eq!(services(&[], k3s, &[], &[]), c("2001:cafe:43::/112"));
        assert_eq!(around(ip, 0), c("::/0"));
        assert_eq!(around("10.1.2.3".parse().unwrap(), 0), c("0.0.0.0/0"));
    }
}
