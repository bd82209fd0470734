//! Fan-out: every agent runs its share of the matrix at once (bounded), each under a deadline;
//! then the VXLAN receipts are collected from the receivers' sniffers. Exactly one result per
//! planned probe, whatever happens: an agent that cannot run leaves its probes unknown, not failed.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::net::SocketAddr;
use std::num::{NonZeroU32, NonZeroU64};
use std::sync::Arc;
use std::time::{Duration, Instant};

use probe_proto::{Outcome, Plan, Port, Probe, ProbeResult, ProbeSpec, Receipt};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;

use crate::model::{AgentKind, AgentRef, AgentStatus, ResultRecord, Unknown};
use crate::plan::PlannedProbe;

pub mod preflight;
mod receipts;
mod retry;
use crate::runtime::Runtime;

/// How far a run has come, reported upwards: the run never draws anything itself.
pub trait Progress: Send + Sync {
    /// The number of probes the run will wait for.
    fn planned(&self, _probes: u64) {}
    /// Results that came in.
    fn done(&self, _probes: u64) {}
}

/// No progress display.
impl Progress for () {}

#[derive(Debug, Clone)]
pub struct RunConfig {
    pub probe_timeout: Duration,
    /// Agents running at once.
    pub concurrency: usize,
    /// Probes one agent runs at once.
    pub agent_concurrency: u32,
    /// How many more times a failed probe is run before it counts as failed (0: never).
    pub retries: u32,
    /// The most time the retries may add to the run, after the first pass.
    pub retry_budget: Duration,
    /// Each agent's own responder (`probe-pod serve`), probed by the agent itself in the first
    /// pass: an agent whose responder does not answer is missing, and the probes to it are
    /// unknown, not failed paths.
    pub responders: BTreeMap<AgentRef, SocketAddr>,
}

