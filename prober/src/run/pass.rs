//! One pass over some of the planned probes: their plans fanned out to their agents (bounded,
//! each plan made on its agent's turn), the answers put in their probes' slots, then what the
//! receivers' sniffers saw of the crafted datagrams. The first pass runs everything; retries run
//! what failed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use probe_proto::{Outcome, Plan, Port, Probe, ProbeResult, ProbeSpec, Receipt};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;

use super::{Phase, Progress, RESPONDER_CHECK, RunConfig, nonce_for, plan_for};
use crate::model::{AgentRef, Results};
use crate::plan::{Planned, PlannedRef};
use crate::runtime::Runtime;

/// Runs plans on many agents at once; hands every result to `sink` as it comes and returns the
/// agents that failed. Each plan is made only when its agent's turn comes (`concurrency` at a
/// time), so the plans of a large cluster are never all in memory at once.
pub(super) async fn fan_out<R: Runtime + 'static>(
    runtime: &Arc<R>,
    plans: impl Iterator<Item = (AgentRef, Plan)>,
    concurrency: usize,
    cancel: &mut (impl Future<Output = ()> + Unpin),
    mut sink: impl FnMut(ProbeResult),
) -> (BTreeMap<AgentRef, String>, bool) {
    let (tx, mut rx) = mpsc::channel::<ProbeResult>(4096);
    let sem = Arc::new(Semaphore::new(concurrency.max(1)));
    let mut plans = plans.peekable();
    let mut tasks = JoinSet::new();
    let mut failed = BTreeMap::new();
    let mut interrupted = false;
    loop {
        let more = plans.peek().is_some();
        if !more && tasks.is_empty() {
            break;
        }
        tokio::select! {
            // Results first: an agent is never held up by a full channel while plans are made.
            biased;
            Some(r) = rx.recv() => sink(r),
            permit = sem.clone().acquire_owned(), if more => {
                let Ok(permit) = permit else { continue };
                let Some((agent, plan)) = plans.next() else { continue };
                let (runtime, tx) = (runtime.clone(), tx.clone());
                tasks.spawn(async move {
                    let r = runtime.run(&agent, plan, tx).await;
                    drop(permit);
                    (agent, r)
                });
            }
            Some(joined) = tasks.join_next(), if !tasks.is_empty() => {
                if let Ok((agent, Err(e))) = joined {
                    failed.insert(agent, e.to_string());
                }
            }
            () = &mut *cancel, if !interrupted => {
                interrupted = true;
                // Dropping the tasks kills the agents' processes (kill_on_drop); keep what came.
                tasks.abort_all();
                break;
            }
        }
    }
    // Every sender is gone (the tasks ended or were aborted): what is left in the channel is all.
    drop(tx);
    drop(tasks);
    while let Ok(r) = rx.try_recv() {
        sink(r);
    }
    (failed, interrupted)
}

/// [`fan_out`] for the few answers of one question per agent (`seen`, receipts): by id.
pub(super) async fn fan_out_by_id<R: Runtime + 'static>(
    runtime: &Arc<R>,
    plans: impl Iterator<Item = (AgentRef, Plan)>,
    concurrency: usize,
    progress: &dyn Progress,
    cancel: &mut (impl Future<Output = ()> + Unpin),
) -> PassOutput {
    let mut answers = HashMap::new();
    let (failed, interrupted) = fan_out(runtime, plans, concurrency, cancel, |r| {
        progress.done(1);
        answers.insert(r.id.clone(), r);
    })
    .await;
    (answers, failed, interrupted)
}

/// Where a pass puts the results of planned probes, by their index in the plan: a slot per probe
/// for the whole matrix ([`Slots`]), a map for the few a retry runs.
pub(crate) trait Store {
    fn put(&mut self, i: usize, r: ProbeResult);
    /// The outcome of probe `i`, if it has a result.
    fn outcome(&self, i: usize) -> Option<Outcome>;
    /// Takes probe `i`'s result out, whole, to be changed and put back.
    fn take(&mut self, i: usize) -> Option<ProbeResult>;
    /// A result still open: for [`Slots`], a failure, or a failure a retry then got through (the
    /// only ones retries and receipts look at).
    fn result(&self, i: usize) -> Option<&ProbeResult>;
    fn result_mut(&mut self, i: usize) -> Option<&mut ProbeResult>;
    /// Probe `i` has not settled (an interrupted run stopped before it was confirmed): whatever
    /// it has so far is not its result.
    fn unsettle(&mut self, i: usize);
}

