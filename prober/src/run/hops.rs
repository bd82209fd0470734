//! The hop where a path died: for a few of the paths that failed on the network (their receiver
//! never saw the packets), the sender sends the same protocol and port again with TTL 1, 2, ...
//! at once, and the last router that answered with ICMP time exceeded is recorded on the failed
//! result (`trace`). One extra probe deadline per run, only when something died on the way.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::net::IpAddr;
use std::num::NonZeroU8;

use probe_proto::{
    HopProbe, Outcome, Port, Probe, ProbeResult, ProbeSpec, Receipt, Trace, Transport,
};

use super::pass::{Slots, fan_out};
use super::{Pass, Phase, Progress, Store, plan_for};
use crate::model::{AgentRef, PathClass, Protocol};
use crate::plan::PlannedRef;
use crate::runtime::Runtime;

/// The most routers a traced path is followed through: more than a cluster's underlay has
/// between two of its nodes.
pub(crate) const MAX_HOPS: u8 = 8;
/// Paths traced per protocol and port: enough to tell one firewall from several.
const PER_PORT: usize = 4;
/// Paths traced from one sender. Every router on the way answers each traced path once, and the
/// kernel sends a peer at most six ICMP errors in a burst (`XRLIM_BURST_FACTOR`), some of which
/// the first pass may have spent.
const PER_SENDER: usize = 3;

/// What a traced path is sent again as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Route {
    address: IpAddr,
    port: Port,
    protocol: Transport,
}

/// The path a failed result is traced along, when it died on the network: a TCP or UDP probe
/// (a crafted tunnel datagram is traced as plain UDP to its port) that its receiver's sniffer
/// never saw. Only a host agent's paths to a node's host address: a pod's packets inside the
/// overlay carry their own TTL, which the underlay's routers never see.
fn route(p: &PlannedRef<'_>, r: &ProbeResult) -> Option<Route> {
    if r.outcome != Outcome::Timeout || r.receipt != Some(Receipt::NotArrived) {
        return None;
    }
    if !matches!(
        p.path,
        PathClass::NodeToNode | PathClass::Overlay | PathClass::NodeToApiserver
    ) {
        return None;
    }
    let protocol = match p.to.protocol {
        Protocol::Tcp => Transport::Tcp,
        Protocol::Udp => Transport::Udp,
        Protocol::Icmp | Protocol::Ipip => return None,
    };
    Some(Route {
        address: p.to.address,
        port: Port::new(p.to.port?)?,
        protocol,
    })
}

/// Picks the failed results to trace: a few per protocol and port, from as many senders as
/// possible, at most [`PER_SENDER`] from one. In plan order, so the choice is reproducible.
fn choose(candidates: &[(usize, &AgentRef, Route)]) -> Vec<usize> {
    let mut per_port: HashMap<(Transport, Port), usize> = HashMap::new();
    let mut per_sender: HashMap<&AgentRef, usize> = HashMap::new();
    let mut seen: HashSet<(Transport, Port, &str)> = HashSet::new();
    let mut chosen = Vec::new();
    // First one path per sender node and port, then the rest as room allows.
    for spread in [true, false] {
        for &(i, from, route) in candidates {
            let key = (route.protocol, route.port);
            if chosen.contains(&i)
                || per_port.get(&key).copied().unwrap_or(0) >= PER_PORT
                || per_sender.get(from).copied().unwrap_or(0) >= PER_SENDER
                || (spread && !seen.insert((key.0, key.1, from.node.as_str())))
            {
                continue;
            }
            *per_port.entry(key).or_default() += 1;
            *per_sender.entry(from).or_default() += 1;
            chosen.push(i);
        }
    }
    chosen.sort_unstable();
    chosen
}

/// How far a path got, from its TTL-limited probes' results by TTL: the farthest hop that
/// answered with time exceeded. None when no hop answered, or when the destination itself did
/// (the path works now, or answers something: nothing died on the way).
fn trace_of(destination: IpAddr, by_ttl: &BTreeMap<u8, ProbeResult>) -> Option<Trace> {
    let reached = by_ttl.values().any(|r| {
        matches!(r.outcome, Outcome::Ok | Outcome::Refused)
            || r.icmp.is_some_and(|i| i.from == Some(destination))
    });
    if reached {
        return None;
    }
    by_ttl.iter().rev().find_map(|(&ttl, r)| {
        r.icmp
            .filter(|i| i.icmp_type == time_exceeded(destination))
            .and_then(|i| i.from)
            .map(|after| Trace { after, hops: ttl })
    })
}

