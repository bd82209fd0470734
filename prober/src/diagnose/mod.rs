//! Pure: (topology, results) -> findings. A firewall gap (a port blocked between hosts that
//! otherwise reach each other) is told apart from a circular bootstrap dependency (a component
//! that builds the network reaching the API server through a path that needs that network), and
//! every failed result ends up as the evidence or a consequence of some finding.

pub mod finding;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};

pub use finding::{Finding, Kind, Severity};
use probe_proto::Outcome;

use crate::inventory::{ApiAccess, Component, Inventory};
use crate::model::time::{age, utc};
use crate::model::{AgentKind, Direction, PathClass, Protocol};
use crate::model::{AgentStatus, ResultRecord};

/// A directed underlay port between two nodes (indices into the inventory's nodes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Link {
    from: u32,
    to: u32,
    udp: bool,
    port: u16,
}

struct Ctx<'a> {
    inv: &'a Inventory,
    results: &'a [ResultRecord],
    node: HashMap<&'a str, u32>,
    /// Nodes of the API endpoints, with their ports.
    api_backends: Vec<(u32, u16)>,
    /// Nodes of the DNS endpoints.
    dns_backends: Vec<u32>,
    overlay_port: Option<u16>,
    /// Result indices already explained (as evidence or consequence).
    explained: HashSet<usize>,
}

fn failed(r: &ResultRecord) -> bool {
    r.is_failed()
}

impl<'a> Ctx<'a> {
    fn new(inv: &'a Inventory, results: &'a [ResultRecord]) -> Self {
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
                    .position(|n| n.pod_cidr.is_some_and(|c| c.contains(ip)))
                    .and_then(|i| u32::try_from(i).ok())
            })
            .collect();
        let overlay_port = inv
            .cluster
            .overlay
            .as_ref()
            .filter(|o| o.mode == "vxlan")
            .map(|o| o.port);
        Self {
            inv,
            results,
            node,
            api_backends,
            dns_backends,
            overlay_port,
            explained: HashSet::new(),
        }
    }

    fn from(&self, r: &ResultRecord) -> Option<u32> {
        self.node.get(r.from.node.as_str()).copied()
    }

    fn to(&self, r: &ResultRecord) -> Option<u32> {
        r.to.node.as_deref().and_then(|n| self.node.get(n).copied())
    }

    fn name(&self, i: u32) -> &'a str {
        &self.inv.nodes[i as usize].name
    }

    fn is_vxlan(r: &ResultRecord) -> bool {
        r.path == PathClass::Overlay && r.to.protocol == Protocol::Udp
    }

    fn is_mtu(r: &ResultRecord) -> bool {
        r.path == PathClass::Overlay && r.to.agent == Some(AgentKind::Pod)
    }

    /// The underlay port a result measures directly, if it does. A pod's probe to another
    /// host leaves masqueraded as its node, so it measures that node's underlay too — when the
    /// pod's own network is known to work (`pods_ok`).
    fn direct(&self, r: &ResultRecord, pods_ok: &HashSet<u32>) -> Option<Link> {
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
                udp: true,
                port: r.to.port?,
            }),
            _ => None,
        }
    }

    fn overlay_both(&self, a: u32, b: u32, out: &mut Vec<Link>) {
        if let Some(port) = self.overlay_port.filter(|_| a != b) {
            out.push(Link {
                from: a,
                to: b,
                udp: true,
                port,
            });
            out.push(Link {
                from: b,
                to: a,
                udp: true,
                port,
            });
        }
    }

    /// The underlay ports a result needs, beyond the one it measures.
    fn needs(&self, r: &ResultRecord) -> Vec<Link> {
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
                                udp: true,
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
    fn emit(
        &mut self,
        findings: &mut Vec<Finding>,
        mut f: Finding,
        evidence: &[usize],
        consequences: &[usize],
    ) {
        f.evidence = self.ids(evidence);
        f.consequences = self.ids(consequences);
        self.explained
            .extend(evidence.iter().chain(consequences).copied());
        findings.push(f);
    }

    fn id(&self, i: usize) -> String {
        self.results[i].result.id.clone()
    }

    fn ids(&self, v: &[usize]) -> Vec<String> {
        v.iter().map(|&i| self.id(i)).collect()
    }
}

/// Diagnoses a run. Findings come ordered: firewall gaps, bootstrap cycles, then the rest.
#[must_use]
pub fn diagnose(inv: &Inventory, results: &[ResultRecord], agents: &[AgentStatus]) -> Vec<Finding> {
    let mut ctx = Ctx::new(inv, results);
    let mut findings = Vec::new();
    unreachable_nodes(&mut ctx, &mut findings);
    let gaps = firewall_gaps(&mut ctx, &mut findings);
    bootstrap_cycles(&mut ctx, &mut findings);
    service_proxy(&mut ctx, &mut findings);
    node_checks(&mut ctx, &mut findings);
    overlay_and_mtu(&mut ctx, &mut findings, &gaps);
    dns(&mut ctx, &mut findings);
    agent_missing(&mut ctx, &mut findings, agents);
    unexplained(&mut ctx, &mut findings);
    findings
}

// ---------------------------------------------------------------------------------------------
// Nodes nobody reaches