impl Store for HashMap<usize, ProbeResult> {
    fn put(&mut self, i: usize, r: ProbeResult) {
        self.insert(i, r);
    }
    fn outcome(&self, i: usize) -> Option<Outcome> {
        self.get(&i).map(|r| r.outcome)
    }
    fn take(&mut self, i: usize) -> Option<ProbeResult> {
        self.remove(&i)
    }
    fn result(&self, i: usize) -> Option<&ProbeResult> {
        self.get(&i)
    }
    fn result_mut(&mut self, i: usize) -> Option<&mut ProbeResult> {
        self.get_mut(&i)
    }
    fn unsettle(&mut self, i: usize) {
        self.remove(&i);
    }
}

/// The first pass's results. An answer that got through is compacted into its row at once (a
/// crafted datagram's "sent" too: its receipt takes it out again, whole, and puts back what the
/// receiver saw); failures, which retries and receipts may change, stay whole until the run ends.
pub(crate) struct Slots {
    done: Results,
    open: HashMap<usize, ProbeResult>,
    /// Probes an interrupted run left unsettled: unknown, whatever they had so far. Empty but
    /// for an interrupted run.
    unsettled: HashSet<usize>,
}

impl Slots {
    pub(super) fn new(planned: &Planned) -> Self {
        Self {
            done: Results::placeholders(planned.len()),
            open: HashMap::new(),
            unsettled: HashSet::new(),
        }
    }

    /// The failed results, by index.
    pub(super) fn failed(&self) -> impl Iterator<Item = (usize, &ProbeResult)> {
        self.open
            .iter()
            .filter(|(_, r)| !r.outcome.is_ok())
            .map(|(&i, r)| (i, r))
    }

    pub(super) fn into_parts(self) -> (Results, HashMap<usize, ProbeResult>, HashSet<usize>) {
        (self.done, self.open, self.unsettled)
    }
}

impl Store for Slots {
    fn put(&mut self, i: usize, r: ProbeResult) {
        // Once open (a failure that a retry then got through), it stays open for its tally.
        if r.outcome.is_ok() && !self.open.contains_key(&i) {
            self.done.set(i, None, r);
        } else {
            self.open.insert(i, r);
        }
    }
    fn outcome(&self, i: usize) -> Option<Outcome> {
        match self.open.get(&i) {
            Some(r) => Some(r.outcome),
            None => self.done.outcome(i),
        }
    }
    fn take(&mut self, i: usize) -> Option<ProbeResult> {
        self.open.remove(&i).or_else(|| self.done.result_of(i))
    }
    fn result(&self, i: usize) -> Option<&ProbeResult> {
        self.open.get(&i)
    }
    fn result_mut(&mut self, i: usize) -> Option<&mut ProbeResult> {
        self.open.get_mut(&i)
    }
    fn unsettle(&mut self, i: usize) {
        self.open.remove(&i);
        self.unsettled.insert(i);
    }
}

/// One pass over some of the planned probes: their plans fanned out to their agents, then the
/// VXLAN receipts collected. The first pass runs everything; retries run what failed.
pub(crate) struct Pass<'a, R> {
    pub(super) runtime: &'a Arc<R>,
    pub(super) cfg: &'a RunConfig,
    pub(super) salt: u32,
    pub(super) since: u64,
    /// The whole plan; passes name its probes by index.
    pub(super) planned: &'a Planned,
    /// The plan's indices in lookup order ([`Planned::lookup_order`]).
    pub(super) order: &'a [u32],
    /// Each sending agent's place in name order ([`Planned::agent_ranks`]), for every pass.
    pub(super) ranks: &'a [u32],
}

/// What a pass produced besides its probes' results: the other answers by id (the responder
/// checks), the agents that failed, and whether it was interrupted.
pub(crate) type PassOutput = (
    HashMap<String, ProbeResult>,
    BTreeMap<AgentRef, String>,
    bool,
);

/// What one receiver's sniffer is asked: the nonces of datagrams and the flows of SYNs sent to it.
pub(crate) struct Ask {
    port: Port,
    nonces: Vec<u32>,
    flows: Option<Vec<probe_proto::Flow>>,
}

