//! One pass over some of the planned probes: their plans fanned out to their agents (bounded,
//! each plan made on its agent's turn), the answers put in their probes' slots, then what the
//! receivers' sniffers saw of the crafted datagrams. The first pass runs everything; retries run
//! what failed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use probe_proto::{
    GeneveProbe, IpipProbe, Outcome, Plan, Port, Probe, ProbeResult, ProbeSpec, SeenProbe,
    TcpProbe, VxlanProbe, WireguardProbe,
};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;

use super::{Phase, Progress, RESPONDER_CHECK, RunConfig, nonce_for, plan_for};
use crate::model::AgentRef;
use crate::plan::{Planned, PlannedRef};
use crate::runtime::Runtime;

mod crafted;
mod store;

pub(super) use crafted::{Answer, confirm_vxlan, crafted, device_of};
pub(crate) use store::{Slots, Store};

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
        let answers: BTreeMap<&AgentRef, Answer<'_>> =
            seen.iter().map(|(a, r)| (a, Answer::new(r))).collect();
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
                    answers.get(&rcv),
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

#[cfg(test)]
mod tests;
