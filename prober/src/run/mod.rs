//! Fan-out: every agent runs its share of the matrix at once (bounded), each under a deadline;
//! then the VXLAN receipts are collected from the receivers' sniffers. Exactly one result per
//! planned probe, whatever happens: an agent that cannot run leaves its probes unknown, not failed.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::SocketAddr;
use std::num::{NonZeroU32, NonZeroU64};
use std::sync::Arc;
use std::time::{Duration, Instant};

use probe_proto::{Plan, ProbeResult, ProbeSpec};

use crate::model::{AgentKind, AgentRef, AgentStatus, Id, Results, Unknown};
use crate::plan::{Planned, PlannedRef};
use crate::runtime::Runtime;

mod hops;
#[cfg(test)]
mod interrupt_tests;
mod pass;
pub mod preflight;
mod receipts;
mod retry;
pub mod width;

pub(crate) use pass::{Ask, Pass, Store};
use pass::{Slots, crafted};

/// What a run is doing now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The first pass: every planned probe.
    Probing,
    /// Retry round N: the probes that failed so far, run again.
    Retrying { round: u32 },
    /// Asking the receivers' sniffers what arrived: one question per receiver.
    AskingReceivers,
    /// Sending a few paths that died on the network again with rising TTL: one probe per hop.
    TracingHops,
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Probing => f.write_str("probing"),
            Self::Retrying { round } => write!(f, "retrying {round}"),
            Self::AskingReceivers => f.write_str("asking receivers"),
            Self::TracingHops => f.write_str("tracing hops"),
        }
    }
}

/// How far a run has come, reported upwards: the run never draws anything itself.
pub trait Progress: Send + Sync {
    /// A phase begins, with the number of steps it will wait for: planned probes (the agents'
    /// own responder checks are not counted), probes retried, or receivers asked.
    fn phase(&self, _phase: Phase, _steps: u64) {}
    /// Steps of the current phase that finished.
    fn done(&self, _steps: u64) {}
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
    pub results: Results,
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

pub(super) fn plan_for(specs: Vec<ProbeSpec>, cfg: &RunConfig) -> Plan {
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
pub(super) fn nonce_for(run_salt: u32, id: &Id<'_>) -> u32 {
    id.parts()
        .flat_map(str::bytes)
        .fold(0x811c_9dc5_u32 ^ run_salt, |h, b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        })
}

/// Runs the matrix. `cancel` resolving (Ctrl-C) stops it with what was gathered.
pub async fn run<R: Runtime + 'static>(
    planned: &Planned,
    runtime: Arc<R>,
    cfg: &RunConfig,
    progress: &dyn Progress,
    cancel: impl Future<Output = ()> + Send,
) -> RunOutput {
    run_owned(planned.clone(), runtime, cfg, progress, cancel).await
}

