//! Where a failed TCP or UDP probe to a node got to: its host agent's sniffer (which sees packets
//! before the node's firewall does) is asked, by flow for a SYN and by nonce for a UDP datagram,
//! whether the probe arrived and whether the node answered. Only probes that failed every
//! attempt with silence, and TCP probes refused with a reset (which carries the receiver's address
//! whoever forged it), are asked about, so a healthy run asks nothing.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;

use probe_proto::{Flow, Outcome, Probe, ProbeResult, Receipt, Sighting, SightingKind, TcpProbe};

use super::{Ask, Pass, Progress, Store};
use crate::model::{AgentKind, AgentRef};
use crate::plan::PlannedRef;

use super::pass::Slots;
use crate::runtime::Runtime;

/// Sightings kept on one result: a SYN and its retransmissions, on an interface or two.
const KEPT: usize = 4;

/// What one failed probe asks its receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Question {
    /// A SYN, by its flow.
    Tcp(Flow),
    /// A UDP probe datagram, by its nonce.
    Udp(u32),
}

/// The question for a failed result, when it has one: a TCP or UDP probe to a node's host that
/// timed out, or a TCP probe to one that was reset (did the SYN reach the node, whose own firewall
/// then reset it, or was the reset forged on the way?), whose sender recorded the address it sent
/// from.
fn question(p: &PlannedRef<'_>, r: &ProbeResult) -> Option<Question> {
    let tcp = matches!(p.probe, Probe::Tcp(_));
    let asked = r.outcome == Outcome::Timeout || (tcp && r.outcome == Outcome::Refused);
    if !asked || p.receipt_port.is_none() {
        return None;
    }
    let source = r.source?;
    match *p.probe {
        Probe::Tcp(TcpProbe { port, .. }) => Some(Question::Tcp(Flow {
            from: source.ip(),
            source_port: source.port(),
            port: port.get(),
        })),
        Probe::Udp(_) => r.nonce.map(Question::Udp),
        _ => None,
    }
}

/// A receiver's answer to a `seen` question, its TCP and UDP sightings indexed once by the
/// question they answer: each failed probe looks up its own instead of reading every sighting
/// (a receiver answers for all its failed probes at once, so a scan per probe grows with the
/// square of the failures, and a large matrix fails most when its network is broken).
struct Seen<'a> {
    /// The TCP ports its sniffer watches; `None` from an older agent that does not say.
    watched: Option<&'a [u16]>,
    by_question: HashMap<Question, Vec<&'a Sighting>>,
}

impl<'a> Seen<'a> {
    fn new(answer: &'a ProbeResult) -> Self {
        let mut by_question: HashMap<Question, Vec<&Sighting>> = HashMap::new();
        for s in answer.seen.iter().flatten() {
            let q = match s.kind {
                SightingKind::Tcp => s.flow.map(Question::Tcp),
                SightingKind::Udp => Some(Question::Udp(s.nonce)),
                // Crafted tunnel probes are the crafted pass's to read.
                SightingKind::Vxlan => None,
            };
            if let Some(q) = q {
                by_question.entry(q).or_default().push(s);
            }
        }
        Self {
            watched: answer.watched_tcp_ports.as_deref(),
            by_question,
        }
    }
}

/// Decides the receipt from the receiver's answer to a `seen` question.
fn receipt(q: Question, answer: &Seen<'_>) -> Option<(Receipt, Vec<Sighting>)> {
    // An agent that does not report what it watches is an older one that records no TCP or UDP
    // probes at all: its silence says nothing.
    let watched = answer.watched?;
    let matching: &[&Sighting] = answer.by_question.get(&q).map_or(&[], Vec::as_slice);
    if let Question::Tcp(f) = q
        && !watched.contains(&f.port)
    {
        return None;
    }
    let arrived = matching.iter().any(|s| !s.reply);
    let answered = matching.iter().any(|s| s.reply);
    let receipt = match (arrived, answered) {
        (_, true) => Receipt::Answered,
        (true, false) => Receipt::HostDropped,
        (false, false) => Receipt::NotArrived,
    };
    Some((
        receipt,
        matching.iter().take(KEPT).map(|s| (*s).clone()).collect(),
    ))
}