/// A node that nothing reaches and that reaches nothing (beyond itself) is down or cut off: one
/// finding for all of its paths, not a gap per port.
fn unreachable_nodes(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) {
    let n = ctx.inv.nodes.len();
    let mut ok = vec![false; n];
    let mut bad: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, r) in ctx.results.iter().enumerate() {
        let (Some(a), to) = (ctx.from(r), ctx.to(r)) else {
            continue;
        };
        // Only traffic that leaves the source node counts.
        let ends: Vec<u32> = match to {
            Some(b) if b != a => vec![a, b],
            Some(_) => continue,
            // Services and the DNS Service live elsewhere: they speak for the source only.
            None => vec![a],
        };
        for e in ends {
            if r.result.outcome.is_ok() {
                ok[e as usize] = true;
            } else if failed(r) {
                bad[e as usize].push(i);
            }
        }
    }
    for x in 0..n {
        if ok[x] || bad[x].is_empty() || n < 2 {
            continue;
        }
        let name = ctx.inv.nodes[x].name.clone();
        let idx = std::mem::take(&mut bad[x]);
        let x32 = u32::try_from(x).unwrap_or(u32::MAX);
        let (ev, cons): (Vec<usize>, Vec<usize>) = idx
            .into_iter()
            .filter(|i| !ctx.explained.contains(i))
            .partition(|&i| {
                let r = &ctx.results[i];
                matches!(r.path, PathClass::NodeToNode | PathClass::NodeToApiserver)
                    || Ctx::is_vxlan(r)
                    || (r.path == PathClass::PodToNode && ctx.to(r) == Some(x32))
            });
        let mut f = Finding::new(
            Kind::Unexplained,
            Severity::Error,
            format!(
                "{name} is cut off: no probe to or from it gets through on any port (the node is down, partitioned, or dropping everything)"
            ),
        );
        f.state = Some("unreachable".into());
        f.nodes = vec![name.clone()];
        f.fix.push(format!("check that {name} is up and that its uplink and the network around it pass traffic at all (ping {})", ctx.inv.nodes[x].address));
        ctx.emit(findings, f, &ev, &cons);
    }
}

// ---------------------------------------------------------------------------------------------
// Firewall gaps

/// Finds the blocked ports, groups them into findings, and claims their consequences. Returns
/// the blocked links.
fn firewall_gaps(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) -> HashSet<Link> {
    let mut measured: BTreeMap<Link, Vec<usize>> = BTreeMap::new();
    let mut reachable: HashSet<(u32, u32)> = HashSet::new();
    // Nodes whose pod agent got anything through: its pod network works.
    let pods_ok: HashSet<u32> = ctx
        .results
        .iter()
        .filter(|r| r.from.agent == AgentKind::Pod && r.result.outcome.is_ok())
        .filter_map(|r| ctx.from(r))
        .collect();
    for (i, r) in ctx.results.iter().enumerate() {
        if ctx.explained.contains(&i) {
            continue;
        }
        if let Some(l) = ctx.direct(r, &pods_ok) {
            measured.entry(l).or_default().push(i);
        }
        // Any working underlay exchange proves the two hosts reach each other.
        let underlay = matches!(
            r.path,
            PathClass::NodeToNode | PathClass::NodeToApiserver | PathClass::PodToNode
        ) || Ctx::is_vxlan(r);
        if underlay
            && r.result.outcome.is_ok()
            && let (Some(a), Some(b)) = (ctx.from(r), ctx.to(r))
        {
            reachable.insert((a, b));
        }
    }
    let blocked_outcome = |o: Outcome| matches!(o, Outcome::Timeout | Outcome::Rejected);
    let mut gaps: BTreeMap<(bool, u16), BTreeSet<(u32, u32)>> = BTreeMap::new();
    let mut evidence: HashMap<Link, Vec<usize>> = HashMap::new();
    for (link, idx) in &measured {
        let all_blocked = idx
            .iter()
            .all(|&i| failed(&ctx.results[i]) && blocked_outcome(ctx.results[i].result.outcome));
        if all_blocked && reachable.contains(&(link.from, link.to)) {
            gaps.entry((link.udp, link.port))
                .or_default()
                .insert((link.from, link.to));
            evidence.insert(*link, idx.clone());
        }
    }
    let mut blocked = HashSet::new();
    let mut new_findings = Vec::new();
    for ((udp, port), pairs) in &gaps {
        for (from, to, both) in blocks(pairs) {
            let links: Vec<Link> = from
                .iter()
                .flat_map(|&a| to.iter().map(move |&b| (a, b)))
                .chain(if both {
                    to.iter()
                        .flat_map(|&b| from.iter().map(move |&a| (b, a)))
                        .collect::<Vec<_>>()
                } else {
                    Vec::new()
                })
                .filter(|(a, b)| a != b)
                .map(|(a, b)| Link {
                    from: a,
                    to: b,
                    udp: *udp,
                    port: *port,
                })
                .collect();
            let ev: Vec<usize> = links
                .iter()
                .flat_map(|l| evidence.get(l).cloned().unwrap_or_default())
                .collect();
            blocked.extend(links.iter().copied());
            let reverse_ok = !both && reverse_works(ctx, &measured, &links);
            new_findings.push((
                gap_finding(ctx, *udp, *port, &from, &to, both, reverse_ok, &ev),
                ev,
                links,
            ));
        }
    }
    // Consequences: failed results needing a blocked link. The first finding that explains a
    // result claims it.
    let mut owner: HashMap<Link, usize> = HashMap::new();
    for (k, (_, _, links)) in new_findings.iter().enumerate() {
        for l in links {
            owner.entry(*l).or_insert(k);
        }
    }
    for (_, ev, _) in &new_findings {
        ctx.explained.extend(ev.iter().copied());
    }
    let mut consequences: Vec<Vec<usize>> = vec![Vec::new(); new_findings.len()];
    for (i, r) in ctx.results.iter().enumerate() {
        if !failed(r) || ctx.explained.contains(&i) {
            continue;
        }
        if let Some(k) = ctx.needs(r).iter().find_map(|l| owner.get(l)) {
            consequences[*k].push(i);
        }
    }
    for ((f, ev, _), cons) in new_findings.into_iter().zip(consequences) {
        ctx.emit(findings, f, &ev, &cons);
    }
    blocked
}

