//! What every rule shares: the run indexed by node (`Ctx`), the underlay ports a result measures
//! or needs, how a finding cites its results (`Ctx::emit`), and node names for sentences.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

use crate::inventory::{Inventory, Overlay, OverlayMode};
use crate::model::{AgentKind, Family, PathClass, Protocol, Record, Results};

use super::finding::Finding;

/// A directed underlay port between two nodes (indices into the inventory's nodes). IP-in-IP,
/// which has no port, is `udp: false` with port [`IPIP_PORT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct Link {
    pub(super) from: u32,
    pub(super) to: u32,
    pub(super) udp: bool,
    pub(super) port: u16,
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

/// A result's path, sender and destination: the same kind of probe between the same ends.
pub(super) type Ends = (PathClass, Option<u32>, Dest);

pub(super) struct Ctx<'a> {
    pub(super) inv: &'a Inventory,
    pub(super) results: &'a Results,
    pub(super) node: HashMap<&'a str, u32>,
    /// Nodes of the API endpoints, with their ports.
    pub(super) api_backends: Vec<(u32, u16)>,
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
        let by_ip = |ip: IpAddr| {
            inv.nodes
                .iter()
                .position(|n| IpAddr::V4(n.address) == ip)
                .and_then(|i| u32::try_from(i).ok())
        };
        let api_backends = inv
            .cluster
            .api
            .endpoints
            .iter()
            .filter_map(|e| by_ip(e.ip()).map(|n| (n, e.port())))
            .collect();
        let dns_backends = inv
            .cluster
            .dns
            .iter()
            .flat_map(|d| d.endpoints.iter())
            .filter_map(|e| {
                let IpAddr::V4(ip) = e.ip() else { return None };
                inv.nodes
                    .iter()
                    .position(|n| n.holds_pod_ip(ip))
                    .and_then(|i| u32::try_from(i).ok())
            })
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

    /// The path, sender and destination of `r`.
    pub(super) fn ends(&self, r: &Record<'_>) -> Ends {
        let dest = self.to(r).map_or(
            Dest::Addr(r.to.address, r.to.port, r.to.protocol),
            Dest::Node,
        );
        (r.path, self.from(r), dest)
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

    /// Nodes whose pod agent got anything through: their pod network works.
    pub(super) fn pods_ok(&self) -> HashSet<u32> {
        self.results
            .iter()
            .filter(|r| r.from.agent == AgentKind::Pod && r.result.outcome.is_ok())
            .filter_map(|r| self.from(&r))
            .collect()
    }

    /// The underlay port a result measures directly, if it does. A pod's probe to another
    /// host leaves masqueraded as its node, so it measures that node's underlay too — when the
    /// pod's own network is known to work (`pods_ok`).
    pub(super) fn direct(&self, r: &Record<'_>, pods_ok: &HashSet<u32>) -> Option<Link> {
        let (from, to) = (self.from(r)?, self.to(r)?);
        match r.path {
            PathClass::NodeToNode | PathClass::NodeToApiserver if from != to => Some(Link {
                from,
                to,
                udp: false,
                port: r.to.port?,
            }),
            PathClass::PodToNode if from != to && pods_ok.contains(&from) => Some(Link {
                from,
                to,
                udp: false,
                port: r.to.port?,
            }),
            PathClass::Overlay if Self::is_vxlan(r) => Some(Link {
                from,
                to,
                udp: r.to.protocol == Protocol::Udp,
                port: match r.to.protocol {
                    Protocol::Ipip => IPIP_PORT,
                    _ => r.to.port?,
                },
            }),
            _ => None,
        }
    }

    pub(super) fn overlay_both(&self, a: u32, b: u32, out: &mut Vec<Link>) {
        if let Some(port) = self.overlay_port.filter(|_| a != b) {
            out.push(Link {
                from: a,
                to: b,
                udp: self.overlay_udp,
                port,
            });
            out.push(Link {
                from: b,
                to: a,
                udp: self.overlay_udp,
                port,
            });
        }
    }

    /// The underlay ports a result needs, beyond the one it measures.
    pub(super) fn needs(&self, r: &Record<'_>) -> Vec<Link> {
        let mut out = Vec::new();
        let Some(a) = self.from(r) else { return out };
        let to = self.to(r);
        match r.path {
            PathClass::PodToPod | PathClass::NodeToPod => {
                if let Some(b) = to {
                    self.overlay_both(a, b, &mut out);
                }
            }
            PathClass::Overlay => {
                if let Some(b) = to {
                    if Self::is_vxlan(r) {
                        if let Some(port) = self.overlay_port.filter(|_| a != b) {
                            out.push(Link {
                                from: a,
                                to: b,
                                udp: self.overlay_udp,
                                port,
                            });
                        }
                    } else {
                        self.overlay_both(a, b, &mut out);
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
                    });
                }
            }
            PathClass::PodToService | PathClass::NodeToService => {
                for &(b, port) in &self.api_backends {
                    if a != b {
                        out.push(Link {
                            from: a,
                            to: b,
                            udp: false,
                            port,
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
                    self.overlay_both(a, b, &mut out);
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