/// The words a receipt adds to a result's detail.
fn words(receipt: Receipt, outcome: Outcome, node: &str, interfaces: &str) -> String {
    if outcome == Outcome::Refused {
        return match receipt {
            Receipt::NotArrived => format!(
                "the SYN never reached {node}: the reset was forged on the way (the network, or the sender's own firewall)"
            ),
            _ => format!("reached {node}'s {interfaces}: the reset came from {node} itself"),
        };
    }
    match receipt {
        Receipt::NotArrived => format!(
            "never reached {node}: dropped on the way (the network, or the sender's own firewall)"
        ),
        Receipt::HostDropped => format!(
            "reached {node}'s {interfaces} but {node} never answered: dropped by {node} itself (its firewall)"
        ),
        Receipt::Answered => format!(
            "reached {node}, which answered; the answer never came back (the network, or the sender's own firewall)"
        ),
        Receipt::Delivered => format!("{node} received it"),
    }
}

/// Asks the receivers about every failed TCP and UDP probe in `results` and records what they
/// saw. A receiver that cannot be asked leaves its probes without a receipt, nothing more: the
/// probe's own result stands. Returns whether the run was interrupted meanwhile.
pub(super) async fn collect<R: Runtime + 'static>(
    pass: &Pass<'_, R>,
    results: &mut Slots,
    progress: &dyn Progress,
    cancel: &mut (impl Future<Output = ()> + Unpin),
) -> bool {
    let mut asked: Vec<(usize, Question)> = Vec::new();
    let mut asks: BTreeMap<AgentRef, Ask> = BTreeMap::new();
    let mut failed: Vec<usize> = results.failed().map(|(i, _)| i).collect();
    // In plan order, so the questions do not depend on the map's order.
    failed.sort_unstable();
    for i in failed {
        let p = pass.planned.at(i);
        // The question first: a healthy run asks nothing and copies no names.
        let (Some(r), Some(port)) = (results.result(i), p.receipt_port) else {
            continue;
        };
        let (Some(q), Some(node)) = (question(&p, r), p.to.node.as_deref()) else {
            continue;
        };
        let ask = asks
            .entry(receiver(node))
            .or_insert_with(|| Ask::new(port, Some(Vec::new())));
        match q {
            Question::Tcp(f) => ask.flow(f),
            Question::Udp(n) => ask.nonce(n),
        }
        asked.push((i, q));
    }
    if asks.is_empty() {
        return false;
    }
    let (answers, _failed, interrupted) = pass.ask(asks, progress, cancel).await;
    let answers: BTreeMap<&AgentRef, Seen<'_>> = answers
        .iter()
        .filter(|(_, a)| a.outcome == Outcome::Ok)
        .map(|(agent, a)| (agent, Seen::new(a)))
        .collect();
    for (i, q) in asked {
        let p = pass.planned.at(i);
        let node = p.to.node.as_deref().unwrap_or_default();
        let Some(answer) = answers.get(&receiver(node)) else {
            continue;
        };
        let (Some(r), Some((rc, seen))) = (results.result_mut(i), receipt(q, answer)) else {
            continue;
        };
        let mut ifs: Vec<&str> = seen
            .iter()
            .filter(|s| !s.reply)
            .map(|s| s.interface.as_str())
            .collect();
        ifs.sort_unstable();
        ifs.dedup();
        r.detail = format!(
            "{}; {}",
            r.detail,
            words(rc, r.outcome, node, &ifs.join(","))
        );
        r.receipt = Some(rc);
        r.seen = Some(seen);
    }
    interrupted
}

