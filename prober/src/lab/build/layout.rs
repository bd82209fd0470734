//! Names and addresses: zones, switches, nodes, pods and the DNS pod of one lab.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};

use probe_proto::MacAddr;

use super::API_PORT;
use crate::inventory::{Cidr, Family};
use crate::lab::scenario::Scenario;

/// The last octet of the DNS pod's address in its node's pod subnet.
const DNS_POD_HOST: u8 = 53;

/// One pod: its namespace, its address, and its veth's name on the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    pub ns: String,
    pub address: Ipv4Addr,
    /// Its IPv6 address in a dual-stack lab: `fd00:10:244:<index>::<host>`.
    pub address6: Option<Ipv6Addr>,
    pub host_if: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabNode {
    pub name: String,
    /// 1-based; the node's pod subnet is 10.244.<index>.0/24.
    pub index: u8,
    pub zone: usize,
    pub ns: String,
    pub address: Ipv4Addr,
    /// Its IPv6 address in a dual-stack lab: `fd00:56:<zone>::<9+index>`.
    pub address6: Option<Ipv6Addr>,
    pub control_plane: bool,
    pub pod_cidr: Cidr,
    pub vtep: Ipv4Addr,
    pub mac: MacAddr,
    pub pods: Vec<Pod>,
    pub root: PathBuf,
}

impl LabNode {
    #[must_use]
    pub fn gateway(&self) -> Ipv4Addr {
        zone_router(self.zone)
    }

    /// The zone router's IPv6 address, the node's IPv6 gateway in a lab with IPv6.
    #[must_use]
    pub fn gateway6(&self) -> Ipv6Addr {
        zone_router6(self.zone)
    }

    #[must_use]
    pub fn switch_port(&self) -> String {
        format!("n{}", self.index)
    }

    /// The pods' gateway: the node's bridge, at the first address of its pod subnet.
    #[must_use]
    pub fn bridge(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 244, self.index, 1)
    }

    /// The node's IPv6 pod subnet, `fd00:10:244:<index>::/64`.
    #[must_use]
    pub fn pod_cidr6(&self) -> Cidr {
        Cidr {
            addr: IpAddr::V6(pod6(self.index, 0)),
            len: 64,
        }
    }

    /// The next hop other nodes route this node's IPv6 pods to over the overlay device: no
    /// address anywhere, only a permanent neighbour entry with this node's VTEP MAC.
    #[must_use]
    pub fn vtep6_hop(&self) -> Ipv6Addr {
        pod6(self.index, 0xff)
    }

    /// The node's IPv6 tunnel endpoint over the IPv6 underlay, `fd00:10:244:<index>::`, as
    /// flannel addresses its `flannel-v6.1`.
    #[must_use]
    pub fn vtep6(&self) -> Ipv6Addr {
        pod6(self.index, 0)
    }

    /// The MAC of the node's IPv6 VXLAN device (`overlay.ipv6Tunnel`): a device of its own, so
    /// a MAC of its own, as flannel and Calico give theirs.
    #[must_use]
    pub fn mac6(&self) -> MacAddr {
        MacAddr([0x02, 0x00, 0xfd, 0xf4, self.index, 0x00])
    }

    /// The pods' IPv6 gateway: the bridge's `::1`.
    #[must_use]
    pub fn bridge6(&self) -> Ipv6Addr {
        pod6(self.index, 1)
    }

    /// The node's address in `family`.
    #[must_use]
    pub fn ip(&self, family: Family) -> Option<IpAddr> {
        match family {
            Family::Ipv4 => Some(IpAddr::V4(self.address)),
            Family::Ipv6 => self.address6.map(IpAddr::V6),
        }
    }
}