/// Traces a few of the paths in `results` that died on the network and records on each how far
/// it got. A sender that cannot run its probes leaves its paths untraced, nothing more. Returns
/// whether the run was interrupted meanwhile.
pub(super) async fn trace<R: Runtime + 'static>(
    pass: &Pass<'_, R>,
    results: &mut Slots,
    progress: &dyn Progress,
    cancel: &mut (impl Future<Output = ()> + Unpin),
) -> bool {
    let mut failed: Vec<usize> = results.failed().map(|(i, _)| i).collect();
    failed.sort_unstable();
    let plans_of: Vec<(usize, PlannedRef<'_>, Route)> = failed
        .into_iter()
        .filter_map(|i| {
            let p = pass.planned.at(i);
            let r = results.result(i)?;
            route(&p, r).map(|route| (i, p, route))
        })
        .collect();
    if plans_of.is_empty() {
        return false;
    }
    let candidates: Vec<(usize, &AgentRef, Route)> =
        plans_of.iter().map(|(i, p, r)| (*i, p.from, *r)).collect();
    let chosen = choose(&candidates);
    let mut specs: BTreeMap<AgentRef, Vec<ProbeSpec>> = BTreeMap::new();
    for (k, &i) in chosen.iter().enumerate() {
        let Some((_, p, route)) = plans_of.iter().find(|(j, _, _)| *j == i) else {
            continue;
        };
        let list = specs.entry(p.from.clone()).or_default();
        for ttl in (1..=MAX_HOPS).filter_map(NonZeroU8::new) {
            list.push(ProbeSpec {
                id: hop_id(k, ttl.get()),
                timeout_ms: None,
                probe: Probe::Hop(HopProbe {
                    address: route.address,
                    port: route.port,
                    protocol: route.protocol,
                    ttl,
                }),
            });
        }
    }
    let steps: usize = specs.values().map(Vec::len).sum();
    progress.phase(Phase::TracingHops, steps as u64);
    let plans = specs
        .into_iter()
        .map(|(agent, list)| (agent, plan_for(list, pass.cfg)));
    let mut answers: HashMap<(usize, u8), ProbeResult> = HashMap::new();
    let (_failed, interrupted) = fan_out(
        pass.runtime,
        plans,
        pass.cfg.concurrency,
        cancel,
        |agent, r| match parse_hop_id(&r.id) {
            Some((k, ttl))
                if chosen
                    .get(k)
                    .is_some_and(|&i| pass.planned.at(i).from == agent) =>
            {
                progress.done(1);
                answers.insert((k, ttl), r);
                Ok(())
            }
            _ => Err(r.id),
        },
    )
    .await;
    for (k, &i) in chosen.iter().enumerate() {
        let by_ttl: BTreeMap<u8, ProbeResult> = (1..=MAX_HOPS)
            .filter_map(|ttl| answers.remove(&(k, ttl)).map(|r| (ttl, r)))
            .collect();
        let destination = pass.planned.at(i).to.address;
        let (Some(t), Some(r)) = (trace_of(destination, &by_ttl), results.result_mut(i)) else {
            continue;
        };
        r.detail = format!("{}; {}", r.detail, words(t));
        r.trace = Some(t);
    }
    interrupted
}

/// What a trace adds to a result's detail.
fn words(t: Trace) -> String {
    let s = if t.hops == 1 { "" } else { "s" };
    format!(
        "sent again with rising TTL: the last hop to answer was {} ({} hop{s} from the sender), nothing past it",
        t.after, t.hops
    )
}

/// The ICMP type of "time exceeded" in the destination's family: 11, or ICMPv6's 3.
fn time_exceeded(destination: IpAddr) -> u8 {
    if destination.is_ipv6() { 3 } else { 11 }
}

/// The id of traced path `k`'s probe with `ttl`: short, whatever the path's own id.
fn hop_id(k: usize, ttl: u8) -> String {
    format!("hop:{k}:{ttl}")
}

fn parse_hop_id(id: &str) -> Option<(usize, u8)> {
    let (k, ttl) = id.strip_prefix("hop:")?.split_once(':')?;
    Some((k.parse().ok()?, ttl.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::AgentKind;
    use probe_proto::IcmpInfo;

    fn at(ttl: u8, outcome: Outcome, icmp: Option<(u8, &str)>) -> (u8, ProbeResult) {
        let mut r = ProbeResult::new(hop_id(0, ttl), outcome, "");
        r.icmp = icmp.map(|(icmp_type, from)| IcmpInfo {
            icmp_type,
            code: 0,
            from: Some(from.parse().unwrap()),
        });
        (ttl, r)
    }

    #[test]
    fn over_ipv6_time_exceeded_is_icmpv6_type_3() {
        let dest: IpAddr = "fd78:3::2".parse().unwrap();
        let te = Outcome::Unreachable;
        let by_ttl: BTreeMap<_, _> = [
            at(1, te, Some((3, "fd78:1::1"))),
            at(2, te, Some((3, "fd78:2::2"))),
            at(3, Outcome::Timeout, None),
        ]
        .into();
        assert_eq!(
            trace_of(dest, &by_ttl),
            Some(Trace {
                after: "fd78:2::2".parse().unwrap(),
                hops: 2
            })
        );
        // Type 11 means nothing to ICMPv6, and type 3 is IPv4's destination unreachable.
        let wrong: BTreeMap<_, _> = [at(1, te, Some((11, "fd78:1::1")))].into();
        assert_eq!(trace_of(dest, &wrong), None);
        let v4: BTreeMap<_, _> = [at(1, te, Some((3, "192.168.56.1")))].into();
        assert_eq!(trace_of("192.168.57.12".parse().unwrap(), &v4), None);
    }

    #[test]
    fn the_farthest_hop_that_answered_is_where_it_died() {
        let dest: IpAddr = "192.168.57.12".parse().unwrap();
        let te = Outcome::Unreachable;
        let two_routers: BTreeMap<_, _> = [
            at(1, te, Some((11, "192.168.56.1"))),
            at(2, te, Some((11, "192.168.64.2"))),
            at(3, Outcome::Timeout, None),
            at(4, Outcome::Timeout, None),
        ]
        .into();
        assert_eq!(
            trace_of(dest, &two_routers),
            Some(Trace {
                after: "192.168.64.2".parse().unwrap(),
                hops: 2
            })
        );
        // A hop that stays silent (or whose answer the rate limiter ate) before one that
        // answers does not end the trace.
        let gap: BTreeMap<_, _> = [
            at(1, Outcome::Timeout, None),
            at(2, te, Some((11, "192.168.64.2"))),
            at(3, Outcome::Timeout, None),
        ]
        .into();
        assert_eq!(trace_of(dest, &gap).map(|t| t.hops), Some(2));
        // Nobody answered: nothing to name.
        let silent: BTreeMap<_, _> = [at(1, Outcome::Timeout, None)].into();
        assert_eq!(trace_of(dest, &silent), None);
        // The destination answered (the path works now, or says no itself): no hop to blame.
        let reached: BTreeMap<_, _> = [
            at(1, te, Some((11, "192.168.56.1"))),
            at(2, Outcome::Refused, None),
        ]
        .into();
        assert_eq!(trace_of(dest, &reached), None);
        let rejected_by_dest: BTreeMap<_, _> = [
            at(1, te, Some((11, "192.168.56.1"))),
            at(2, Outcome::Rejected, Some((3, "192.168.57.12"))),
        ]
        .into();
        assert_eq!(trace_of(dest, &rejected_by_dest), None);
    }

    fn sender(node: &str) -> AgentRef {
        AgentRef {
            node: node.into(),
            agent: AgentKind::Host,
        }
    }

    fn udp(port: u16) -> Route {
        Route {
            address: "192.168.57.12".parse().unwrap(),
            port: Port::new(port).unwrap(),
            protocol: Transport::Udp,
        }
    }

    #[test]
    fn a_few_paths_per_port_from_as_many_senders_as_possible() {
        let (n1, n2, n3) = (sender("n1"), sender("n2"), sender("n3"));
        // n1 failed to six receivers on 8472, n2 and n3 to one each, n1 also on 10250.
        let mut c: Vec<(usize, &AgentRef, Route)> = (0..6).map(|i| (i, &n1, udp(8472))).collect();
        c.push((6, &n2, udp(8472)));
        c.push((7, &n3, udp(8472)));
        c.push((8, &n1, udp(10250)));
        let got = choose(&c);
        // One per sender first (0, 6, 7), then n1 again up to the port's four: 1.
        assert_eq!(got, vec![0, 1, 6, 7, 8]);
        // n1 is at its limit of three: 0, 1 and 8.
        assert_eq!(got.iter().filter(|&&i| c[i].1 == &n1).count(), PER_SENDER);
        assert!(choose(&[]).is_empty());
    }

    #[test]
    fn hop_ids_round_trip() {
        assert_eq!(parse_hop_id(&hop_id(12, 7)), Some((12, 7)));
        assert_eq!(parse_hop_id("hop:x:1"), None);
        assert_eq!(parse_hop_id("seen:n1/host"), None);
    }
}
