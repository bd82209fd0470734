//! One pass over some of the planned probes: their plans fanned out to their agents (bounded,
//! each plan made on its agent's turn), the answers put in their probes' slots, then what the
//! receivers' sniffers saw of the crafted datagrams. The first pass runs everything; retries run
//! what failed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use probe_proto::{
    GeneveProbe, IpipProbe, Outcome, Plan, Port, Probe, ProbeResult, ProbeSpec, Receipt, SeenProbe,
    TcpProbe, VxlanProbe, WireguardProbe,
};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;

use super::{Phase, Progress, RESPONDER_CHECK, RunConfig, nonce_for, plan_for};
use crate::model::{AgentRef, Results};
use crate::plan::{Planned, PlannedRef};
use crate::runtime::Runtime;

/// Runs plans on many agents at once; hands every result to `sink` with the agent that sent it,
/// as it comes, and returns the agents that failed. Each plan is made only when its agent's turn
/// comes (`concurrency` at a time), so the plans of a large cluster are never all in memory at
/// once. `sink` hands back the id of a result that agent was not asked for: an agent that answers
/// for another agent's probes, or answers more often than it was asked, broke the protocol, and
/// that is its failure, not a result.
pub(super) async fn fan_out<R: Runtime + 'static>(
    runtime: &Arc<R>,
    plans: impl Iterator<Item = (AgentRef, Plan)>,
    concurrency: usize,
    cancel: &mut (impl Future<Output = ()> + Unpin),
    mut sink: impl FnMut(&AgentRef, ProbeResult) -> Result<(), String>,
) -> (BTreeMap<AgentRef, String>, bool) {
    let (tx, mut rx) = mpsc::channel::<(usize, ProbeResult)>(4096);
    let sem = Arc::new(Semaphore::new(concurrency.max(1)));
    let mut plans = plans.peekable();
    let mut tasks = JoinSet::new();
    let mut failed = BTreeMap::new();
    // The agents started, by the number their results carry, and what each sent that was not
    // its own to send.
    let mut agents: Vec<(AgentRef, Violations)> = Vec::new();
    let mut interrupted = false;
    let mut take = |agents: &mut Vec<(AgentRef, Violations)>, (k, r): (usize, ProbeResult)| {
        let (agent, wrong) = &mut agents[k];
        match sink(agent, r) {
            Ok(()) => wrong.answered += 1,
            Err(id) => wrong.foreign(&id),
        }
    };
    loop {
        let more = plans.peek().is_some();
        if !more && tasks.is_empty() {
            break;
        }
        tokio::select! {
            // Results first: an agent is never held up by a full channel while plans are made.
            biased;
            Some(r) = rx.recv() => take(&mut agents, r),
            permit = sem.clone().acquire_owned(), if more => {
                let Ok(permit) = permit else { continue };
                let Some((agent, plan)) = plans.next() else { continue };
                let k = agents.len();
                agents.push((agent.clone(), Violations::new(plan.probes.len())));
                let (runtime, tx) = (runtime.clone(), tx.clone());
                tasks.spawn(async move {
                    let r = run_one(&*runtime, &agent, plan, k, tx).await;
                    drop(permit);
                    (agent, r)
                });
            }
            Some(joined) = tasks.join_next(), if !tasks.is_empty() => {
                if let Ok((agent, Err(e))) = joined {
                    failed.insert(agent, e);
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
        take(&mut agents, r);
    }
    for (agent, wrong) in agents {
        if let Some(why) = wrong.sentence() {
            let entry = failed.entry(agent).or_default();
            if !entry.is_empty() {
                entry.push_str("; ");
            }
            entry.push_str(&why);
        }
    }
    (failed, interrupted)
}

/// Runs one agent's plan, passing on its results tagged with `k`, the agent's number.
async fn run_one<R: Runtime>(
    runtime: &R,
    agent: &AgentRef,
    plan: Plan,
    k: usize,
    tx: mpsc::Sender<(usize, ProbeResult)>,
) -> Result<(), String> {
    let (own_tx, mut own_rx) = mpsc::channel::<ProbeResult>(256);
    let forward = async {
        while let Some(r) = own_rx.recv().await {
            if tx.send((k, r)).await.is_err() {
                break;
            }
        }
    };
    let (ran, ()) = tokio::join!(runtime.run(agent, plan, own_tx), forward);
    ran.map_err(|e| e.to_string())
}

/// What an agent sent that it was not asked for: results for probes that are not its own
/// (counted, the first id kept, escaped and shortened: it is the agent's text), and more results
/// than its plan had probes.
struct Violations {
    asked: usize,
    answered: usize,
    foreign: usize,
    first: Option<String>,
}

impl Violations {
    fn new(asked: usize) -> Self {
        Self {
            asked,
            answered: 0,
            foreign: 0,
            first: None,
        }
    }

    fn foreign(&mut self, id: &str) {
        self.foreign += 1;
        if self.first.is_none() {
            let shown: String = id.chars().take(120).collect();
            self.first = Some(format!("{shown:?}"));
        }
    }

    fn sentence(&self) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(first) = &self.first {
            parts.push(format!(
                "{} result(s) for probes it was not asked to run (the first: {first}), ignored",
                self.foreign
            ));
        }
        if self.answered > self.asked {
            parts.push(format!(
                "{} result(s) for the {} probe(s) it was sent",
                self.answered, self.asked
            ));
        }
        (!parts.is_empty()).then(|| format!("protocol violation: {}", parts.join("; ")))
    }
}

/// [`fan_out`] for the one answer each agent owes (`seen`): the answer whose id is `expected`
/// of its agent, by agent.
pub(super) async fn fan_out_to_each<R: Runtime + 'static>(
    runtime: &Arc<R>,
    plans: impl Iterator<Item = (AgentRef, Plan)>,
    concurrency: usize,
    progress: &dyn Progress,
    cancel: &mut (impl Future<Output = ()> + Unpin),
    expected: impl Fn(&AgentRef) -> String,
) -> (
    BTreeMap<AgentRef, ProbeResult>,
    BTreeMap<AgentRef, String>,
    bool,
) {
    let mut answers = BTreeMap::new();
    let (failed, interrupted) = fan_out(runtime, plans, concurrency, cancel, |agent, r| {
        progress.done(1);
        if r.id != expected(agent) {
            return Err(r.id);
        }
        answers.insert(agent.clone(), r);
        Ok(())
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
                        if let Probe::Vxlan(VxlanProbe { nonce, .. })
                        | Probe::Ipip(IpipProbe { nonce, .. })
                        | Probe::Geneve(GeneveProbe { nonce, .. })
                        | Probe::Wireguard(WireguardProbe { nonce, .. }) = &mut probe
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
                        probe: Probe::Tcp(TcpProbe {
                            address: addr.ip(),
                            port,
                            echo: true,
                        }),
                    });
                }
                (agent.clone(), plan_for(specs, cfg))
            });
        let mut others = HashMap::new();
        // A retry asks for a few probes: an answer for any other one was not asked for.
        let asked: Option<HashSet<usize>> =
            (subset.len() < self.planned.len()).then(|| subset.iter().copied().collect());
        let (mut failed, mut interrupted) = fan_out(
            self.runtime,
            plans,
            self.cfg.concurrency,
            cancel,
            |agent, r| match self.find(&r.id) {
                Some(i)
                    if self.planned.at(i).from == agent
                        && asked.as_ref().is_none_or(|a| a.contains(&i)) =>
                {
                    progress.done(1);
                    store.put(i, r);
                    Ok(())
                }
                None if attempt == 0 && r.id == format!("{RESPONDER_CHECK}{agent}") => {
                    others.insert(r.id.clone(), r);
                    Ok(())
                }
                _ => Err(r.id),
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
        progress.phase(Phase::AskingReceivers, asks.len() as u64);
        let plans = asks.into_iter().map(|(agent, ask)| {
            let spec = ProbeSpec {
                id: format!("seen:{agent}"),
                timeout_ms: None,
                probe: Probe::Seen(SeenProbe {
                    since_ms: self.since,
                    nonces: Some(ask.nonces),
                    flows: ask.flows,
                    port: ask.port,
                }),
            };
            (agent, plan_for(vec![spec], self.cfg))
        });
        // Give the receivers' sniffers a moment: a datagram or the last SYN retransmission sent
        // just now may still be in flight.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (answers, failed, interrupted) = fan_out_to_each(
            self.runtime,
            plans,
            self.cfg.concurrency,
            progress,
            cancel,
            |a| format!("seen:{a}"),
        )
        .await;
        (answers, failed, interrupted)
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
        Probe::Vxlan(_) | Probe::Ipip(_) | Probe::Geneve(_) | Probe::Wireguard(_)
    )
}