/// Groups blocked (from, to) pairs into (from-set, to-set) blocks, pairing a block with its
/// mirror image as one "both directions" block.
fn blocks(pairs: &BTreeSet<(u32, u32)>) -> Vec<(Vec<u32>, Vec<u32>, bool)> {
    let mut srcs_of: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for &(a, b) in pairs {
        srcs_of.entry(b).or_default().insert(a);
    }
    let mut by_srcs: BTreeMap<BTreeSet<u32>, BTreeSet<u32>> = BTreeMap::new();
    for (dst, srcs) in srcs_of {
        by_srcs.entry(srcs).or_default().insert(dst);
    }
    let mut blocks: Vec<(BTreeSet<u32>, BTreeSet<u32>)> = by_srcs.into_iter().collect();
    let mut out = Vec::new();
    while let Some((from, to)) = blocks.pop() {
        if let Some(j) = blocks.iter().position(|(f, t)| *f == to && *t == from) {
            blocks.remove(j);
            // Name the smaller side first: "between n3 and n1, n2".
            let (a, b) = if from.len() <= to.len() {
                (from, to)
            } else {
                (to, from)
            };
            out.push((a.into_iter().collect(), b.into_iter().collect(), true));
        } else {
            out.push((from.into_iter().collect(), to.into_iter().collect(), false));
        }
    }
    out.sort();
    out
}

fn reverse_works(ctx: &Ctx<'_>, measured: &BTreeMap<Link, Vec<usize>>, links: &[Link]) -> bool {
    let mut any = false;
    for l in links {
        let rev = Link {
            from: l.to,
            to: l.from,
            ..*l
        };
        match measured.get(&rev) {
            Some(idx) if idx.iter().all(|&i| ctx.results[i].result.outcome.is_ok()) => any = true,
            Some(_) => return false,
            None => {}
        }
    }
    any
}

/// Where the packets died, from the VXLAN receipts and the ICMP offenders.
fn gap_where(ctx: &Ctx<'_>, ev: &[usize]) -> Option<String> {
    let mut places = BTreeSet::new();
    for &i in ev {
        let r = &ctx.results[i];
        let to = r.to.node.clone().unwrap_or_default();
        if r.result.detail.contains("never its VXLAN device") {
            places.insert(format!("host:{to}"));
        } else if r.result.detail.contains("never reached") {
            places.insert("network".to_string());
        } else if let Some(icmp) = r.result.icmp {
            if icmp.from == Some(r.to.address) {
                places.insert(format!("host:{to}"));
            } else if icmp.from.is_some() {
                places.insert("network".to_string());
            }
        }
    }
    if places.is_empty() {
        None
    } else {
        Some(places.into_iter().collect::<Vec<_>>().join(","))
    }
}

