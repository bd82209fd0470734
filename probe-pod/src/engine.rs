//! Runs a plan: every probe concurrently within the plan's concurrency limit and deadline, and
//! exactly one result per probe, streamed as each finishes. Probes are decoded from the plan only
//! when a slot frees up and finished tasks are reaped as the plan goes: what runs follows the
//! concurrency; the plan's text and its index stay (about 160 bytes per probe, README).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::probe;
use crate::proto::{LazyPlan, Outcome, ProbeResult, ProbeSpec, stall};

/// File descriptors kept back for stdio, the runtime and the resolver.
const RESERVED_FDS: u64 = 64;
/// The most sockets one probe holds at once.
const FDS_PER_PROBE: u64 = 2;

/// Raises the soft open-file limit to the hard one and returns how many probes fit in it.
#[must_use]
pub fn fd_budget() -> usize {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return 256;
    };
    let limit = if hard > soft && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        hard
    } else {
        soft
    };
    let probes = limit.saturating_sub(RESERVED_FDS) / FDS_PER_PROBE;
    usize::try_from(probes).unwrap_or(usize::MAX).max(1)
}

/// How many probes run at once: the plan's wish, capped by the descriptor budget.
#[must_use]
pub fn effective_concurrency(plan: &LazyPlan, fd_budget: usize) -> usize {
    usize::try_from(plan.concurrency.get())
        .unwrap_or(usize::MAX)
        .min(fd_budget)
        .max(1)
}

/// Records a finished probe task; a task that died without a result gets one here.
async fn reap(
    joined: Result<(tokio::task::Id, ()), tokio::task::JoinError>,
    ids: &mut HashMap<tokio::task::Id, String>,
    out: &mpsc::Sender<ProbeResult>,
) {
    match joined {
        Ok((task, ())) => {
            ids.remove(&task);
        }
        Err(e) => {
            if let Some(id) = ids.remove(&e.id()) {
                let why = if e.is_panic() {
                    "the probe panicked (a bug: please report it)"
                } else {
                    "the probe was cancelled"
                };
                let _ = out.send(ProbeResult::new(id, Outcome::Error, why)).await;
            }
        }
    }
}

/// Runs one probe under its timeout. The timeout starts when the probe's task does: time spent
/// waiting for the runtime to schedule it (thousands of tasks spawned at once) is not the
/// network's. A timeout during which this agent was kept from running (`stall::doubts`: a CPU
/// hog, a throttled cgroup) measured the scheduler: the probe runs once more when the plan's
/// deadline leaves it a whole timeout. A result whose last run was starved too (or had no time
/// left for another) carries the stall, and the coordinator never counts it as a failure.
async fn run_watched(spec: &ProbeSpec, deadline: Instant, timeout: Duration) -> ProbeResult {
    let first = stall::mark();
    let probe_deadline = deadline.min(Instant::now() + timeout);
    let mut result = probe::run(spec, probe_deadline).await;
    // A timer that fired late is a stall the watching thread may not have counted yet (it wakes
    // from the same stop): the larger of the two.
    let mut stalled = first
        .since()
        .max(Instant::now().saturating_duration_since(probe_deadline));
    if result.outcome == Outcome::Timeout
        && stall::doubts(stalled, timeout)
        && Instant::now() + timeout <= deadline
    {
        let again = stall::mark();
        result = probe::run(spec, Instant::now() + timeout).await;
        // A rerun the agent ran through measured the path; a starved one adds its stall.
        stalled = if stall::doubts(again.since(), timeout) {
            first.since()
        } else {
            again.since()
        };
    }
    if stall::doubts(stalled, timeout) {
        result.stalled_ms = Some(u32::try_from(stalled.as_millis()).unwrap_or(u32::MAX));
    }
    result
}

/// Runs `plan`, sending each result to `out` as it completes. Returns when every probe has one.
pub async fn run_plan(plan: LazyPlan, concurrency: usize, out: mpsc::Sender<ProbeResult>) {
    let start = Instant::now();
    let deadline = start + Duration::from_millis(plan.deadline_ms.get());
    let default_timeout = Duration::from_millis(plan.probe_timeout_ms.get());
    let sem = Arc::new(Semaphore::new(concurrency));
    let mut tasks = JoinSet::new();
    // Ids of the probes in flight, to answer for a task that dies: at most `concurrency` entries.
    let mut ids = HashMap::new();
    let mut specs = plan.probes().enumerate();
    while let Some((i, spec)) = specs.next() {
        let spec = match spec {
            Ok(s) => s,
            Err(e) => {
                // Cannot happen (the plan was validated whole), but never lose a probe silently.
                let id = format!("probes[{i}]");
                let _ = out
                    .send(ProbeResult::new(id, Outcome::Error, e.to_string()))
                    .await;
                continue;
            }
        };
        let permit = tokio::select! {
            p = sem.clone().acquire_owned() => p.ok(),
            () = tokio::time::sleep_until(deadline) => None,
        };
        while let Some(joined) = tasks.try_join_next_with_id() {
            reap(joined, &mut ids, &out).await;
        }
        // A permit freed right at the deadline is no use: the probe would have no time to run.
        let Some(permit) = permit.filter(|_| Instant::now() < deadline) else {
            let detail = format!(
                "plan deadline of {} ms reached before this probe could start",
                plan.deadline_ms
            );
            let _ = out
                .send(ProbeResult::new(spec.id, Outcome::Error, detail.clone()))
                .await;
            for (_, s) in specs.by_ref() {
                if let Ok(s) = s {
                    let _ = out
                        .send(ProbeResult::new(s.id, Outcome::Error, detail.clone()))
                        .await;
                }
            }
            break;
        };
        let timeout = spec
            .timeout_ms
            .map_or(default_timeout, |t| Duration::from_millis(t.get()));
        let tx = out.clone();
        let id = spec.id.clone();
        let handle = tasks.spawn(async move {
            let result = run_watched(&spec, deadline, timeout).await;
            // The slot is held until the result is queued: when the reader is slower than the
            // probes, the plan waits instead of finished results piling up in memory.
            let _ = tx.send(result).await;
            drop(permit);
        });
        ids.insert(handle.id(), id);
    }
    while let Some(joined) = tasks.join_next_with_id().await {
        reap(joined, &mut ids, &out).await;
    }
}