/// Names and addresses of everything in one lab.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub prefix: String,
    pub state_dir: PathBuf,
    pub router_ns: String,
    /// The second router's namespace (`routers: 2`): the gateway of every zone after the first.
    pub router2_ns: Option<String>,
    pub zones: Vec<String>,
    pub switch_ns: Vec<String>,
    pub nodes: Vec<LabNode>,
    pub dns_pod: Pod,
    pub dns_node: usize,
    /// The "external" resolver the cluster DNS forwards to (on the router; lab-internal).
    pub upstream_dns: Ipv4Addr,
    /// The scenario's joining machine, if it has one (not in `nodes`: it is no node yet).
    pub candidate: Option<LabNode>,
    /// The families the cluster's addresses are in (`ipFamilies`): what the inventory holds.
    pub families: Vec<Family>,
    /// Whether the pods' IPv6 rides a VXLAN device of its own over the IPv6 underlay
    /// (`overlay.ipv6Tunnel`), beside the IPv4 one.
    pub ipv6_tunnel: bool,
}

/// `fd00:10:244:<index>::<host>`: the IPv6 twin of `10.244.<index>.<host>`.
fn pod6(index: u8, host: u8) -> Ipv6Addr {
    Ipv6Addr::new(
        0xfd00,
        0x10,
        0x244,
        u16::from(index),
        0,
        0,
        0,
        u16::from(host),
    )
}

/// The zone router's IPv6 address, `fd00:56:<zone>::1`.
pub(super) fn zone_router6(zone: usize) -> Ipv6Addr {
    Ipv6Addr::new(
        0xfd00,
        0x56,
        u16::try_from(zone).expect("at most 8 zones"),
        0,
        0,
        0,
        0,
        1,
    )
}

pub(super) fn zone_router(zone: usize) -> Ipv4Addr {
    Ipv4Addr::new(
        192,
        168,
        56 + u8::try_from(zone).expect("at most 8 zones"),
        1,
    )
}

impl Layout {
    /// The next hop toward `peer`'s IPv6 pods through the tunnel device: its `vtep6` over the
    /// IPv6 underlay; over the IPv4 one, which carries the pods' IPv6 too, an address nothing
    /// holds (only a neighbour entry with the peer's VTEP MAC).
    #[must_use]
    pub fn vtep6_next_hop(&self, peer: &LabNode) -> Ipv6Addr {
        self.vtep6_of(peer)
            .map_or_else(|| peer.vtep6_hop(), |(a, _)| a)
    }

    /// `n`'s tunnel endpoint over the IPv6 underlay and its device's MAC, where the lab builds
    /// one: `flannel.1`'s in an IPv6-only lab, the IPv6 twin's beside an IPv4 one.
    #[must_use]
    pub fn vtep6_of(&self, n: &LabNode) -> Option<(Ipv6Addr, MacAddr)> {
        if self.ipv6_tunnel {
            Some((n.vtep6(), n.mac6()))
        } else {
            self.ipv6_underlay().then(|| (n.vtep6(), n.mac))
        }
    }

    /// Whether the nodes' underlay is IPv6 alone (`ipFamilies: [ipv6]`).
    #[must_use]
    pub fn ipv6_underlay(&self) -> bool {
        !self.families.contains(&Family::Ipv4)
    }

    /// The "external" resolver as the cluster reaches it: over IPv6 on the IPv6 underlay.
    #[must_use]
    pub fn upstream_resolver(&self) -> IpAddr {
        if self.ipv6_underlay() {
            IpAddr::V6(zone_router6(0))
        } else {
            IpAddr::V4(self.upstream_dns)
        }
    }

    #[must_use]
    pub fn node(&self, name: &str) -> Option<&LabNode> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// The API servers over IPv4, then (dual-stack) over IPv6.
    #[must_use]
    pub fn api_endpoints(&self) -> Vec<SocketAddr> {
        let cps = || self.nodes.iter().filter(|n| n.control_plane);
        cps()
            .map(|n| SocketAddr::from((n.address, API_PORT)))
            .chain(cps().filter_map(|n| Some(SocketAddr::from((n.address6?, API_PORT)))))
            .collect()
    }