/// Node names for a sentence: all of them up to eight, then a count.
fn names_text(names: &[String]) -> String {
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

fn list(ctx: &Ctx<'_>, nodes: &[u32]) -> Vec<String> {
    nodes.iter().map(|&n| ctx.name(n).to_string()).collect()
}

fn addrs(ctx: &Ctx<'_>, nodes: &[u32]) -> Vec<String> {
    nodes
        .iter()
        .map(|&n| ctx.inv.nodes[n as usize].address.to_string())
        .collect()
}

/// At most this many receiving nodes get their own fix lines.
const FIX_NODES: usize = 5;

#[allow(clippy::too_many_arguments)]
fn gap_finding(
    ctx: &Ctx<'_>,
    udp: bool,
    port: u16,
    from: &[u32],
    to: &[u32],
    both: bool,
    reverse_ok: bool,
    ev: &[usize],
) -> Finding {
    let proto = if udp { "udp" } else { "tcp" };
    let (fn_, tn) = (list(ctx, from), list(ctx, to));
    let what = if udp && ctx.overlay_port == Some(port) {
        " (the overlay's VXLAN port)"
    } else if !udp && ctx.api_backends.iter().any(|(_, p)| *p == port) {
        " (the API server)"
    } else if !udp && port == 10250 {
        " (the kubelet)"
    } else {
        ""
    };
    let summary = if both {
        format!(
            "{proto}/{port}{what} is blocked between {} and {}, in both directions",
            names_text(&fn_),
            names_text(&tn)
        )
    } else {
        let rev = if reverse_ok {
            "; the reverse direction works"
        } else {
            ""
        };
        format!(
            "{proto}/{port}{what} is blocked from {} to {}{rev}",
            names_text(&fn_),
            names_text(&tn)
        )
    };
    let mut f = Finding::new(Kind::FirewallGap, Severity::Error, summary);
    f.protocol = Some(proto.into());
    f.port = Some(port);
    f.from = fn_;
    f.to = tn;
    f.direction = Some(if both {
        Direction::Both
    } else {
        Direction::One
    });
    f.where_ = gap_where(ctx, ev);
    let mut receivers: Vec<(u32, Vec<u32>)> = to.iter().map(|&t| (t, from.to_vec())).collect();
    if both {
        receivers.extend(from.iter().map(|&t| (t, to.to_vec())));
    }
    if f.where_.as_deref() == Some("network") {
        f.fix.push(format!(
            "on the network firewall between them: allow {proto}/{port} from {} to {}{}",
            addrs(ctx, from).join(", "),
            addrs(ctx, to).join(", "),
            if both { " and back" } else { "" }
        ));
    }
    for (recv, srcs) in receivers.iter().take(FIX_NODES) {
        let name = ctx.name(*recv);
        let src = addrs(ctx, srcs);
        f.fix.push(format!("on {name} (nftables): nft insert rule inet filter input ip saddr {{ {} }} {proto} dport {port} accept", src.join(", ")));
        f.fix.push(format!(
            "on {name} (iptables): iptables -I INPUT -p {proto} -s {} --dport {port} -j ACCEPT",
            src.join(",")
        ));
        f.fix.push(format!("on {name} (firewalld): firewall-cmd --permanent --add-port={port}/{proto} && firewall-cmd --reload"));
    }
    if receivers.len() > FIX_NODES {
        f.fix.push(format!(
            "... and the same on {} more nodes",
            receivers.len() - FIX_NODES
        ));
    }
    f
}

// ---------------------------------------------------------------------------------------------
// Bootstrap cycles and the Service path

fn is_service_path(r: &ResultRecord) -> bool {
    matches!(r.path, PathClass::PodToService | PathClass::NodeToService)
        || (r.path == PathClass::Dns && r.to.service.as_deref() == Some("kube-dns"))
}

/// Nodes where the `kubernetes` `ClusterIP` fails while the API server answers directly from the
/// same kind of agent: the Service path itself is broken there. Returns (node, evidence).
fn service_broken(ctx: &Ctx<'_>) -> BTreeMap<u32, Vec<usize>> {
    let mut direct_ok: HashSet<(u32, PathClass)> = HashSet::new();
    for r in ctx.results {
        if matches!(
            r.path,
            PathClass::PodToApiserver | PathClass::NodeToApiserver
        ) && r.result.outcome.is_ok()
            && let Some(a) = ctx.from(r)
        {
            direct_ok.insert((a, r.path));
        }
    }
    let mut out: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (i, r) in ctx.results.iter().enumerate() {
        let direct = match r.path {
            PathClass::PodToService => PathClass::PodToApiserver,
            PathClass::NodeToService => PathClass::NodeToApiserver,
            _ => continue,
        };
        let Some(a) = ctx.from(r) else { continue };
        if failed(r) && !ctx.explained.contains(&i) && direct_ok.contains(&(a, direct)) {
            out.entry(a).or_default().push(i);
        }
    }
    out
}

/// The direct-endpoint results that worked on `nodes` (evidence that the API server is fine).
fn direct_evidence(ctx: &Ctx<'_>, nodes: &BTreeSet<u32>) -> Vec<usize> {
    ctx.results
        .iter()
        .enumerate()
        .filter(|(_, r)| matches!(r.path, PathClass::NodeToApiserver) && r.result.outcome.is_ok())
        .filter(|(_, r)| ctx.from(r).is_some_and(|a| nodes.contains(&a)))
        .map(|(i, _)| i)
        .collect()
}

/// Failed Service-path results (`ClusterIP` and the DNS Service) from `nodes`, not yet explained.
fn service_consequences(ctx: &Ctx<'_>, nodes: &BTreeSet<u32>, evidence: &[usize]) -> Vec<usize> {
    ctx.results
        .iter()
        .enumerate()
        .filter(|(i, r)| {
            failed(r) && is_service_path(r) && !ctx.explained.contains(i) && !evidence.contains(i)
        })
        .filter(|(_, r)| ctx.from(r).is_some_and(|a| nodes.contains(&a)))
        .map(|(i, _)| i)
        .collect()
}

fn runs_on(c: &Component, node: &str) -> bool {
    c.nodes.is_empty() || c.nodes.iter().any(|n| n == node)
}

fn env_fix(ctx: &Ctx<'_>, c: &Component) -> Vec<String> {
    let Some(ep) = ctx.inv.cluster.api.endpoints.first() else {
        return Vec::new();
    };
    let (host, port) = (ep.ip(), ep.port());
    let containers = if c.containers.is_empty() {
        vec![c.name.clone()]
    } else {
        c.containers.clone()
    };
    // kubectl's short names keep the command on one line.
    let kind = match c.kind.as_str() {
        "DaemonSet" => "ds".to_string(),
        "Deployment" => "deploy".to_string(),
        "StatefulSet" => "sts".to_string(),
        other => other.to_lowercase(),
    };
    let mut out = vec![format!(
        "{} ({} {}/{}): set KUBERNETES_SERVICE_HOST={host} and KUBERNETES_SERVICE_PORT={port} in {} {}",
        c.name,
        c.kind,
        c.namespace,
        c.name,
        if containers.len() > 1 {
            "containers"
        } else {
            "container"
        },
        containers.join(", ")
    )];
    for ct in &containers {
        out.push(format!(
            "  kubectl -n {} set env {kind}/{} -c {ct} KUBERNETES_SERVICE_HOST={host} KUBERNETES_SERVICE_PORT={port}",
            c.namespace, c.name
        ));
    }
    out
}

fn bootstrap_cycles(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) {
    let on_service: Vec<&Component> = ctx
        .inv
        .components
        .iter()
        .filter(|c| c.api_access == ApiAccess::Service)
        .collect();
    let Some(cni) = on_service.iter().find(|c| c.role == "cni").copied() else {
        return;
    };
    // The CNI needs the Service path on its nodes; the Service path needs the pod network there
    // (kube-proxy's rules and the routes the CNI programs); the pod network needs the CNI.
    let cycle = vec![
        cni.name.clone(),
        format!("kubernetes Service {}", ctx.inv.cluster.api.service),
        "pod network (routes, kube-proxy rules)".to_string(),
        cni.name.clone(),
    ];
    let mut components = vec![cni.name.clone()];
    components.extend(
        on_service
            .iter()
            .filter(|c| c.name != cni.name)
            .map(|c| c.name.clone()),
    );
    let broken = service_broken(ctx);
    let active: BTreeSet<u32> = broken
        .keys()
        .copied()
        .filter(|&n| runs_on(cni, ctx.name(n)))
        .collect();
    let mut fix = Vec::new();
    for c in &on_service {
        fix.extend(env_fix(ctx, c));
    }
    let (mut f, ev, cons) = if active.is_empty() {
        let mut f = Finding::new(
            Kind::BootstrapCycle,
            Severity::Warning,
            format!(
                "latent bootstrap cycle: {} reaches the API server through the kubernetes Service, which needs the network {} builds; it works now, but cannot recover if that path ever breaks",
                cni.name, cni.name
            ),
        );
        f.state = Some("latent".into());
        let ev: Vec<usize> = ctx
            .results
            .iter()
            .enumerate()
            .filter(|(_, r)| {
                is_service_path(r) && r.result.outcome.is_ok() && r.path != PathClass::Dns
            })
            .map(|(i, _)| i)
            .collect();
        (f, ev, Vec::new())
    } else {
        let mut ev: Vec<usize> = active.iter().flat_map(|n| broken[n].clone()).collect();
        ev.extend(direct_evidence(ctx, &active));
        let cons = service_consequences(ctx, &active, &ev);
        let names = list(ctx, &active.iter().copied().collect::<Vec<_>>());
        let mut f = Finding::new(
            Kind::BootstrapCycle,
            Severity::Error,
            format!(
                "active bootstrap cycle on {}: the API server answers directly, but the kubernetes Service {} does not, and {} reach(es) the API server through it",
                names_text(&names),
                ctx.inv.cluster.api.service,
                components.join(", ")
            ),
        );
        f.state = Some("active".into());
        f.nodes = names;
        (f, ev, cons)
    };
    f.cycle = cycle;
    f.components = components;
    f.fix = fix;
    ctx.emit(findings, f, &ev, &cons);
}

fn service_proxy(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) {
    let broken = service_broken(ctx);
    if broken.is_empty() {
        return;
    }
    let nodes: BTreeSet<u32> = broken.keys().copied().collect();
    let mut ev: Vec<usize> = broken.values().flatten().copied().collect();
    ev.extend(direct_evidence(ctx, &nodes));
    let cons = service_consequences(ctx, &nodes, &ev);
    let names = list(ctx, &nodes.iter().copied().collect::<Vec<_>>());
    let mut f = Finding::new(
        Kind::ServiceProxy,
        Severity::Error,
        format!(
            "the kubernetes Service {} fails on {} while the API server answers directly: the Service rules (kube-proxy) are missing or stale there",
            ctx.inv.cluster.api.service,
            names_text(&names)
        ),
    );
    for n in &names {
        f.fix.push(format!("check kube-proxy on {n}: kubectl -n kube-system get pods -l k8s-app=kube-proxy --field-selector spec.nodeName={n}"));
    }
    f.fix.push("on the node: nft list ruleset | grep -c 10.96 (or iptables-save -t nat | grep KUBE-SERVICES); restart kube-proxy there if the rules are missing".into());
    f.nodes = names;
    ctx.emit(findings, f, &ev, &cons);
}

// ---------------------------------------------------------------------------------------------
// Node checks: CNI credentials, the kubelet's API address, DNS forward loops

/// One hour: a bound service-account token older than this was not refreshed (INCIDENTS.md 4).
const STALE_AFTER: u64 = 3600;

fn cni_restart(ctx: &Ctx<'_>, node: &str) -> String {
    let cni = ctx.inv.components.iter().find(|c| c.role == "cni");
    let (ns, name) = cni.map_or(("kube-system", "the CNI agent"), |c| {
        (c.namespace.as_str(), c.name.as_str())
    });
    format!(
        "restart {name} on {node} so it writes a fresh token: kubectl -n {ns} get pods -o wide --field-selector spec.nodeName={node} \
         | grep {}, then kubectl -n {ns} delete pod <that pod>; for good, run a CNI version that renews its token with the TokenRequest API (projectcalico/calico#5910; Multus: thick plugin)",
        cni.map_or("cni", |c| c.name.as_str())
    )
}

/// What a CNI token's facts say: (state, sentence), or `None` when it is fine.
fn credential_state(
    kc: &probe_proto::KubeconfigFacts,
    node: &str,
) -> Option<(&'static str, String)> {
    let t = kc.token.as_ref()?;
    let who = t
        .subject
        .clone()
        .unwrap_or_else(|| "an unknown subject".into());
    let rejected = kc
        .check
        .as_ref()
        .is_some_and(|c| c.outcome == Outcome::Unauthorized);
    let path = &kc.path;
    if let Some(exp) = t.expires_at.filter(|e| *e <= t.checked_at) {
        let api = if rejected {
            "; the API server rejects it (HTTP 401)"
        } else {
            ""
        };
        let ago = age(t.checked_at.saturating_sub(exp));
        return Some((
            "expired",
            format!(
                "the token in {path} on {node} ({who}) expired {} ({ago} ago){api}",
                utc(exp)
            ),
        ));
    }
    if rejected {
        return Some((
            "rejected",
            format!("the API server rejects the token in {path} on {node} ({who}) with 401"),
        ));
    }
    if let Some(iat) = t
        .issued_at
        .filter(|iat| t.bound && t.checked_at.saturating_sub(*iat) > STALE_AFTER)
    {
        let ago = age(t.checked_at.saturating_sub(iat));
        return Some((
            "stale",
            format!(
                "the token in {path} on {node} ({who}) was issued {ago} ago ({}) and never refreshed",
                utc(iat)
            ),
        ));
    }
    if t.format == "jwt" && t.expires_at.is_none() {
        return Some((
            "non-expiring",
            format!("the token in {path} on {node} ({who}) never expires: a legacy secret token"),
        ));
    }
    None
}

/// Per credential state: the nodes, the sentences, the evidence.
#[derive(Default)]
struct CredentialGroup {
    nodes: BTreeSet<String>,
    sentences: Vec<String>,
    evidence: Vec<usize>,
}

/// What the node checks gathered before they become findings.
#[derive(Default)]
struct NodeFindings {
    credentials: BTreeMap<&'static str, CredentialGroup>,
    /// (node, result, sentence)
    localhost: Vec<(String, usize, String)>,
    /// (node, result, looping nameservers)
    loops: Vec<(String, usize, Vec<String>)>,
}

fn node_checks(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) {
    let mut found = NodeFindings::default();
    let corefile_forwards_to_resolv = ctx
        .inv
        .cluster
        .dns
        .as_ref()
        .and_then(|d| d.corefile.as_deref())
        .is_some_and(|c| {
            c.lines().any(|l| {
                let l = l.trim();
                l.starts_with("forward") && l.contains("/etc/resolv.conf")
            })
        });
    let cluster_dns: Vec<IpAddr> = ctx
        .inv
        .cluster
        .dns
        .iter()
        .flat_map(|d| std::iter::once(d.service.ip()).chain(d.endpoints.iter().map(SocketAddr::ip)))
        .collect();
    for (i, r) in ctx.results.iter().enumerate() {
        let Some(facts) = r
            .result
            .node
            .as_ref()
            .filter(|_| r.path == PathClass::NodeConfig)
        else {
            continue;
        };
        let node = r.from.node.clone();
        for kc in &facts.cni_kubeconfigs {
            if let Some((state, sentence)) = credential_state(kc, &node) {
                let g = found.credentials.entry(state).or_default();
                g.nodes.insert(node.clone());
                g.sentences.push(sentence);
                g.evidence.push(i);
            }
        }
        let control_plane = ctx
            .node
            .get(node.as_str())
            .is_some_and(|&n| ctx.inv.nodes[n as usize].is_control_plane());
        for kc in &facts.kubelet {
            let Some(server) = &kc.server else { continue };
            let local = ["https://localhost", "https://127.", "https://[::1]"]
                .iter()
                .any(|p| server.starts_with(p));
            let answered = kc.check.as_ref().is_some_and(|c| c.outcome == Outcome::Ok);
            if local && !control_plane && !answered {
                found.localhost.push((
                    node.clone(),
                    i,
                    format!(
                        "{} on {node} says server: {server}, and nothing listens there",
                        kc.path
                    ),
                ));
            }
        }
        if let Some(rc) = facts
            .resolv_conf
            .as_ref()
            .filter(|_| corefile_forwards_to_resolv)
        {
            let looping = |n: &&String| {
                n.parse::<IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback() || cluster_dns.contains(&ip))
            };
            let bad: Vec<String> = rc.nameservers.iter().filter(looping).cloned().collect();
            if !bad.is_empty() {
                found.loops.push((node, i, bad));
            }
        }
    }
    credential_findings(ctx, findings, found.credentials);
    localhost_finding(ctx, findings, &found.localhost);
    loop_finding(ctx, findings, &found.loops);
}