impl Default for RunConfig {
    fn default() -> Self {
        Self {
            probe_timeout: Duration::from_secs(2),
            concurrency: 64,
            agent_concurrency: 1024,
            retries: 2,
            retry_budget: Duration::from_secs(30),
            responders: BTreeMap::new(),
        }
    }
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunOutput {
    pub results: Vec<ResultRecord>,
    pub agents: Vec<AgentStatus>,
    pub interrupted: bool,
    pub elapsed: Duration,
}

/// The concurrency a plan's deadline assumes: the agent's wish, but no more than an agent gets
/// from the usual soft limit of 1,024 open files (64 kept back, two per probe), since the agent
/// may cap it there and the coordinator cannot tell.
const ASSUMED_AGENT_SLOTS: u64 = (1024 - 64) / 2;

/// The plan's wall-clock budget: as many probe timeouts as the agent needs waves to run every
/// probe at its concurrency, one more for the stragglers and the VXLAN linger, and a second of
/// start-up. So every probe gets its full timeout however large the plan.
fn plan_deadline_ms(probes: usize, timeout_ms: u64, agent_concurrency: u32) -> u64 {
    let slots = u64::from(agent_concurrency.max(1)).min(ASSUMED_AGENT_SLOTS);
    let waves = (probes as u64).div_ceil(slots).max(1);
    (waves + 1).saturating_mul(timeout_ms).saturating_add(1000)
}

fn plan_for(specs: Vec<ProbeSpec>, cfg: &RunConfig) -> Plan {
    let timeout = u64::try_from(cfg.probe_timeout.as_millis())
        .unwrap_or(u64::MAX)
        .max(1);
    let deadline = plan_deadline_ms(specs.len(), timeout, cfg.agent_concurrency);
    Plan {
        deadline_ms: NonZeroU64::new(deadline).expect("non-zero"),
        concurrency: NonZeroU32::new(cfg.agent_concurrency.max(1)).expect("non-zero"),
        probe_timeout_ms: NonZeroU64::new(timeout).expect("non-zero"),
        probes: specs,
    }
}

/// A nonce per VXLAN probe (FNV-1a of its id, salted per run), so the receiver's sniffer can be
/// asked for exactly it.
fn nonce_for(run_salt: u32, id: &str) -> u32 {
    id.bytes().fold(0x811c_9dc5_u32 ^ run_salt, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// Runs plans on many agents at once; hands every result to `sink` as it comes and returns the
/// agents that failed. Each plan is made only when its agent's turn comes (`concurrency` at a
/// time), so the plans of a large cluster are never all in memory at once.
async fn fan_out<R: Runtime + 'static>(
    runtime: &Arc<R>,
    plans: impl Iterator<Item = (AgentRef, Plan)>,
    concurrency: usize,
    progress: &dyn Progress,
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
            Some(r) = rx.recv() => {
                progress.done(1);
                sink(r);
            }
            permit = sem.clone().acquire_owned(), if more => {
                let Ok(permit) = permit else { continue };
                let Some((agent, plan)) = plans.next() else { continue };
                let (runtime, tx) = (runtime.clone(), tx.clone());
                tasks.spawn(async move {
                    let r = runtime.run(&agent, &plan, tx).await;
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
        progress.done(1);
        sink(r);
    }
    (failed, interrupted)
}

/// [`fan_out`] for the few answers of one question per agent (`seen`, receipts): by id.
async fn fan_out_by_id<R: Runtime + 'static>(
    runtime: &Arc<R>,
    plans: impl Iterator<Item = (AgentRef, Plan)>,
    concurrency: usize,
    cancel: &mut (impl Future<Output = ()> + Unpin),
) -> PassOutput {
    let mut answers = HashMap::new();
    let (failed, interrupted) = fan_out(runtime, plans, concurrency, &(), cancel, |r| {
        answers.insert(r.id.clone(), r);
    })
    .await;
    (answers, failed, interrupted)
}

/// Where a pass puts the results of planned probes, by their index in the plan: a slot per probe
/// for the whole matrix, a map for the few a retry runs.
pub(crate) trait Store {
    fn put(&mut self, i: usize, r: ProbeResult);
    fn result(&self, i: usize) -> Option<&ProbeResult>;
    fn result_mut(&mut self, i: usize) -> Option<&mut ProbeResult>;
}

impl Store for Vec<Option<ProbeResult>> {
    fn put(&mut self, i: usize, r: ProbeResult) {
        if let Some(slot) = self.as_mut_slice().get_mut(i) {
            *slot = Some(r);
        }
    }
    fn result(&self, i: usize) -> Option<&ProbeResult> {
        self.as_slice().get(i)?.as_ref()
    }
    fn result_mut(&mut self, i: usize) -> Option<&mut ProbeResult> {
        self.as_mut_slice().get_mut(i)?.as_mut()
    }
}

impl Store for HashMap<usize, ProbeResult> {
    fn put(&mut self, i: usize, r: ProbeResult) {
        self.insert(i, r);
    }
    fn result(&self, i: usize) -> Option<&ProbeResult> {
        self.get(&i)
    }
    fn result_mut(&mut self, i: usize) -> Option<&mut ProbeResult> {
        self.get_mut(&i)
    }
}

/// The plan's indices sorted by id, so an agent's answer finds its probe without a map keyed by
/// a copy of every id (4 bytes a probe instead of a hash table of strings).
fn sorted_by_id(planned: &[PlannedProbe]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..u32::try_from(planned.len()).unwrap_or(u32::MAX)).collect();
    order.sort_unstable_by(|&a, &b| planned[a as usize].id.cmp(&planned[b as usize].id));
    order
}

/// Runs the matrix. `cancel` resolving (Ctrl-C) stops it with what was gathered.
pub async fn run<R: Runtime + 'static>(
    planned: &[PlannedProbe],
    runtime: Arc<R>,
    cfg: &RunConfig,
    progress: &dyn Progress,
    cancel: impl Future<Output = ()> + Send,
) -> RunOutput {
    run_owned(planned.to_vec(), runtime, cfg, progress, cancel).await
}

/// [`run`], consuming the plan: each result's record takes its planned probe's names instead of
/// copying them, so a large matrix is not held twice.
pub async fn run_owned<R: Runtime + 'static>(
    mut planned: Vec<PlannedProbe>,
    runtime: Arc<R>,
    cfg: &RunConfig,
    progress: &dyn Progress,
    cancel: impl Future<Output = ()> + Send,
) -> RunOutput {
    let started = Instant::now();
    let since = probe_proto::util::unix_ms().saturating_sub(5000);
    let salt = u32::try_from(since & 0xffff_ffff).unwrap_or(0) ^ std::process::id().rotate_left(16);
    let mut cancel = Box::pin(cancel);
    // The planner grew it by doubling: up to half of it is room nobody will use.
    planned.shrink_to_fit();
    let agents_planned: Vec<AgentRef> = planned
        .iter()
        .map(|p| &p.from)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .cloned()
        .collect();
    let checks = cfg
        .responders
        .keys()
        .filter(|a| agents_planned.contains(a))
        .count();
    progress.planned((planned.len() + checks) as u64);
    let order = sorted_by_id(&planned);
    let first = Pass {
        runtime: &runtime,
        cfg,
        salt,
        since,
        planned: &planned,
        order: &order,
    };
    // One slot per planned probe: an answer goes straight to its probe's place.
    let mut results: Vec<Option<ProbeResult>> = Vec::new();
    results.resize_with(planned.len(), || None);
    let all: Vec<usize> = (0..planned.len()).collect();
    let (mut others, mut failed, mut interrupted) = first
        .run(&all, 0, progress, &mut cancel, &mut results)
        .await;
    drop(all);
    let dead = dead_responders(cfg, &mut others, &mut failed);
    drop(others);
    if !interrupted && cfg.retries > 0 {
        interrupted |= retry::confirm_failures(&first, &mut results, &mut cancel).await;
    }
    if !interrupted {
        interrupted |= receipts::collect(&first, &mut results, &mut cancel).await;
    }
    drop(order);
    let records = into_records(planned, results, &dead, &failed, interrupted);
    let agents = agents_planned
        .into_iter()
        .map(|a| {
            let detail = failed.remove(&a).unwrap_or_default();
            AgentStatus {
                node: a.node,
                agent: a.agent,
                ran: detail.is_empty(),
                detail,
            }
        })
        .collect();
    RunOutput {
        results: records,
        agents,
        interrupted,
        elapsed: started.elapsed(),
    }
}