    /// Every namespace, in creation order.
    #[must_use]
    pub fn namespaces(&self) -> Vec<String> {
        let mut v = vec![self.router_ns.clone()];
        v.extend(self.router2_ns.iter().cloned());
        v.extend(self.switch_ns.iter().cloned());
        for n in &self.nodes {
            v.push(n.ns.clone());
            v.extend(n.pods.iter().map(|p| p.ns.clone()));
        }
        v.push(self.dns_pod.ns.clone());
        v.extend(self.candidate.iter().map(|c| c.ns.clone()));
        v
    }
}

/// Lays out the lab: zone `z` is 192.168.(56+z).0/24 with its router at .1; node `i` is .(9+i).
#[must_use]
pub fn layout(s: &Scenario, prefix: &str, state_dir: &Path) -> Layout {
    let zones: Vec<String> = if s.zones.is_empty() {
        vec!["default".into()]
    } else {
        s.zones.iter().map(|z| z.name.clone()).collect()
    };
    let zone_of = |name: &str| {
        s.zones
            .iter()
            .position(|z| z.nodes.iter().any(|n| n == name))
            .unwrap_or(0)
    };
    let nodes: Vec<LabNode> = s
        .node_names()
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            let index = u8::try_from(i + 1).expect("validated: at most 250 nodes");
            let zone = zone_of(&name);
            let ns = format!("{prefix}{name}");
            let pods = (0..s.pods_per_node)
                .map(|k| Pod {
                    ns: format!("{ns}p{k}"),
                    address: Ipv4Addr::new(
                        10,
                        244,
                        index,
                        2 + u8::try_from(k).expect("validated: at most 40 pods"),
                    ),
                    address6: s.dual_stack().then(|| {
                        pod6(
                            index,
                            2 + u8::try_from(k).expect("validated: at most 40 pods"),
                        )
                    }),
                    host_if: format!("veth{k}"),
                })
                .collect();
            LabNode {
                index,
                zone,
                address: Ipv4Addr::new(
                    192,
                    168,
                    56 + u8::try_from(zone).expect("at most 8 zones"),
                    9 + index,
                ),
                address6: s.dual_stack().then(|| {
                    let z = u16::try_from(zone).expect("at most 8 zones");
                    Ipv6Addr::new(0xfd00, 0x56, z, 0, 0, 0, 0, 9 + u16::from(index))
                }),
                control_plane: i < s.control_planes,
                pod_cidr: Cidr::v4(Ipv4Addr::new(10, 244, index, 0), 24),
                vtep: Ipv4Addr::new(10, 244, index, 0),
                mac: MacAddr([0x02, 0x00, 0x0a, 0xf4, index, 0x00]),
                pods,
                root: state_dir.join("nodes").join(&name),
                ns,
                name,
            }
        })
        .collect();
    let dns_node = nodes.iter().position(|n| n.name == s.dns_node).unwrap_or(0);
    let dn = &nodes[dns_node];
    let dns_pod = Pod {
        ns: format!("{}dns", dn.ns),
        address: Ipv4Addr::new(10, 244, dn.index, DNS_POD_HOST),
        address6: s.dual_stack().then(|| pod6(dn.index, DNS_POD_HOST)),
        host_if: "vethdns".into(),
    };
    let candidate = super::candidate::layout(s, prefix, state_dir, &zones);
    Layout {
        families: s.ip_families.clone(),
        ipv6_tunnel: s.ipv6_tunnel(),
        candidate,
        prefix: prefix.to_string(),
        state_dir: state_dir.to_path_buf(),
        router_ns: format!("{prefix}rt"),
        router2_ns: (s.routers == 2).then(|| format!("{prefix}rt2")),
        switch_ns: (0..zones.len()).map(|z| format!("{prefix}sw{z}")).collect(),
        zones,
        nodes,
        dns_pod,
        dns_node,
        upstream_dns: zone_router(0),
    }
}