fn credential_findings(
    ctx: &mut Ctx<'_>,
    findings: &mut Vec<Finding>,
    groups: BTreeMap<&'static str, CredentialGroup>,
) {
    for (state, g) in groups {
        let severity = if matches!(state, "expired" | "rejected") {
            Severity::Error
        } else {
            Severity::Warning
        };
        let mut f = Finding::new(
            Kind::Credential,
            severity,
            format!("CNI credential {state}: {}", g.sentences.join("; ")),
        );
        f.state = Some(state.into());
        f.nodes = g.nodes.into_iter().collect();
        for n in &f.nodes {
            f.fix.push(cni_restart(ctx, n));
        }
        ctx.emit(findings, f, &g.evidence, &[]);
    }
}

fn localhost_finding(
    ctx: &mut Ctx<'_>,
    findings: &mut Vec<Finding>,
    localhost: &[(String, usize, String)],
) {
    if localhost.is_empty() {
        return;
    }
    let cp = ctx.inv.cluster.api.endpoints.first().map_or_else(
        || "<control-plane address>:6443".into(),
        ToString::to_string,
    );
    let said: Vec<String> = localhost.iter().map(|l| l.2.clone()).collect();
    let mut f = Finding::new(
        Kind::Misconfiguration,
        Severity::Error,
        format!(
            "the kubelet points at an API server on its own host: {}",
            said.join("; ")
        ),
    );
    f.nodes = localhost.iter().map(|l| l.0.clone()).collect();
    for n in &f.nodes {
        f.fix.push(format!("on {n}: set server: https://{cp} in /etc/kubernetes/kubelet.conf, then systemctl restart kubelet"));
    }
    ctx.emit(
        findings,
        f,
        &localhost.iter().map(|l| l.1).collect::<Vec<_>>(),
        &[],
    );
}

