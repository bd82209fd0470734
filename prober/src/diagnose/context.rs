//! What every rule shares: the run indexed by node (`Ctx`), the underlay ports a result measures
//! or needs, how a finding cites its results (`Ctx::emit`), and node names for sentences.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

use crate::inventory::{Inventory, Overlay, OverlayMode};
use crate::model::{AgentKind, Family, PathClass, Protocol, Record, Results};

use super::finding::Finding;

/// A directed underlay port between two nodes (indices into the inventory's nodes) over one IP
/// family: a port open for IPv4 and closed for IPv6 is two links, one working and one not.
/// IP-in-IP, which has no port, is `udp: false` with port [`IPIP_PORT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct Link {
    pub(super) from: u32,
    pub(super) to: u32,
    pub(super) udp: bool,
    pub(super) port: u16,
    pub(super) family: Family,
}

/// The `port` of an IP-in-IP link (IP protocol 4 has no ports; TCP port 0 is never probed).
pub(super) const IPIP_PORT: u16 = 0;

impl Link {
    pub(super) fn protocol(&self) -> Protocol {
        match (self.udp, self.port) {
            (true, _) => Protocol::Udp,
            (false, IPIP_PORT) => Protocol::Ipip,
            (false, _) => Protocol::Tcp,
        }
    }
}

/// Where a result went, to compare it with other probes: its node, or else (a Service, an
/// outside name) its address, port and transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Dest {
    Node(u32),
    Addr(IpAddr, Option<u16>, Protocol),
}

/// A result's path, sender, destination and family: the same kind of probe between the same
/// ends (an IPv4 probe that got through says nothing of its IPv6 twin).
pub(super) type Ends = (PathClass, Option<u32>, Dest, Family);

/// Nodes whose pod agent got anything through, per family: their pod network works there.
#[derive(Debug, Default)]
pub(super) struct PodsOk(HashSet<(u32, Family)>);

impl PodsOk {
    /// The node's pods got something through over `family`.
    pub(super) fn in_family(&self, n: u32, family: Family) -> bool {
        self.0.contains(&(n, family))
    }
}

/// An API endpoint on a node: the node, its port, and the family of its address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Backend {
    pub(super) node: u32,
    pub(super) port: u16,
    pub(super) family: Family,
}

pub(super) struct Ctx<'a> {
    pub(super) inv: &'a Inventory,
    pub(super) results: &'a Results,
    pub(super) node: HashMap<&'a str, u32>,
    /// Nodes of the API endpoints, with their ports and families (the inventory's, and those
    /// the run probed directly).
    pub(super) api_backends: Vec<Backend>,
    /// The nodes' host addresses per family: the inventory's, and those the run probed.
    host_addrs: HashMap<(u32, Family), IpAddr>,
    /// The families some crafted encapsulation probe went over.
    tunnel_families: Vec<Family>,
    /// The run probed both families.
    pub(super) dual_stack: bool,
    /// Nodes of the DNS endpoints.
    pub(super) dns_backends: Vec<u32>,
    /// The overlay's encapsulation as a link's protocol and port: UDP for VXLAN and Geneve,
    /// IP-in-IP as `udp: false` and [`IPIP_PORT`]; `None` without a crafted-probe overlay.
    pub(super) overlay_port: Option<u16>,
    pub(super) overlay_udp: bool,
    /// `VXLAN`, `Geneve` or `IP-in-IP`, for sentences.
    pub(super) overlay_name: &'static str,
    /// Result indices already explained (as evidence or consequence).
    pub(super) explained: HashSet<usize>,
    /// Only a sample of the node pairs was probed (`--sample`): claims between nodes speak for
    /// the sampled pairs alone.
    pub(super) sampled: bool,
    /// [`Ctx::lossy_ends`], computed once for the rules that ask.
    lossy: std::cell::OnceCell<Option<std::rc::Rc<HashSet<Ends>>>>,
}

pub(super) fn failed(r: &Record<'_>) -> bool {
    r.is_failed()
}