impl Ask {
    /// A question through the receiver's agent on `port`; `flows` is `None` when SYNs are not
    /// asked about at all.
    pub(crate) fn new(port: Port, flows: Option<Vec<probe_proto::Flow>>) -> Self {
        Self {
            port,
            nonces: Vec::new(),
            flows,
        }
    }

    pub(crate) fn nonce(&mut self, n: u32) {
        self.nonces.push(n);
    }

    pub(crate) fn flow(&mut self, f: probe_proto::Flow) {
        self.flows.get_or_insert_with(Vec::new).push(f);
    }
}

impl<R: Runtime + 'static> Pass<'_, R> {
    /// The index of the planned probe with this id.
    fn find(&self, id: &str) -> Option<usize> {
        self.planned.find(self.order, id)
    }

    /// Runs the planned probes `subset` (indices) as attempt number `attempt` (0 for the first),
    /// putting their results in `store`: every crafted probe gets a nonce of its own per attempt,
    /// so a receipt always belongs to exactly one send.
    pub(crate) async fn run<S: Store>(
        &self,
        subset: &[usize],
        attempt: u32,
        progress: &dyn Progress,
        cancel: &mut (impl Future<Output = ()> + Unpin),
        store: &mut S,
    ) -> PassOutput {
        let salt = self.salt ^ attempt.wrapping_mul(0x9e37_79b9);
        // The subset by agent, agents in name order: one list of 4-byte indices, not a list per
        // agent.
        let rank = self.ranks;
        let agent_of = |i: u32| self.planned.key(i as usize).sender() as usize;
        let mut by_agent: Vec<u32> = subset
            .iter()
            .filter_map(|&i| u32::try_from(i).ok())
            .collect();
        by_agent.sort_unstable_by_key(|&i| (rank[agent_of(i)], i));
        let cfg = self.cfg;
        // Each agent's plan is made when its turn comes (fan_out), from borrowed probes.
        let plans = by_agent
            .chunk_by(|&a, &b| agent_of(a) == agent_of(b))
            .map(|probes| {
                let agent = self.planned.at(probes[0] as usize).from;
                let mut specs: Vec<ProbeSpec> = probes
                    .iter()
                    .map(|&i| {
                        let p = self.planned.at(i as usize);
                        let mut probe = p.probe.clone();
                        if let Probe::Vxlan { nonce, .. }
                        | Probe::Ipip { nonce, .. }
                        | Probe::Geneve { nonce, .. }
                        | Probe::Wireguard { nonce, .. } = &mut probe
                        {
                            *nonce = Some(nonce_for(salt, &p.id));
                        }
                        ProbeSpec {
                            id: p.id.to_string(),
                            timeout_ms: None,
                            probe,
                        }
                    })
                    .collect();
                // Only agents this run uses get a responder check: a filtered-out agent is not
                // started for one.
                let check = cfg.responders.get(agent).filter(|_| attempt == 0);
                if let Some((addr, port)) = check.and_then(|a| Some((a, Port::new(a.port())?))) {
                    specs.push(ProbeSpec {
                        id: format!("{RESPONDER_CHECK}{agent}"),
                        timeout_ms: None,
                        probe: Probe::Tcp {
                            address: addr.ip(),
                            port,
                            echo: true,
                        },
                    });
                }
                (agent.clone(), plan_for(specs, cfg))
            });
        let mut others = HashMap::new();
        let (mut failed, mut interrupted) = fan_out(
            self.runtime,
            plans,
            self.cfg.concurrency,
            cancel,
            |r| match self.find(&r.id) {
                Some(i) => {
                    progress.done(1);
                    store.put(i, r);
                }
                None => {
                    others.insert(r.id.clone(), r);
                }
            },
        )
        .await;
        let vxlan = subset.iter().any(|&i| crafted(self.planned.at(i).probe));
        if interrupted && vxlan {
            // Sent, but no receiver was asked whether it arrived: "sent" is not "ok".
            for &i in subset {
                if crafted(self.planned.at(i).probe) && store.outcome(i) == Some(Outcome::Ok) {
                    store.unsettle(i);
                }
            }
        } else if vxlan {
            interrupted |= self
                .confirm_receipts(subset, salt, store, &mut failed, progress, cancel)
                .await;
        }
        (others, failed, interrupted)
    }