/// [`run`], consuming the plan: the results take over its names instead of copying them, so a
/// large matrix is not held twice.
pub async fn run_owned<R: Runtime + 'static>(
    mut planned: Planned,
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
    // The plan's interned senders, in name order: no pass over every probe.
    let agents_planned: Vec<AgentRef> = planned.senders();
    progress.phase(Phase::Probing, planned.len() as u64);
    let order = planned.lookup_order();
    let ranks = planned.agent_ranks();
    let first = Pass {
        runtime: &runtime,
        cfg,
        salt,
        since,
        planned: &planned,
        order: &order,
        ranks: &ranks,
    };
    // One slot per planned probe: an answer goes straight to its probe's place.
    let mut results = Slots::new(&planned);
    let all: Vec<usize> = (0..planned.len()).collect();
    let (mut others, mut failed, mut interrupted) = first
        .run(&all, 0, progress, &mut cancel, &mut results)
        .await;
    drop(all);
    let dead = dead_responders(cfg, &mut others, &mut failed);
    drop(others);
    if interrupted && cfg.retries > 0 {
        // Stopped before any retry: no failure of the first pass is confirmed.
        let open: Vec<usize> = results.failed().map(|(i, _)| i).collect();
        for i in open {
            results.unsettle(i);
        }
    }
    if !interrupted && cfg.retries > 0 {
        interrupted |= retry::confirm_failures(&first, &mut results, progress, &mut cancel).await;
    }
    if !interrupted {
        interrupted |= receipts::collect(&first, &mut results, progress, &mut cancel).await;
    }
    if !interrupted {
        interrupted |= hops::trace(&first, &mut results, progress, &mut cancel).await;
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

/// The report's records: the results the run compacted as they came, the ones still open
/// (failures, crafted datagrams) settled, and every probe without one told why. The plan's
/// names go to the results.
fn into_records(
    planned: Planned,
    slots: Slots,
    dead: &BTreeMap<AgentRef, SocketAddr>,
    failed: &BTreeMap<AgentRef, String>,
    interrupted: bool,
) -> Results {
    let (mut results, mut open, unsettled) = slots.into_parts();
    for (i, p) in planned.iter().enumerate() {
        if unsettled.contains(&i) {
            let (unknown, result) = unknown(&p, Unknown::Interrupted, unsettled_detail(&p));
            results.set(i, unknown, result);
            continue;
        }
        let result = open.remove(&i);
        if result.is_none() && results.is_set(i) {
            // Compacted as it came: an ordinary probe that got through, wrong only when what
            // answered was not the responder it was meant for.
            if let Some(why) = to_dead_responder(&p, dead) {
                let (unknown, result) = unknown(&p, Unknown::AgentFailed, why);
                results.set(i, unknown, result);
            }
            continue;
        }
        let (unknown, result) = record_of(&p, result, dead, failed, interrupted);
        results.set(i, unknown, result);
    }
    let (names, keys) = planned.into_names();
    results.attach(names, keys);
    results
}

/// One planned probe's result, or why it has none.
fn record_of(
    p: &PlannedRef<'_>,
    result: Option<ProbeResult>,
    dead: &BTreeMap<AgentRef, SocketAddr>,
    failed: &BTreeMap<AgentRef, String>,
    interrupted: bool,
) -> (Option<Unknown>, ProbeResult) {
    if let Some(why) = to_dead_responder(p, dead) {
        return unknown(p, Unknown::AgentFailed, why);
    }
    // Only crafted datagrams need their receiver to have an outcome at all (a TCP or UDP
    // probe's receipt only adds where it died): no clone for every other probe.
    let receiver = p
        .receipt_port
        .filter(|_| crafted(p.probe))
        .and_then(|_| p.to.node.clone())
        .and_then(|node| {
            failed.get(&AgentRef {
                node,
                agent: AgentKind::Host,
            })
        });
    let agent_failed = failed.get(p.from);
    record_for(p, result, agent_failed, receiver, interrupted)
}

/// Why an unsettled probe is unknown: what it was waiting for when the run stopped.
fn unsettled_detail(p: &PlannedRef<'_>) -> String {
    if crafted(p.probe) {
        let node = p.to.node.as_deref().unwrap_or("the receiver");
        format!("interrupted: sent, but {node}'s sniffer was not asked whether it arrived")
    } else {
        "interrupted before this probe's failure was confirmed by its retries".to_string()
    }
}

fn unknown(p: &PlannedRef<'_>, why: Unknown, detail: String) -> (Option<Unknown>, ProbeResult) {
    (
        Some(why),
        ProbeResult::new(p.id.to_string(), probe_proto::Outcome::Error, detail),
    )
}

/// Ids of the responder checks, one per agent, never reported as results.
pub(crate) const RESPONDER_CHECK: &str = "responder-check:";

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
fn to_dead_responder(p: &PlannedRef<'_>, dead: &BTreeMap<AgentRef, SocketAddr>) -> Option<String> {
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

/// A failure whose agent was kept from running while it waited, on every attempt: no
/// measurement of the path, and never evidence.
fn starved(p: &PlannedRef<'_>, result: &ProbeResult) -> (Option<Unknown>, ProbeResult) {
    let ms = result.stalled_ms.unwrap_or_default();
    let detail = format!(
        "not measured: agent {} was kept from running for {ms} ms while this probe waited (a starved node: a CPU hog, a throttled cgroup), so its {} measured the scheduler, not the network",
        p.from, result.outcome
    );
    let (why, mut r) = unknown(p, Unknown::Starved, detail);
    r.stalled_ms = result.stalled_ms;
    (why, r)
}

/// The report's entry for one planned probe: its result, or why it has none.
fn record_for(
    p: &PlannedRef<'_>,
    result: Option<ProbeResult>,
    agent_failed: Option<&String>,
    receiver_failed: Option<&String>,
    interrupted: bool,
) -> (Option<Unknown>, ProbeResult) {
    // A crafted datagram whose receiver's agent could not say whether it arrived: unknown.
    if let (Some(_), Some(e)) = (&result, receiver_failed) {
        let node = p.to.node.as_deref().unwrap_or("the receiver");
        let detail =
            format!("sent, but {node}'s host agent could not be asked whether it arrived: {e}");
        return unknown(p, Unknown::AgentFailed, detail);
    }
    if let Some(result) = result {
        return if result.is_starved() {
            starved(p, &result)
        } else {
            (None, result)
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
    unknown(p, why, detail)
}

#[cfg(test)]
mod tests {
    use super::pass::{Answer, confirm_vxlan};
    use super::*;
    use crate::plan::PlannedProbe;
    use probe_proto::Sighting;
    use probe_proto::{IcmpProbe, Outcome, Probe};

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
            probe: Probe::Icmp(IcmpProbe {
                address: "10.0.0.2".parse().unwrap(),
            }),
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
        let plan = Planned::from(vec![p]);
        let p = plan.at(0);
        let (unknown, result) = record_for(&p, Some(r.clone()), None, Some(&gone), false);
        assert_eq!(unknown, Some(Unknown::AgentFailed));
        assert!(
            result.detail.contains("n2's host agent"),
            "{}",
            result.detail
        );
        // With the receiver's agent there, the same failure is a failed path.
        let (unknown, result) = record_for(&p, Some(r), None, None, false);
        assert_eq!(unknown, None);
        assert!(!result.outcome.is_ok());
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
    fn a_receipt_counts_only_the_sightings_of_its_own_nonce() {
        // The receiver saw another sender's datagram decapsulated, and this one's on its NIC.
        let mut answer = seen(&[("eth0", false)]);
        let mut other = answer.seen.as_ref().unwrap()[0].clone();
        other.nonce = 8;
        other.interface = "flannel.1".into();
        other.decapsulated = true;
        answer.seen.as_mut().unwrap().push(other);
        let mut r = sent();
        confirm_vxlan(
            &mut r,
            "VXLAN device",
            7,
            "n2",
            Some(&Answer::new(&answer)),
            None,
        );
        assert_eq!(r.outcome, Outcome::Timeout, "{}", r.detail);
        assert!(r.detail.contains("dropped by n2 itself"), "{}", r.detail);
        let kept = r.seen.unwrap();
        assert_eq!(kept.len(), 1);
        assert!(kept.iter().all(|s| s.nonce == 7));
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
            Some(&Answer::new(&seen(&[("eth0", false), ("flannel.1", true)]))),
            None,
        );
        assert_eq!(r.outcome, Outcome::Ok, "{}", r.detail);
        let mut r = sent();
        confirm_vxlan(
            &mut r,
            "VXLAN device",
            7,
            "n2",
            Some(&Answer::new(&seen(&[("eth0", false)]))),
            None,
        );
        assert_eq!(r.outcome, Outcome::Timeout);
        assert!(r.detail.contains("dropped by n2 itself"), "{}", r.detail);
        let mut r = sent();
        confirm_vxlan(
            &mut r,
            "VXLAN device",
            7,
            "n2",
            Some(&Answer::new(&seen(&[]))),
            None,
        );
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