impl<'a> Ctx<'a> {
    pub(super) fn new(inv: &'a Inventory, results: &'a Results) -> Self {
        let node: HashMap<&str, u32> = inv
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.as_str(), u32::try_from(i).unwrap_or(u32::MAX)))
            .collect();
        let host_addrs = host_addrs(inv, results, &node);
        let by_ip = |ip: IpAddr| {
            host_addrs
                .iter()
                .find(|(_, a)| **a == ip)
                .map(|((n, _), _)| *n)
        };
        let mut api_backends: Vec<Backend> = inv
            .cluster
            .api
            .endpoints
            .iter()
            .filter_map(|e| {
                by_ip(e.ip()).map(|n| Backend {
                    node: n,
                    port: e.port(),
                    family: Family::of(e.ip()),
                })
            })
            .collect();
        for r in results.iter().filter(|r| {
            matches!(
                r.path,
                PathClass::NodeToApiserver | PathClass::PodToApiserver
            )
        }) {
            let Some(b) = r.to.node.as_deref().and_then(|n| node.get(n)) else {
                continue;
            };
            let Some(port) = r.to.port else { continue };
            let be = Backend {
                node: *b,
                port,
                family: r.to.family(),
            };
            if !api_backends.contains(&be) {
                api_backends.push(be);
            }
        }
        let mut tunnel_families: Vec<Family> = results
            .iter()
            .filter(|r| Self::is_vxlan(r))
            .map(|r| r.to.family())
            .collect();
        tunnel_families.sort_unstable();
        tunnel_families.dedup();
        let dual_stack = {
            let mut fams = results.iter().map(|r| r.to.family());
            fams.next()
                .is_some_and(|first| results.iter().any(|r| r.to.family() != first))
        };
        // The endpoints of both families: a dual-stack DNS pod's two addresses name one node.
        let dns_backends: Vec<u32> = inv
            .cluster
            .dns
            .iter()
            .flat_map(|d| d.endpoints.iter())
            .filter_map(|e| {
                inv.nodes
                    .iter()
                    .position(|n| n.holds_pod_ip(e.ip()))
                    .and_then(|i| u32::try_from(i).ok())
            })
            .collect::<std::collections::BTreeSet<u32>>()
            .into_iter()
            .collect();
        let mode = inv.cluster.overlay.as_ref().map(Overlay::mode);
        let overlay_name = match mode {
            Some(OverlayMode::Ipip) => "IP-in-IP",
            Some(OverlayMode::Geneve) => "Geneve",
            Some(OverlayMode::Wireguard) => "WireGuard",
            Some(OverlayMode::Vxlan | OverlayMode::None) | None => "VXLAN",
        };
        let overlay_port = inv.cluster.overlay.as_ref().and_then(|o| match o {
            Overlay::Ipip { .. } => Some(IPIP_PORT),
            _ => o.port().map(probe_proto::Port::get),
        });
        Self {
            inv,
            results,
            node,
            api_backends,
            host_addrs,
            tunnel_families,
            dual_stack,
            dns_backends,
            overlay_port,
            overlay_udp: mode != Some(OverlayMode::Ipip),
            overlay_name,
            explained: HashSet::new(),
            sampled: false,
            lossy: std::cell::OnceCell::new(),
        }
    }

    pub(super) fn from(&self, r: &Record<'_>) -> Option<u32> {
        self.node.get(r.from.node.as_str()).copied()
    }

    pub(super) fn to(&self, r: &Record<'_>) -> Option<u32> {
        r.to.node.as_deref().and_then(|n| self.node.get(n).copied())
    }

    /// The path, sender, destination and family of `r`.
    pub(super) fn ends(&self, r: &Record<'_>) -> Ends {
        let dest = self.to(r).map_or(
            Dest::Addr(r.to.address, r.to.port, r.to.protocol),
            Dest::Node,
        );
        (r.path, self.from(r), dest, r.to.family())
    }

    /// Node `n`'s host address over `family`, when the inventory or a probe to it says.
    pub(super) fn host_addr(&self, n: u32, family: Family) -> Option<IpAddr> {
        self.host_addrs.get(&(n, family)).copied()
    }

    /// The family of the encapsulation that carries `family`'s pod traffic: the same family
    /// when crafted probes went over it (flannel and Calico tunnel IPv6 pods over IPv6), else
    /// the one they went over (a tunnel of one family carrying both).
    pub(super) fn tunnel_family(&self, family: Family) -> Family {
        if self.tunnel_families.is_empty() || self.tunnel_families.contains(&family) {
            family
        } else {
            self.tunnel_families[0]
        }
    }

    /// The ends some probe got through between, when the run lost packets (some result got
    /// through only on some attempts); `None` on a run without loss. A failure between such ends
    /// is the loss's (three lost tries in a row are rare, not impossible), never a cause of its
    /// own.
    pub(super) fn lossy_ends(&self) -> Option<std::rc::Rc<HashSet<Ends>>> {
        self.lossy
            .get_or_init(|| {
                if !self.results.iter().any(|r| r.result.is_intermittent()) {
                    return None;
                }
                let worked = self
                    .results
                    .iter()
                    .filter(|r| r.result.outcome.is_ok())
                    .map(|r| self.ends(&r))
                    .collect();
                Some(std::rc::Rc::new(worked))
            })
            .clone()
    }

    pub(super) fn name(&self, i: u32) -> &'a str {
        &self.inv.nodes[i as usize].name
    }

    /// A crafted encapsulation probe (VXLAN, Geneve or IP-in-IP) to a peer host.
    pub(super) fn is_vxlan(r: &Record<'_>) -> bool {
        r.path == PathClass::Overlay && matches!(r.to.protocol, Protocol::Udp | Protocol::Ipip)
    }

    pub(super) fn is_mtu(r: &Record<'_>) -> bool {
        r.path == PathClass::Overlay && r.to.agent == Some(AgentKind::Pod)
    }

    /// Nodes whose pod agent got anything through, per family: their pod network works.
    pub(super) fn pods_ok(&self) -> PodsOk {
        PodsOk(
            self.results
                .iter()
                .filter(|r| r.from.agent == AgentKind::Pod && r.result.outcome.is_ok())
                .filter_map(|r| Some((self.from(&r)?, r.to.family())))
                .collect(),
        )
    }

    /// The underlay port a result measures directly, if it does. A pod's probe to another
    /// host leaves masqueraded as its node, so it measures that node's underlay too — when the
    /// pod's own network is known to work (`pods_ok`).
    pub(super) fn direct(&self, r: &Record<'_>, pods_ok: &PodsOk) -> Option<Link> {
        let (from, to) = (self.from(r)?, self.to(r)?);
        let family = r.to.family();
        match r.path {
            PathClass::NodeToNode | PathClass::NodeToApiserver if from != to => Some(Link {
                from,
                to,
                udp: false,
                port: r.to.port?,
                family,
            }),
            PathClass::PodToNode if from != to && pods_ok.in_family(from, family) => Some(Link {
                from,
                to,
                udp: false,
                port: r.to.port?,
                family,
            }),
            PathClass::Overlay if Self::is_vxlan(r) => Some(Link {
                from,
                to,
                udp: r.to.protocol == Protocol::Udp,
                port: match r.to.protocol {
                    Protocol::Ipip => IPIP_PORT,
                    _ => r.to.port?,
                },
                family,
            }),
            _ => None,
        }
    }

    /// The overlay's encapsulation from `a` to `b`, over the family that carries `family`'s
    /// pods.
    pub(super) fn tunnel(&self, a: u32, b: u32, family: Family) -> Option<Link> {
        self.overlay_port.filter(|_| a != b).map(|port| Link {
            from: a,
            to: b,
            udp: self.overlay_udp,
            port,
            family: self.tunnel_family(family),
        })
    }

    pub(super) fn overlay_both(&self, a: u32, b: u32, family: Family, out: &mut Vec<Link>) {
        out.extend(self.tunnel(a, b, family));
        out.extend(self.tunnel(b, a, family));
    }

    /// The underlay ports a result needs, beyond the one it measures.
    pub(super) fn needs(&self, r: &Record<'_>) -> Vec<Link> {
        let mut out = Vec::new();
        let Some(a) = self.from(r) else { return out };
        let to = self.to(r);
        let family = r.to.family();
        match r.path {
            PathClass::PodToPod | PathClass::NodeToPod => {
                if let Some(b) = to {
                    self.overlay_both(a, b, family, &mut out);
                }
            }
            PathClass::Overlay => {
                if let Some(b) = to {
                    if Self::is_vxlan(r) {
                        out.extend(self.tunnel(a, b, family));
                    } else {
                        self.overlay_both(a, b, family, &mut out);
                    }
                }
            }
            PathClass::PodToNode
            | PathClass::NodeToNode
            | PathClass::PodToApiserver
            | PathClass::NodeToApiserver => {
                if let (Some(b), Some(port)) = (to, r.to.port)
                    && a != b
                {
                    out.push(Link {
                        from: a,
                        to: b,
                        udp: false,
                        port,
                        family,
                    });
                }
            }
            PathClass::PodToService | PathClass::NodeToService => {
                // A Service's address of one family is translated to its endpoints of that
                // family.
                for be in &self.api_backends {
                    if a != be.node && be.family == family {
                        out.push(Link {
                            from: a,
                            to: be.node,
                            udp: false,
                            port: be.port,
                            family,
                        });
                    }
                }
            }
            PathClass::NodeConfig => {}
            PathClass::Dns => {
                let backends: Vec<u32> = match to {
                    Some(b) => vec![b],
                    None => self.dns_backends.clone(),
                };
                for b in backends {
                    self.overlay_both(a, b, family, &mut out);
                }
            }
        }
        out
    }

    /// Cites `evidence` and `consequences` in `f`, marks them explained, and records `f`.
    pub(super) fn emit(
        &mut self,
        findings: &mut Vec<Finding>,
        mut f: Finding,
        evidence: &[usize],
        consequences: &[usize],
    ) {
        f.evidence = self.ids(evidence);
        f.consequences = self.ids(consequences);
        if f.family.is_none() {
            f.family = self.family_of(evidence.iter().chain(consequences).copied());
        }
        self.explained
            .extend(evidence.iter().chain(consequences).copied());
        findings.push(f);
    }

    /// The one family of the failed network-path results among `idx`: `None` when they span
    /// both (the cause is not family-specific) or there are none.
    pub(super) fn family_of(&self, idx: impl Iterator<Item = usize>) -> Option<Family> {
        let mut fams = idx
            .map(|i| self.results.at(i))
            .filter(|r| failed(r) && r.path != PathClass::NodeConfig)
            .map(|r| r.to.family());
        let first = fams.next()?;
        fams.all(|f| f == first).then_some(first)
    }

    pub(super) fn id(&self, i: usize) -> String {
        self.results.at(i).result.id.to_string()
    }

    pub(super) fn ids(&self, v: &[usize]) -> Vec<String> {
        v.iter().map(|&i| self.id(i)).collect()
    }
}