/// The host agent whose sniffer witnesses what was sent to `node`.
pub(super) fn receiver(node: &str) -> AgentRef {
    AgentRef {
        node: node.to_string(),
        agent: AgentKind::Host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow() -> Flow {
        Flow {
            from: "192.168.56.10".parse().unwrap(),
            source_port: 40000,
            port: 10250,
        }
    }

    fn answer(watched: Option<Vec<u16>>, seen: &[(SightingKind, u32, bool)]) -> ProbeResult {
        let mut a = ProbeResult::new("receipts:n2/host", Outcome::Ok, "");
        a.watched_tcp_ports = watched;
        a.seen = Some(
            seen.iter()
                .map(|&(kind, nonce, reply)| Sighting {
                    nonce,
                    interface: "eth0".into(),
                    from: "192.168.56.10".parse().unwrap(),
                    decapsulated: false,
                    at_ms: 1,
                    kind,
                    flow: (kind == SightingKind::Tcp).then(flow),
                    reply,
                })
                .collect(),
        );
        a
    }

    #[test]
    fn the_receivers_sightings_decide_where_it_died() {
        let tcp = Question::Tcp(flow());
        let w = Some(vec![10250]);
        let got = |a: &ProbeResult, q| receipt(q, &Seen::new(a)).map(|(r, _)| r);
        assert_eq!(got(&answer(w.clone(), &[]), tcp), Some(Receipt::NotArrived));
        let syn = (SightingKind::Tcp, 0, false);
        let syn_ack = (SightingKind::Tcp, 0, true);
        assert_eq!(
            got(&answer(w.clone(), &[syn, syn]), tcp),
            Some(Receipt::HostDropped)
        );
        assert_eq!(
            got(&answer(w.clone(), &[syn, syn_ack]), tcp),
            Some(Receipt::Answered)
        );
        // Another sender's SYN to the same port, answered, is not this probe's.
        let mut other = answer(w.clone(), &[syn_ack]);
        if let Some(s) = other.seen.as_mut() {
            s[0].flow = Some(Flow {
                source_port: 40001,
                ..flow()
            });
        }
        assert_eq!(got(&other, tcp), Some(Receipt::NotArrived));
        // A port the sniffer does not watch, or an agent that does not say: no receipt.
        assert_eq!(got(&answer(Some(vec![6443]), &[]), tcp), None);
        assert_eq!(got(&answer(None, &[]), tcp), None);
        // UDP by nonce; a VXLAN sighting of the same nonce is not this probe.
        let udp = Question::Udp(7);
        assert_eq!(
            got(&answer(w.clone(), &[(SightingKind::Vxlan, 7, false)]), udp),
            Some(Receipt::NotArrived)
        );
        assert_eq!(
            got(&answer(w.clone(), &[(SightingKind::Udp, 7, false)]), udp),
            Some(Receipt::HostDropped)
        );
        assert_eq!(
            got(&answer(Some(vec![]), &[(SightingKind::Udp, 8, false)]), udp),
            Some(Receipt::NotArrived)
        );
    }

    #[test]
    fn timeouts_and_tcp_resets_to_a_node_are_asked_about() {
        let inv = crate::testutil::inventory(3, 1, "flannel");
        let planned = crate::plan::plan(&inv, &crate::plan::Filter::default());
        let result = |outcome| {
            let mut r = ProbeResult::new("x", outcome, "");
            r.source = Some("192.168.56.10:40000".parse().unwrap());
            r.nonce = Some(7);
            r
        };
        let tcp = planned
            .iter()
            .find(|p| p.receipt_port.is_some() && matches!(p.probe, Probe::Tcp(_)))
            .unwrap();
        assert!(matches!(
            question(&tcp, &result(Outcome::Timeout)),
            Some(Question::Tcp(_))
        ));
        // A reset names the receiver whoever forged it: its sniffer says whether the SYN arrived.
        assert!(matches!(
            question(&tcp, &result(Outcome::Refused)),
            Some(Question::Tcp(_))
        ));
        assert_eq!(question(&tcp, &result(Outcome::Unreachable)), None);
        let datagram = Probe::Udp(probe_proto::UdpProbe {
            address: "192.168.56.11".parse().unwrap(),
            port: probe_proto::Port::new(8472).unwrap(),
        });
        let udp = PlannedRef {
            probe: &datagram,
            ..tcp
        };
        assert_eq!(
            question(&udp, &result(Outcome::Timeout)),
            Some(Question::Udp(7))
        );
        // A UDP port unreachable is the receiver's own answer: nothing to ask.
        assert_eq!(question(&udp, &result(Outcome::Refused)), None);
        assert!(
            words(Receipt::HostDropped, Outcome::Refused, "n2", "eth0")
                .contains("the reset came from n2 itself")
        );
        assert!(
            words(Receipt::NotArrived, Outcome::Refused, "n2", "")
                .contains("the reset was forged on the way")
        );
    }
}
