//! IP families: a dual-stack object lists an address of each family (`status.addresses`,
//! `spec.clusterIPs`, `status.podIPs`), an IPv6-only one only IPv6 ones. Discovery takes the
//! first address of each family, whichever comes first: a cluster of either primary family is
//! probed in every family it has.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use k8s_openapi::api::core::v1::{Node as K8sNode, PodStatus, ServiceSpec};

/// An object's first address of each family.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pair {
    pub v4: Option<Ipv4Addr>,
    pub v6: Option<Ipv6Addr>,
}

impl Pair {
    fn of<'a>(ips: impl IntoIterator<Item = &'a String>) -> Self {
        let mut out = Self::default();
        for ip in ips {
            match ip.trim().parse::<IpAddr>() {
                Ok(IpAddr::V4(a)) if out.v4.is_none() => out.v4 = Some(a),
                Ok(IpAddr::V6(a)) if out.v6.is_none() => out.v6 = Some(a),
                _ => {}
            }
        }
        out
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.v4.is_none() && self.v6.is_none()
    }
}

/// The node's first `InternalIP` of each family, whatever their order.
#[must_use]
pub fn node_ips(n: &K8sNode) -> Pair {
    Pair::of(
        n.status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .into_iter()
            .flatten()
            .filter(|a| a.type_ == "InternalIP")
            .map(|a| &a.address),
    )
}

/// A Service's `ClusterIP`s, the primary family's first (`spec.clusterIPs`, else
/// `spec.clusterIP`), one per family; none for a headless Service.
#[must_use]
pub fn service_ips(spec: &ServiceSpec) -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = Vec::new();
    for ip in spec
        .cluster_ips
        .iter()
        .flatten()
        .chain(spec.cluster_ip.iter())
    {
        if let Ok(ip) = ip.trim().parse::<IpAddr>()
            && !out.iter().any(|o| o.is_ipv4() == ip.is_ipv4())
        {
            out.push(ip);
        }
    }
    out
}

/// A pod's first address of each family, among `podIP` and `podIPs`.
#[must_use]
pub fn pod_ips(status: &PodStatus) -> Pair {
    Pair::of(
        status
            .pod_ip
            .iter()
            .chain(status.pod_ips.iter().flatten().map(|p| &p.ip)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeAddress, NodeStatus, PodIP};

    fn node(addrs: &[(&str, &str)]) -> K8sNode {
        K8sNode {
            status: Some(NodeStatus {
                addresses: Some(
                    addrs
                        .iter()
                        .map(|(t, a)| NodeAddress {
                            type_: (*t).into(),
                            address: (*a).into(),
                        })
                        .collect(),
                ),
                ..NodeStatus::default()
            }),
            ..K8sNode::default()
        }
    }

    #[test]
    fn each_family_first_whatever_the_order() {
        let n = node(&[
            ("Hostname", "n1"),
            ("InternalIP", "fd00::11"),
            ("ExternalIP", "203.0.113.7"),
            ("InternalIP", "192.168.56.11"),
            ("InternalIP", "fd00::99"),
        ]);
        assert_eq!(
            node_ips(&n),
            Pair {
                v4: Some("192.168.56.11".parse().unwrap()),
                v6: Some("fd00::11".parse().unwrap()),
            }
        );
        let v6 = node(&[("InternalIP", "fd00::12")]);
        assert_eq!(node_ips(&v6).v4, None);
        assert!(node(&[("Hostname", "x")]).status.is_some());
        assert!(node_ips(&node(&[("Hostname", "x")])).is_empty());
    }

    #[test]
    fn cluster_ips_primary_first_one_per_family() {
        let spec = ServiceSpec {
            cluster_ip: Some("fd00:10:96::1".into()),
            cluster_ips: Some(vec!["fd00:10:96::1".into(), "10.96.0.1".into()]),
            ..ServiceSpec::default()
        };
        assert_eq!(
            service_ips(&spec),
            ["fd00:10:96::1", "10.96.0.1"].map(|s| s.parse::<IpAddr>().unwrap())
        );
        let headless = ServiceSpec {
            cluster_ip: Some("None".into()),
            ..ServiceSpec::default()
        };
        assert!(service_ips(&headless).is_empty());
        let status = PodStatus {
            pod_ip: Some("10.244.1.2".into()),
            pod_ips: Some(vec![
                PodIP {
                    ip: "10.244.1.2".into(),
                },
                PodIP {
                    ip: "fd00:10:244:1::2".into(),
                },
            ]),
            ..PodStatus::default()
        };
        assert_eq!(
            pod_ips(&status).v6,
            Some("fd00:10:244:1::2".parse().unwrap())
        );
    }
}