/// The receiver's device a crafted probe must reach to count as decapsulated, for messages.
pub(super) fn device_of(p: &Probe) -> &'static str {
    match p {
        Probe::Ipip(_) => "tunnel device (IP-in-IP)",
        Probe::Geneve(_) => "tunnel device (Geneve)",
        // Without the keys nothing is decapsulated: arrival on the NIC is the receipt.
        Probe::Wireguard(_) => "",
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
    use crate::model::{AgentKind, PathClass, Protocol, Target};
    use crate::plan::{Filter, PlannedProbe, plan};
    use crate::runtime::RuntimeError;
    use crate::testutil::inventory;

    fn host(node: &str) -> AgentRef {
        AgentRef {
            node: node.into(),
            agent: AgentKind::Host,
        }
    }

    fn tcp_from(node: &str, id: &str) -> PlannedProbe {
        PlannedProbe {
            id: id.into(),
            path: PathClass::NodeToNode,
            from: host(node),
            to: Target {
                node: Some("n9".into()),
                agent: Some(AgentKind::Host),
                service: None,
                address: "10.0.0.9".parse().unwrap(),
                port: Some(10250),
                protocol: Protocol::Tcp,
            },
            probe: Probe::Tcp(TcpProbe {
                address: "10.0.0.9".parse().unwrap(),
                port: probe_proto::Port::new(10250).unwrap(),
                echo: false,
            }),
            receipt_port: None,
        }
    }

    /// n2 honestly times out; n1 answers its own probe, then, once n2 is done, claims n2's
    /// probes went through, invents one, and answers its own twice.
    #[derive(Default)]
    struct Forger {
        n2_done: tokio::sync::Notify,
    }

    impl Runtime for Forger {
        async fn run(
            &self,
            agent: &AgentRef,
            plan: Plan,
            results: mpsc::Sender<ProbeResult>,
        ) -> Result<(), RuntimeError> {
            let send = |id: &str, outcome| results.send(ProbeResult::new(id, outcome, "fake"));
            if agent.node == "n2" {
                for spec in &plan.probes {
                    let _ = send(&spec.id, Outcome::Timeout).await;
                }
                self.n2_done.notify_one();
                return Ok(());
            }
            let _ = send("n1-a", Outcome::Ok).await;
            self.n2_done.notified().await;
            for id in ["n2-a", "n2-b", "nobody", "n1-a"] {
                let _ = send(id, Outcome::Ok).await;
            }
            Ok(())
        }
    }

    /// Kubernetes allows node names of 253 characters: every probe id the planner makes for
    /// them is one the agents accept (a 110-character name once left 30 of 92 probes unknown).
    #[test]
    fn the_longest_node_names_make_ids_the_agents_accept() {
        let mut inv = inventory(3, 1, "flannel");
        // Labels of 63, 63, 63 and 61 characters: 253 in all.
        let label = "a".repeat(63);
        for (i, n) in inv.nodes.iter_mut().enumerate() {
            n.name = format!("{i}{}.{label}.{label}.{}", &label[1..], "a".repeat(61));
            assert_eq!(n.name.len(), probe_proto::MAX_NODE_NAME_BYTES);
        }
        if let Some(dns) = inv.cluster.dns.as_mut() {
            dns.names = vec![format!("{}.cluster.local", "b".repeat(63))];
        }
        inv.validate().unwrap();
        let planned = plan(&inv, &Filter::default());
        let specs: Vec<ProbeSpec> = planned
            .iter()
            .map(|p| ProbeSpec {
                id: p.id.to_string(),
                timeout_ms: None,
                probe: p.probe.clone(),
            })
            .collect();
        let n = specs.len();
        let text = serde_json::to_string(&super::super::plan_for(
            specs,
            &super::super::RunConfig::default(),
        ))
        .unwrap();
        let parsed = probe_proto::parse_plan(&text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(parsed.probes.len(), n);
    }

    #[tokio::test]
    async fn an_agent_cannot_answer_for_another_agent() {
        let planned = Planned::from(vec![
            tcp_from("n1", "n1-a"),
            tcp_from("n2", "n2-a"),
            tcp_from("n2", "n2-b"),
        ]);
        let cfg = super::super::RunConfig {
            retries: 0,
            ..super::super::RunConfig::default()
        };
        let out = super::super::run(
            &planned,
            Arc::new(Forger::default()),
            &cfg,
            &(),
            std::future::pending(),
        )
        .await;
        let by: HashMap<String, Outcome> = out
            .results
            .to_vec()
            .into_iter()
            .map(|r| (r.result.id.clone(), r.result.outcome))
            .collect();
        assert_eq!(by["n2-a"], Outcome::Timeout, "n1 rewrote n2's result");
        assert_eq!(by["n2-b"], Outcome::Timeout, "n1 rewrote n2's result");
        assert_eq!(by["n1-a"], Outcome::Ok);
        let status = |node: &str| {
            out.agents
                .iter()
                .find(|a| a.node == node)
                .unwrap_or_else(|| panic!("{node}: no status"))
        };
        let n1 = status("n1");
        assert!(!n1.ran, "{n1:?}");
        assert!(
            n1.detail.contains("protocol violation")
                && n1.detail.contains("\"n2-a\"")
                && n1.detail.contains("2 result(s) for the 1 probe(s)"),
            "{}",
            n1.detail
        );
        assert!(status("n2").ran, "{:?}", status("n2"));
    }

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