/// Node names for a sentence: all of them up to eight, then a count.
pub(super) fn names_text(names: &[String]) -> String {
    const SHOWN: usize = 8;
    if names.len() <= SHOWN {
        names.join(", ")
    } else {
        format!(
            "{} and {} more nodes",
            names[..SHOWN].join(", "),
            names.len() - SHOWN
        )
    }
}

pub(super) fn list(ctx: &Ctx<'_>, nodes: &[u32]) -> Vec<String> {
    nodes.iter().map(|&n| ctx.name(n).to_string()).collect()
}

/// Each node's host address per family: the inventory's (an IPv6-only node has no IPv4 one),
/// then every address a probe to the node's host went to (those the inventory may not list).
fn host_addrs(
    inv: &Inventory,
    results: &Results,
    node: &HashMap<&str, u32>,
) -> HashMap<(u32, Family), IpAddr> {
    let mut out: HashMap<(u32, Family), IpAddr> = inv
        .nodes
        .iter()
        .zip(0u32..)
        .flat_map(|(n, i)| n.ips().map(move |a| ((i, Family::of(a)), a)))
        .collect();
    for r in results {
        if r.to.agent == Some(AgentKind::Host)
            && r.path != PathClass::NodeConfig
            && let Some(&n) = r.to.node.as_deref().and_then(|n| node.get(n))
        {
            out.entry((n, r.to.family())).or_insert(r.to.address);
        }
    }
    out
}