fn loop_finding(
    ctx: &mut Ctx<'_>,
    findings: &mut Vec<Finding>,
    loops: &[(String, usize, Vec<String>)],
) {
    // CoreDNS uses the resolv.conf of the node it runs on.
    let dns_nodes: BTreeSet<&str> = ctx.dns_backends.iter().map(|&n| ctx.name(n)).collect();
    let relevant: Vec<&(String, usize, Vec<String>)> = loops
        .iter()
        .filter(|l| dns_nodes.is_empty() || dns_nodes.contains(l.0.as_str()))
        .collect();
    if relevant.is_empty() {
        return;
    }
    // What the loop breaks: names outside the cluster domain, from every pod.
    let cons: Vec<usize> = ctx
        .results
        .iter()
        .enumerate()
        .filter(|(i, r)| r.path == PathClass::Dns && failed(r) && !ctx.explained.contains(i))
        .filter(|(_, r)| {
            r.result
                .dns
                .as_ref()
                .is_some_and(|d| !d.name.ends_with(".cluster.local"))
        })
        .map(|(i, _)| i)
        .collect();
    let servers: BTreeSet<String> = relevant.iter().flat_map(|l| l.2.iter().cloned()).collect();
    let nodes: Vec<&str> = relevant.iter().map(|l| l.0.as_str()).collect();
    let mut f = Finding::new(
        Kind::Dns,
        Severity::Error,
        format!(
            "DNS forward loop: the Corefile forwards to /etc/resolv.conf, and resolv.conf on {} names {} — the cluster DNS forwards to itself (CoreDNS: plugin/loop: Loop detected)",
            nodes.join(", "),
            servers.into_iter().collect::<Vec<_>>().join(", ")
        ),
    );
    f.state = Some("loop".into());
    f.nodes = nodes.iter().map(ToString::to_string).collect();
    f.fix.push("in the coredns ConfigMap, replace `forward . /etc/resolv.conf` with `forward . <your real upstream resolvers>`".into());
    f.fix.push("or give the kubelet a resolv.conf with real upstreams (resolvConf: /run/systemd/resolve/resolv.conf) and restart the DNS pods".into());
    let evidence: Vec<usize> = relevant.iter().map(|l| l.1).collect();
    ctx.emit(findings, f, &evidence, &cons);
}

