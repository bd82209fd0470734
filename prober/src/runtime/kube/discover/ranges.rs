//! The cluster's pod and Service ranges in each IP family it has: the primary family's (the
//! `kubernetes` Service's) first, then the other one where anything shows it.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::datapath::DataPath;
use super::{Raw, cidr};
use crate::inventory::{Cidr, Cni, Family, Node};

/// What the ranges are read from.
pub(super) struct Found<'a> {
    pub(super) raw: &'a Raw,
    pub(super) dp: &'a DataPath,
    pub(super) cni: Cni,
    pub(super) nodes: &'a [Node],
    pub(super) dns_eps: &'a [(SocketAddr, Option<String>)],
}

impl Found<'_> {
    /// The pod ranges and the Service ranges, one per family, the family of `api_ips[0]` (the
    /// primary one) first; the other family where the nodes, their pod ranges, the
    /// `ServiceCIDR` objects or the DNS Service's `ClusterIP`s have it.
    pub(super) fn ranges(&self, api_ips: &[IpAddr], dns_ips: &[IpAddr]) -> (Vec<Cidr>, Vec<Cidr>) {
        let primary = api_ips[0];
        let node_cidrs: Vec<Cidr> = self.nodes.iter().flat_map(Node::pod_ranges).collect();
        let range_objects: Vec<Cidr> = self
            .raw
            .service_cidrs
            .iter()
            .flat_map(|o| o.spec.iter().flat_map(|s| s.cidrs.iter().flatten()))
            .filter_map(|c| cidr::parse(c))
            .collect();
        let in_family = |f: Family| {
            self.nodes.iter().any(|n| n.ip(f).is_some())
                || node_cidrs
                    .iter()
                    .chain(&range_objects)
                    .any(|c| c.family() == f)
                || dns_ips.iter().any(|ip| Family::of(*ip) == f)
        };
        let first = Family::of(primary);
        let mut families = vec![first];
        families.extend(
            Family::ALL
                .into_iter()
                .filter(|&f| f != first && in_family(f)),
        );
        let pod_cidrs: Vec<Cidr> = families
            .iter()
            .filter_map(|&f| {
                let stated = match f {
                    Family::Ipv4 => self.dp.cluster_cidr,
                    Family::Ipv6 => self.dp.cluster_cidr6,
                };
                let of_nodes: Vec<Cidr> = node_cidrs
                    .iter()
                    .copied()
                    .filter(|c| c.family() == f)
                    .collect();
                stated
                    .filter(|c| c.family() == f)
                    .or_else(|| cidr::pods_from_nodes(&of_nodes))
                    .or_else(|| pods_from_addresses(self.cni, f, self.dns_eps, self.nodes))
                    // The primary family's range is never left out: every address then.
                    .or_else(|| (f == first).then(|| everything(f)))
            })
            .collect();
        let node_addrs: Vec<IpAddr> = self.nodes.iter().flat_map(Node::ips).collect();
        // Each family's range around a ClusterIP of it (the `kubernetes` Service's, else the DNS
        // Service's), else as the `ServiceCIDR` objects state it.
        let service_cidrs: Vec<Cidr> = families
            .iter()
            .filter_map(|&f| {
                let ip = api_ips
                    .iter()
                    .chain(dns_ips)
                    .copied()
                    .find(|ip| Family::of(*ip) == f);
                match ip {
                    Some(ip) => Some(cidr::services(
                        &self.raw.service_cidrs,
                        ip,
                        &node_cidrs,
                        &node_addrs,
                    )),
                    None => range_objects.iter().copied().find(|c| c.family() == f),
                }
            })
            .collect();
        (pod_cidrs, service_cidrs)
    }
}

/// The pod range of `family` when neither the CNI nor the nodes state one, from the pods' own
/// addresses: the DNS endpoints (pods); and with the AWS VPC CNI the nodes' addresses too,
/// since its pods take secondary addresses of their node's VPC subnet. The smallest prefix
/// holding them all.
fn pods_from_addresses(
    cni: Cni,
    family: Family,
    dns_eps: &[(SocketAddr, Option<String>)],
    nodes: &[Node],
) -> Option<Cidr> {
    let host = |addr: IpAddr| Cidr {
        addr,
        len: family.bits(),
    };
    let mut seen: Vec<Cidr> = dns_eps
        .iter()
        .map(|(a, _)| a.ip())
        .filter(|ip| Family::of(*ip) == family)
        .map(host)
        .collect();
    if cni == Cni::AwsVpc {
        seen.extend(nodes.iter().filter_map(|n| n.ip(family)).map(host));
    }
    // One or two pods say little about the range's size: never narrower than a /24 (a /64).
    let widest = match family {
        Family::Ipv4 => 24,
        Family::Ipv6 => 64,
    };
    cidr::covering(&seen).map(|c| {
        if c.len > widest {
            cidr::around(c.addr, widest)
        } else {
            c
        }
    })
}

/// Every address of `family` nothing says the pod range of: `0.0.0.0/0` (`::/0`), which
/// `warnings` says.
fn everything(family: Family) -> Cidr {
    cidr::around(
        match family {
            Family::Ipv4 => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            Family::Ipv6 => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
        },
        0,
    )
}