/// The report's records, made from the plan and its results, from the back, giving the plan's
/// memory back as it goes, so a large matrix is never held as plan, results and records at once.
fn into_records(
    mut planned: Vec<PlannedProbe>,
    mut results: Vec<Option<ProbeResult>>,
    dead: &BTreeMap<AgentRef, SocketAddr>,
    failed: &BTreeMap<AgentRef, String>,
    interrupted: bool,
) -> Vec<ResultRecord> {
    /// Records made between two returns of memory.
    const CHUNK: usize = 1 << 16;
    let mut records = Vec::with_capacity(planned.len());
    while let Some(p) = planned.pop() {
        let result = results.pop().flatten();
        records.push(record_of(p, result, dead, failed, interrupted));
        if planned.len().is_multiple_of(CHUNK) {
            planned.shrink_to_fit();
            results.shrink_to_fit();
        }
    }
    records.reverse();
    records
}

/// One planned probe's record.
fn record_of(
    p: PlannedProbe,
    result: Option<ProbeResult>,
    dead: &BTreeMap<AgentRef, SocketAddr>,
    failed: &BTreeMap<AgentRef, String>,
    interrupted: bool,
) -> ResultRecord {
    if let Some(why) = to_dead_responder(&p, dead) {
        return ResultRecord::unknown(p.path, p.from, p.to, p.id, Unknown::AgentFailed, why);
    }
    // Only crafted datagrams need their receiver to have an outcome at all (a TCP or UDP
    // probe's receipt only adds where it died): no clone for every other probe.
    let receiver = p
        .receipt_port
        .filter(|_| crafted(&p.probe))
        .and_then(|_| p.to.node.clone())
        .and_then(|node| {
            failed.get(&AgentRef {
                node,
                agent: AgentKind::Host,
            })
        });
    let agent_failed = failed.get(&p.from);
    record_for(p, result, agent_failed, receiver, interrupted)
}