// ---------------------------------------------------------------------------------------------
// Overlay, MTU, DNS, missing agents, and the rest

fn overlay_and_mtu(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>, blocked: &HashSet<Link>) {
    let Some(port) = ctx.overlay_port else { return };
    // VXLAN receipts confirmed (decapsulated) per direction.
    let mut vxlan_ok: HashSet<(u32, u32)> = HashSet::new();
    let mut small_ok: HashSet<(u32, u32)> = HashSet::new();
    for r in ctx.results {
        let (Some(a), Some(b)) = (ctx.from(r), ctx.to(r)) else {
            continue;
        };
        if Ctx::is_vxlan(r) && r.result.outcome.is_ok() {
            vxlan_ok.insert((a, b));
        }
        if r.path == PathClass::PodToPod && r.result.outcome.is_ok() {
            small_ok.insert((a, b));
        }
    }
    let mut mtu: Vec<usize> = Vec::new();
    let mut overlay: Vec<usize> = Vec::new();
    for (i, r) in ctx.results.iter().enumerate() {
        if !failed(r) || ctx.explained.contains(&i) {
            continue;
        }
        let (Some(a), Some(b)) = (ctx.from(r), ctx.to(r)) else {
            continue;
        };
        if a == b || ctx.needs(r).iter().any(|l| blocked.contains(l)) {
            continue;
        }
        let overlay_path = matches!(
            r.path,
            PathClass::PodToPod | PathClass::NodeToPod | PathClass::Overlay
        ) && !Ctx::is_vxlan(r);
        if Ctx::is_mtu(r) && r.result.outcome == Outcome::Timeout && small_ok.contains(&(a, b)) {
            mtu.push(i);
        } else if overlay_path && vxlan_ok.contains(&(a, b)) && vxlan_ok.contains(&(b, a)) {
            overlay.push(i);
        }
    }
    if !mtu.is_empty() {
        let size = ctx
            .inv
            .cluster
            .overlay
            .as_ref()
            .and_then(|o| o.mtu)
            .unwrap_or(0);
        let pairs: BTreeSet<(u32, u32)> = mtu
            .iter()
            .filter_map(|&i| Some((ctx.from(&ctx.results[i])?, ctx.to(&ctx.results[i])?)))
            .collect();
        let nodes = common_nodes(&pairs);
        let names = list(ctx, &nodes);
        let pair_text: Vec<String> = pairs
            .iter()
            .map(|(a, b)| format!("{}->{}", ctx.name(*a), ctx.name(*b)))
            .collect();
        let mut f = Finding::new(
            Kind::Mtu,
            Severity::Error,
            format!(
                "full-size packets ({size} bytes) between pods vanish while small ones pass ({}): the underlay path MTU{} is below what the overlay needs",
                pair_text.join(", "),
                if names.is_empty() {
                    String::new()
                } else {
                    format!(" to and from {}", names_text(&names))
                }
            ),
        );
        f.fix.push(format!("measure the path MTU between the nodes (ping -M do -s {} <peer>); either raise the underlay MTU to {} or lower the CNI's MTU to the underlay's minus {}", size.saturating_sub(28) + 50, u32::from(size) + 50, 50));
        f.nodes = names;
        ctx.emit(findings, f, &mtu, &[]);
    }
    if !overlay.is_empty() {
        let pairs: BTreeSet<(u32, u32)> = overlay
            .iter()
            .filter_map(|&i| Some((ctx.from(&ctx.results[i])?, ctx.to(&ctx.results[i])?)))
            .collect();
        let names = list(ctx, &common_nodes(&pairs));
        let mut f = Finding::new(
            Kind::Overlay,
            Severity::Error,
            format!(
                "overlay traffic fails although udp/{port} is open both ways (VXLAN receipts confirmed){}: routes, fdb or neighbour entries for the VXLAN device are missing or wrong",
                if names.is_empty() {
                    String::new()
                } else {
                    format!(" on {}", names_text(&names))
                }
            ),
        );
        f.fix.push("compare `ip route`, `bridge fdb show dev flannel.1` and `ip neigh show dev flannel.1` on the nodes involved with the other nodes; restart the CNI agent there".into());
        f.nodes = names;
        ctx.emit(findings, f, &overlay, &[]);
    }
}