    /// Asks each receiver's sniffer, through its own agent's port, what it saw of what was sent
    /// to it: one `seen` question per receiver. Returns the answers by receiver.
    pub(crate) async fn ask(
        &self,
        asks: BTreeMap<AgentRef, Ask>,
        progress: &dyn Progress,
        cancel: &mut (impl Future<Output = ()> + Unpin),
    ) -> (
        BTreeMap<AgentRef, ProbeResult>,
        BTreeMap<AgentRef, String>,
        bool,
    ) {
        let receivers: Vec<AgentRef> = asks.keys().cloned().collect();
        progress.phase(Phase::AskingReceivers, receivers.len() as u64);
        let plans = asks.into_iter().map(|(agent, ask)| {
            let spec = ProbeSpec {
                id: format!("seen:{agent}"),
                timeout_ms: None,
                probe: Probe::Seen {
                    since_ms: self.since,
                    nonces: Some(ask.nonces),
                    flows: ask.flows,
                    port: ask.port,
                },
            };
            (agent, plan_for(vec![spec], self.cfg))
        });
        // Give the receivers' sniffers a moment: a datagram or the last SYN retransmission sent
        // just now may still be in flight.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (mut answers, failed, interrupted) =
            fan_out_by_id(self.runtime, plans, self.cfg.concurrency, progress, cancel).await;
        let by_receiver = receivers
            .into_iter()
            .filter_map(|a| {
                let answer = answers.remove(&format!("seen:{a}"))?;
                Some((a, answer))
            })
            .collect();
        (by_receiver, failed, interrupted)
    }

    /// Phase 2 of a pass with crafted datagrams: asks each receiver's sniffer which of our nonces
    /// it saw, and where, and turns every "sent" result into what the receiver saw. Returns
    /// whether it was interrupted.
    async fn confirm_receipts<S: Store>(
        &self,
        subset: &[usize],
        salt: u32,
        store: &mut S,
        failed_agents: &mut BTreeMap<AgentRef, String>,
        progress: &dyn Progress,
        cancel: &mut (impl Future<Output = ()> + Unpin),
    ) -> bool {
        let receiver = |p: &PlannedRef<'_>| {
            super::receipts::receiver(p.to.node.as_deref().unwrap_or_default())
        };
        let sent: Vec<usize> = subset
            .iter()
            .copied()
            .filter(|&i| crafted(self.planned.at(i).probe) && store.outcome(i) == Some(Outcome::Ok))
            .collect();
        let mut asks: BTreeMap<AgentRef, Ask> = BTreeMap::new();
        for &i in &sent {
            let p = self.planned.at(i);
            let Some(port) = p.receipt_port else { continue };
            asks.entry(receiver(&p))
                .or_insert_with(|| Ask::new(port, None))
                .nonce(nonce_for(salt, &p.id));
        }
        let (seen, failed, interrupted) = self.ask(asks, progress, cancel).await;
        for i in sent {
            let p = self.planned.at(i);
            let rcv = receiver(&p);
            if interrupted && !seen.contains_key(&rcv) && !failed.contains_key(&rcv) {
                // The run stopped before this receiver answered: the datagram is unsettled.
                store.unsettle(i);
                continue;
            }
            if let Some(mut r) = store.take(i) {
                let nonce = nonce_for(salt, &p.id);
                r.nonce = Some(nonce);
                confirm_vxlan(
                    &mut r,
                    device_of(p.probe),
                    nonce,
                    &rcv.node,
                    seen.get(&rcv),
                    failed.get(&rcv),
                );
                store.put(i, r);
            }
        }
        // A receiver whose agent could not be asked is a missing agent, not a failed path.
        for (agent, why) in failed {
            failed_agents.entry(agent).or_insert(why);
        }
        interrupted
    }
}

/// A crafted datagram: its outcome is what the receiver's sniffer saw of its nonce.
pub(super) fn crafted(p: &Probe) -> bool {
    matches!(
        p,
        Probe::Vxlan { .. } | Probe::Ipip { .. } | Probe::Geneve { .. } | Probe::Wireguard { .. }
    )
}

/// The receiver's device a crafted probe must reach to count as decapsulated, for messages.
pub(super) fn device_of(p: &Probe) -> &'static str {
    match p {
        Probe::Ipip { .. } => "tunnel device (IP-in-IP)",
        Probe::Geneve { .. } => "tunnel device (Geneve)",
        // Without the keys nothing is decapsulated: arrival on the NIC is the receipt.
        Probe::Wireguard { .. } => "",
        _ => "VXLAN device",
    }
}