/// One pass over some of the planned probes: their plans fanned out to their agents, then the
/// VXLAN receipts collected. The first pass runs everything; retries run what failed.
pub(crate) struct Pass<'a, R> {
    runtime: &'a Arc<R>,
    cfg: &'a RunConfig,
    salt: u32,
    since: u64,
    /// The whole plan; passes name its probes by index.
    planned: &'a [PlannedProbe],
    /// The plan's indices sorted by id ([`sorted_by_id`]).
    order: &'a [u32],
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
        let k = self
            .order
            .binary_search_by(|&i| self.planned[i as usize].id.as_str().cmp(id))
            .ok()?;
        Some(self.order[k] as usize)
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
        let mut groups: BTreeMap<&AgentRef, Vec<usize>> = BTreeMap::new();
        for &i in subset {
            groups.entry(&self.planned[i].from).or_default().push(i);
        }
        let cfg = self.cfg;
        // Each agent's plan is made when its turn comes (fan_out), from borrowed probes.
        let plans = groups.into_iter().map(|(agent, probes)| {
            let mut specs: Vec<ProbeSpec> = probes
                .into_iter()
                .map(|i| {
                    let p = &self.planned[i];
                    let mut probe = p.probe.clone();
                    if let Probe::Vxlan { nonce, .. }
                    | Probe::Ipip { nonce, .. }
                    | Probe::Geneve { nonce, .. }
                    | Probe::Wireguard { nonce, .. } = &mut probe
                    {
                        *nonce = Some(nonce_for(salt, &p.id));
                    }
                    ProbeSpec {
                        id: p.id.clone(),
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
            progress,
            cancel,
            |r| match self.find(&r.id) {
                Some(i) => store.put(i, r),
                None => {
                    others.insert(r.id.clone(), r);
                }
            },
        )
        .await;
        let vxlan = subset.iter().any(|&i| crafted(&self.planned[i].probe));
        if !interrupted && vxlan {
            interrupted |= self
                .confirm_receipts(subset, salt, store, &mut failed, cancel)
                .await;
        }
        (others, failed, interrupted)
    }

    /// Asks each receiver's sniffer, through its own agent's port, what it saw of what was sent
    /// to it: one `seen` question per receiver. Returns the answers by receiver.
    pub(crate) async fn ask(
        &self,
        asks: BTreeMap<AgentRef, Ask>,
        cancel: &mut (impl Future<Output = ()> + Unpin),
    ) -> (
        BTreeMap<AgentRef, ProbeResult>,
        BTreeMap<AgentRef, String>,
        bool,
    ) {
        let receivers: Vec<AgentRef> = asks.keys().cloned().collect();
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
            fan_out_by_id(self.runtime, plans, self.cfg.concurrency, cancel).await;
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
        cancel: &mut (impl Future<Output = ()> + Unpin),
    ) -> bool {
        let receiver = |p: &PlannedProbe| AgentRef {
            node: p.to.node.clone().unwrap_or_default(),
            agent: AgentKind::Host,
        };
        let sent: Vec<usize> = subset
            .iter()
            .copied()
            .filter(|&i| {
                crafted(&self.planned[i].probe)
                    && store.result(i).is_some_and(|r| r.outcome == Outcome::Ok)
            })
            .collect();
        let mut asks: BTreeMap<AgentRef, Ask> = BTreeMap::new();
        for &i in &sent {
            let p = &self.planned[i];
            let Some(port) = p.receipt_port else { continue };
            asks.entry(receiver(p))
                .or_insert_with(|| Ask::new(port, None))
                .nonce(nonce_for(salt, &p.id));
        }
        let (seen, failed, interrupted) = self.ask(asks, cancel).await;
        for i in sent {
            let p = &self.planned[i];
            let rcv = receiver(p);
            if let Some(r) = store.result_mut(i) {
                confirm_vxlan(
                    r,
                    device_of(&p.probe),
                    nonce_for(salt, &p.id),
                    &rcv.node,
                    seen.get(&rcv),
                    failed.get(&rcv),
                );
            }
        }
        // A receiver whose agent could not be asked is a missing agent, not a failed path.
        for (agent, why) in failed {
            failed_agents.entry(agent).or_insert(why);
        }
        interrupted
    }
}

/// Ids of the responder checks, one per agent, never reported as results.
const RESPONDER_CHECK: &str = "responder-check:";

/// Takes the responder checks out of `results`; an agent whose own responder did not answer is
/// marked failed. Returns those agents with their responder's address.
fn dead_responders(
    cfg: &RunConfig,
    results: &mut HashMap<String, ProbeResult>,
    failed: &mut BTreeMap<AgentRef, String>,
) -> BTreeMap<AgentRef, SocketAddr> {
    let mut dead = BTreeMap::new();
    for (agent, addr) in &cfg.responders {
        let Some(r) = results.remove(&format!("{RESPONDER_CHECK}{agent}")) else {
            continue;
        };
        if r.outcome.is_ok() {
            continue;
        }
        failed.entry(agent.clone()).or_insert_with(|| {
            format!(
                "its responder at {addr} does not answer its own probe ({}: {}): is `probe-pod serve` running there?",
                r.outcome, r.detail
            )
        });
        dead.insert(agent.clone(), *addr);
    }
    dead
}

/// Why a probe to a dead responder is unknown, when it is one.
fn to_dead_responder(p: &PlannedProbe, dead: &BTreeMap<AgentRef, SocketAddr>) -> Option<String> {
    if dead.is_empty() {
        return None;
    }
    let agent = AgentRef {
        node: p.to.node.clone()?,
        agent: p.to.agent?,
    };
    let addr = dead.get(&agent)?;
    (p.to.port == Some(addr.port()) && p.to.address == addr.ip())
        .then(|| format!("not tested: {agent}'s responder at {addr} does not answer its own probe"))
}

/// The report's entry for one planned probe: its result, or why it has none.
fn record_for(
    p: PlannedProbe,
    result: Option<ProbeResult>,
    agent_failed: Option<&String>,
    receiver_failed: Option<&String>,
    interrupted: bool,
) -> ResultRecord {
    // A crafted datagram whose receiver's agent could not say whether it arrived: unknown.
    if let (Some(result), Some(e)) = (&result, receiver_failed) {
        let node = p.to.node.as_deref().unwrap_or("the receiver");
        let detail =
            format!("sent, but {node}'s host agent could not be asked whether it arrived: {e}");
        let id = result.id.clone();
        return ResultRecord::unknown(p.path, p.from, p.to, id, Unknown::AgentFailed, detail);
    }
    if let Some(result) = result {
        return ResultRecord {
            path: p.path,
            from: p.from,
            to: p.to,
            unknown: None,
            result,
        };
    }
    let (why, detail) = match agent_failed {
        Some(e) => (
            Unknown::AgentFailed,
            format!("agent {} could not run: {e}", p.from),
        ),
        None if interrupted => (
            Unknown::Interrupted,
            "interrupted before this probe finished".to_string(),
        ),
        None => (
            Unknown::NoResult,
            format!("agent {} returned no result for this probe", p.from),
        ),
    };
    ResultRecord::unknown(p.path, p.from, p.to, p.id, why, detail)
}

/// A crafted datagram: its outcome is what the receiver's sniffer saw of its nonce.
fn crafted(p: &Probe) -> bool {
    matches!(
        p,
        Probe::Vxlan { .. } | Probe::Ipip { .. } | Probe::Geneve { .. } | Probe::Wireguard { .. }
    )
}

/// The receiver's device a crafted probe must reach to count as decapsulated, for messages.
fn device_of(p: &Probe) -> &'static str {
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
fn confirm_vxlan(
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
    use probe_proto::Sighting;

    fn sent() -> ProbeResult {
        ProbeResult::new("vx", Outcome::Ok, "sent")
    }

    #[test]
    fn a_datagram_whose_receiver_could_not_be_asked_is_unknown_not_failed() {
        let p = PlannedProbe {
            id: "vx".into(),
            path: crate::model::PathClass::Overlay,
            from: AgentRef {
                node: "n1".into(),
                agent: AgentKind::Host,
            },
            to: crate::model::Target {
                node: Some("n2".into()),
                agent: Some(AgentKind::Host),
                service: None,
                address: "10.0.0.2".parse().unwrap(),
                port: Some(8472),
                protocol: crate::model::Protocol::Udp,
            },
            probe: Probe::Icmp {
                address: "10.0.0.2".parse().unwrap(),
            },
            receipt_port: probe_proto::Port::new(9917),
        };
        let mut r = sent();
        confirm_vxlan(
            &mut r,
            "VXLAN device",
            7,
            "n2",
            None,
            Some(&"agent gone".to_string()),
        );
        let gone = "agent gone".to_string();
        let record = record_for(p.clone(), Some(r.clone()), None, Some(&gone), false);
        assert_eq!(record.unknown, Some(Unknown::AgentFailed));
        assert!(!record.is_failed());
        assert!(
            record.result.detail.contains("n2's host agent"),
            "{}",
            record.result.detail
        );
        // With the receiver's agent there, the same failure is a failed path.
        let record = record_for(p, Some(r), None, None, false);
        assert!(record.is_failed());
    }

    fn seen(list: &[(&str, bool)]) -> ProbeResult {
        let mut r = ProbeResult::new("seen", Outcome::Ok, "");
        r.seen = Some(
            list.iter()
                .map(|(i, d)| Sighting {
                    nonce: 7,
                    interface: (*i).into(),
                    from: "192.168.56.10".parse().unwrap(),
                    at_ms: 1,
                    decapsulated: *d,
                    kind: probe_proto::SightingKind::Vxlan,
                    flow: None,
                    reply: false,
                })
                .collect(),
        );
        r
    }

    #[test]
    fn plan_deadline_follows_the_plan_size() {
        // One wave: the old budget of two timeouts and a second.
        assert_eq!(plan_deadline_ms(10, 2000, 1024), 5000);
        // 4,005 probes at 480 slots: 9 waves, each a full timeout, plus one.
        assert_eq!(plan_deadline_ms(4005, 2000, 1024), 21_000);
        // A small concurrency stretches it further.
        assert_eq!(plan_deadline_ms(100, 1000, 10), 12_000);
        assert_eq!(plan_deadline_ms(0, 1000, 0), 3000);
    }

    #[test]
    fn vxlan_receipt_decides_the_outcome() {
        let mut r = sent();
        confirm_vxlan(
            &mut r,
            "VXLAN device",
            7,
            "n2",
            Some(&seen(&[("eth0", false), ("flannel.1", true)])),
            None,
        );
        assert_eq!(r.outcome, Outcome::Ok, "{}", r.detail);
        let mut r = sent();
        confirm_vxlan(
            &mut r,
            "VXLAN device",
            7,
            "n2",
            Some(&seen(&[("eth0", false)])),
            None,
        );
        assert_eq!(r.outcome, Outcome::Timeout);
        assert!(r.detail.contains("dropped by n2 itself"), "{}", r.detail);
        let mut r = sent();
        confirm_vxlan(&mut r, "VXLAN device", 7, "n2", Some(&seen(&[])), None);
        assert_eq!(r.outcome, Outcome::Timeout);
        assert!(r.detail.contains("never reached n2"), "{}", r.detail);
        let mut r = sent();
        confirm_vxlan(
            &mut r,
            "VXLAN device",
            7,
            "n2",
            None,
            Some(&"agent gone".to_string()),
        );
        assert_eq!(r.outcome, Outcome::Error);
        assert!(r.detail.contains("agent gone"));
    }
}