/// The nodes that appear in every pair (the common end of a set of failing pairs), or, when no
/// node is common, every node involved.
fn common_nodes(pairs: &BTreeSet<(u32, u32)>) -> Vec<u32> {
    let all: BTreeSet<u32> = pairs.iter().flat_map(|(a, b)| [*a, *b]).collect();
    let common: Vec<u32> = all
        .iter()
        .copied()
        .filter(|n| pairs.iter().all(|(a, b)| a == n || b == n))
        .collect();
    if common.is_empty() {
        all.into_iter().collect()
    } else {
        common
    }
}

fn dns(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) {
    let mut by_rcode: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let mut silent: Vec<usize> = Vec::new();
    for (i, r) in ctx.results.iter().enumerate() {
        if r.path != PathClass::Dns || !failed(r) || ctx.explained.contains(&i) {
            continue;
        }
        match (
            r.result.outcome,
            r.result.dns.as_ref().and_then(|d| d.rcode.clone()),
        ) {
            (Outcome::DnsError, Some(rcode)) => by_rcode.entry(rcode).or_default().push(i),
            _ => silent.push(i),
        }
    }
    for (rcode, idx) in by_rcode {
        let names: BTreeSet<String> = idx
            .iter()
            .filter_map(|&i| ctx.results[i].result.dns.as_ref().map(|d| d.name.clone()))
            .collect();
        let mut f = Finding::new(
            Kind::Dns,
            Severity::Error,
            format!(
                "cluster DNS answers {rcode} for {}: the server is reachable but its records or upstreams are wrong",
                names.into_iter().collect::<Vec<_>>().join(", ")
            ),
        );
        f.state = Some(rcode.to_lowercase());
        f.fix.push("check the DNS pods' logs and configuration (kubectl -n kube-system logs -l k8s-app=kube-dns; the coredns ConfigMap)".into());
        ctx.emit(findings, f, &idx, &[]);
    }
    if !silent.is_empty() {
        let mut f = Finding::new(
            Kind::Dns,
            Severity::Error,
            "cluster DNS does not answer although the paths to it are not known to be blocked: the DNS pods may be down or not listening",
        );
        f.state = Some("no-answer".into());
        f.fix.push("kubectl -n kube-system get pods -l k8s-app=kube-dns -o wide; kubectl -n kube-system logs -l k8s-app=kube-dns".into());
        ctx.emit(findings, f, &silent, &[]);
    }
}

fn agent_missing(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>, agents: &[AgentStatus]) {
    for a in agents.iter().filter(|a| !a.ran) {
        let idx: Vec<usize> = ctx
            .results
            .iter()
            .enumerate()
            .filter(|(i, r)| {
                (r.from.node == a.node && r.from.agent == a.agent && r.is_unknown())
                    || (failed(r)
                        && !ctx.explained.contains(i)
                        && r.to.node.as_deref() == Some(&a.node)
                        && r.to.agent == Some(a.agent))
            })
            .map(|(i, _)| i)
            .collect();
        let mut f = Finding::new(
            Kind::AgentMissing,
            Severity::Warning,
            format!(
                "no {} agent could run on {}: its paths are unknown, not failed ({})",
                a.agent.as_str(),
                a.node,
                a.detail
            ),
        );
        f.nodes = vec![a.node.clone()];
        ctx.emit(findings, f, &[], &idx);
    }
}

fn unexplained(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) {
    let mut groups: BTreeMap<(PathClass, Outcome), Vec<usize>> = BTreeMap::new();
    for (i, r) in ctx.results.iter().enumerate() {
        if failed(r) && !ctx.explained.contains(&i) {
            groups
                .entry((r.path, r.result.outcome))
                .or_default()
                .push(i);
        }
    }
    for ((path, outcome), idx) in groups {
        let first = &ctx.results[idx[0]].result.detail;
        let nodes: BTreeSet<String> = idx
            .iter()
            .flat_map(|&i| {
                [
                    Some(ctx.results[i].from.node.clone()),
                    ctx.results[i].to.node.clone(),
                ]
            })
            .flatten()
            .collect();
        let mut f = Finding::new(
            Kind::Unexplained,
            Severity::Error,
            format!(
                "{} {path} probe(s) fail with {outcome} and no finding explains them; first: {first}",
                idx.len()
            ),
        );
        f.nodes = nodes.into_iter().collect();
        ctx.emit(findings, f, &idx, &[]);
    }
}

#[cfg(test)]
mod tests;