/// Turns a "sent" VXLAN, Geneve or IP-in-IP result into what the receiver saw: decapsulated on its VXLAN device
/// (`ok`), only on its NIC (dropped by the host), or nowhere (dropped on the way).
pub(super) fn confirm_vxlan(
    r: &mut ProbeResult,
    device: &str,
    nonce: u32,
    node: &str,
    answer: Option<&ProbeResult>,
    failed: Option<&String>,
) {
    let Some(answer) = answer.filter(|a| a.outcome == Outcome::Ok) else {
        let why = failed
            .cloned()
            .or_else(|| answer.map(|a| a.detail.clone()))
            .unwrap_or_else(|| "no answer".into());
        r.outcome = Outcome::Error;
        r.detail = format!("sent nonce {nonce}, but {node}'s sniffer could not be asked: {why}");
        return;
    };
    let sightings: Vec<_> = answer
        .seen
        .iter()
        .flatten()
        .filter(|s| s.nonce == nonce)
        .collect();
    let mut outer: Vec<&str> = sightings
        .iter()
        .filter(|s| !s.decapsulated)
        .map(|s| s.interface.as_str())
        .collect();
    let mut inner: Vec<&str> = sightings
        .iter()
        .filter(|s| s.decapsulated)
        .map(|s| s.interface.as_str())
        .collect();
    outer.sort_unstable();
    outer.dedup();
    inner.sort_unstable();
    inner.dedup();
    r.seen = Some(sightings.into_iter().cloned().collect());
    if device.is_empty() && !outer.is_empty() {
        // A WireGuard port: arrival on the NIC is all there is to confirm.
        r.receipt = Some(Receipt::Delivered);
        r.detail = format!(
            "arrived on {node}'s {} (WireGuard port: arrival on the NIC is all that can be confirmed without its keys)",
            outer.join(",")
        );
    } else if !inner.is_empty() {
        r.receipt = Some(Receipt::Delivered);
        r.detail = format!(
            "{node} received it on {} and decapsulated it on {}",
            outer.join(","),
            inner.join(",")
        );
    } else if !outer.is_empty() {
        r.outcome = Outcome::Timeout;
        r.receipt = Some(Receipt::HostDropped);
        r.detail = format!(
            "reached {node}'s {} but never its {device}: dropped by {node} itself (its firewall, or a VNI/port mismatch)",
            outer.join(",")
        );
    } else {
        r.outcome = Outcome::Timeout;
        r.receipt = Some(Receipt::NotArrived);
        r.detail = format!(
            "never reached {node}: dropped on the way (the network, or the sender's own firewall)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Filter, plan};
    use crate::testutil::inventory;

    #[test]
    fn slots_compact_what_got_through_and_keep_failures_whole() {
        let planned = plan(&inventory(3, 1, "flannel"), &Filter::default());
        let mut slots = Slots::new(&planned);
        let mut ok = ProbeResult::new("x", Outcome::Ok, "sent");
        ok.nonce = Some(9);
        ok.rtt_micros = Some(120);
        slots.put(0, ok);
        let mut lost = ProbeResult::new("y", Outcome::Timeout, "no answer");
        lost.source = Some("10.0.0.1:40000".parse().unwrap());
        slots.put(1, lost.clone());
        // Only the failure is open for retries and receipts, whole.
        assert_eq!(slots.failed().map(|(i, _)| i).collect::<Vec<_>>(), [1]);
        assert_eq!(slots.result(0), None);
        assert_eq!(slots.result(1), Some(&lost));
        assert_eq!(slots.outcome(0), Some(Outcome::Ok));
        assert_eq!(slots.outcome(2), None);
        // A crafted "sent" is taken out whole (but for what only places a failure) and what its
        // receipt says is put back: a failure goes open.
        let mut sent = slots.take(0).unwrap();
        assert_eq!((sent.detail.as_str(), sent.rtt_micros), ("sent", Some(120)));
        sent.outcome = Outcome::Timeout;
        slots.put(0, sent);
        assert_eq!(slots.outcome(0), Some(Outcome::Timeout));
        assert_eq!(slots.failed().count(), 2);
        // A retry that got through stays open, for its tally.
        slots.put(1, ProbeResult::new("y", Outcome::Ok, "answered"));
        assert_eq!(slots.result(1).map(|r| r.outcome), Some(Outcome::Ok));
        let (done, open, _) = slots.into_parts();
        assert_eq!(open.len(), 2);
        assert!(done.is_set(0) && !done.is_set(2));
    }
}
