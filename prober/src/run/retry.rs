//! Confirmation before blame: every probe that failed the first pass is run again, spaced, within
//! the run's retry budget. A path that got through on any attempt is intermittent (outcome `ok`,
//! with `attempts`/`okAttempts` recording the loss); only a path that failed every attempt stays
//! failed. Plain UDP probes, whose "closed" answer is an ICMP port-unreachable the receiving
//! kernel rate-limits per peer, are re-sent only as fast as that limiter refills.

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::time::Duration;

use probe_proto::{Probe, ProbeResult, UdpProbe};
use tokio::time::Instant;

use super::{Pass, Phase, Progress, Store};
use crate::plan::PlannedRef;

use super::pass::Slots;
use crate::runtime::Runtime;

/// The wait before the first retry: long enough for a burst of loss to pass.
const FIRST_SPACING: Duration = Duration::from_millis(300);
/// The wait before every later retry: one refill of the kernel's ICMP rate limiter.
const LATER_SPACING: Duration = Duration::from_secs(1);
/// The kernel's ICMP error burst per peer (`XRLIM_BURST_FACTOR`), refilled one a second
/// (`net.ipv4.icmp_ratelimit`, 1,000 ms by default).
const ICMP_BURST: f64 = 6.0;

/// How many ICMP errors a destination host's kernel is expected to send us now, as its rate
/// limiter refills: one a second, up to the burst. Starts empty, since the first pass may have
/// spent it.
struct IcmpBudget {
    start: Instant,
    spent: HashMap<IpAddr, (Instant, f64)>,
}

impl IcmpBudget {
    fn new(start: Instant) -> Self {
        Self {
            start,
            spent: HashMap::new(),
        }
    }

    /// Takes one answer's worth from `host`'s limiter, if it has one at `now`.
    fn take(&mut self, host: IpAddr, now: Instant) -> bool {
        let (at, tokens) = self.spent.entry(host).or_insert((self.start, 0.0));
        let refilled = (*tokens + now.saturating_duration_since(*at).as_secs_f64()).min(ICMP_BURST);
        *at = now;
        if refilled >= 1.0 {
            *tokens = refilled - 1.0;
            true
        } else {
            *tokens = refilled;
            false
        }
    }
}

/// The destination of a probe whose "closed" answer is a rate-limited ICMP error.
fn icmp_paced(p: &PlannedRef<'_>) -> Option<IpAddr> {
    match *p.probe {
        Probe::Udp(UdpProbe { address, .. }) => Some(address),
        _ => None,
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Tally {
    /// Retry rounds the probe was put in (whether or not its agent answered).
    rounds: u32,
    /// Attempts with a result, the first pass included.
    attempts: u32,
    ok: u32,
}

/// Re-runs the failed results in `results` and records the attempts on each. Returns whether
/// the run was interrupted meanwhile.
pub(super) async fn confirm_failures<R: Runtime + 'static>(
    pass: &Pass<'_, R>,
    results: &mut Slots,
    progress: &dyn Progress,
    cancel: &mut (impl Future<Output = ()> + Unpin),
) -> bool {
    let mut tally: HashMap<usize, Tally> = results
        .failed()
        .map(|(i, r)| {
            let t = Tally {
                attempts: u32::from(!r.is_starved()),
                ..Tally::default()
            };
            (i, t)
        })
        .collect();
    if tally.is_empty() {
        return false;
    }
    let first_failure: HashMap<usize, String> = tally
        .keys()
        .filter_map(|&i| results.result(i).map(|r| (i, r.detail.clone())))
        .collect();
    let retries = pass.cfg.retries;
    let started = Instant::now();
    let budget_end = started + pass.cfg.retry_budget;
    let mut icmp = IcmpBudget::new(started);
    let mut interrupted = false;
    for round in 1u32.. {
        let mut pending: Vec<usize> = tally
            .iter()
            .filter(|(_, t)| t.ok == 0 && t.rounds < retries)
            .map(|(&i, _)| i)
            .collect();
        if pending.is_empty() {
            break;
        }
        // In plan order, so the ICMP budget goes to the same probes whatever the map's order.
        pending.sort_unstable();
        let wait = if round == 1 {
            FIRST_SPACING
        } else {
            LATER_SPACING
        };
        if Instant::now() + wait >= budget_end {
            break;
        }
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = &mut *cancel => {
                interrupted = true;
                break;
            }
        }
        let now = Instant::now();
        let batch: Vec<usize> = pending
            .into_iter()
            .filter(|&i| icmp_paced(&pass.planned.at(i)).is_none_or(|host| icmp.take(host, now)))
            .collect();
        if batch.is_empty() {
            continue;
        }
        let mut got: HashMap<usize, ProbeResult> = HashMap::new();
        progress.phase(Phase::Retrying { round }, batch.len() as u64);
        let (_others, _failed, stopped) = pass.run(&batch, round, progress, cancel, &mut got).await;
        for i in &batch {
            let Some(t) = tally.get_mut(i) else {
                continue;
            };
            t.rounds += 1;
            // An agent that failed this round leaves no result, and a failure while its agent
            // was starved measured nothing: neither is an attempt nor a success.
            match got.remove(i) {
                Some(r) if r.outcome.is_ok() => {
                    t.attempts += 1;
                    t.ok += 1;
                    results.put(*i, r);
                }
                Some(r) if !r.is_starved() => {
                    t.attempts += 1;
                    // A measured failure stands for the path rather than a starved one.
                    if results.result(*i).is_some_and(ProbeResult::is_starved) {
                        results.put(*i, r);
                    }
                }
                _ => {}
            }
        }
        if stopped {
            interrupted = true;
            break;
        }
    }
    for (i, t) in tally {
        if interrupted && t.ok == 0 && t.rounds < retries {
            // Stopped before its retries were done: its failure is not confirmed.
            results.unsettle(i);
            continue;
        }
        if let Some(r) = results.result_mut(i) {
            record(r, t, first_failure.get(&i).map_or("", String::as_str));
        }
    }
    interrupted
}

/// Writes the tally on the result a path ends with, and says in its detail what it means.
/// Attempts its agent was starved through are not counted; a path none of whose attempts was
/// measured keeps its starved result, which the report marks unknown.
fn record(r: &mut ProbeResult, t: Tally, first_failure: &str) {
    if t.attempts == 0 {
        return;
    }
    r.attempts = Some(t.attempts);
    r.ok_attempts = Some(t.ok);
    if t.ok > 0 && t.ok < t.attempts {
        r.detail = format!(
            "intermittent: got through on {} of {} attempts ({}); a failed attempt said: {first_failure}",
            t.ok, t.attempts, r.detail
        );
    } else if t.attempts > 1 {
        r.detail = format!("{} (failed all {} attempts)", r.detail, t.attempts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    use probe_proto::{Outcome, Plan, TcpProbe};
    use tokio::sync::mpsc;

    use crate::model::{AgentKind, AgentRef, PathClass, Protocol, Target};
    use crate::plan::{Planned, PlannedProbe};
    use crate::run::{Phase, Progress, RunConfig, run};
    use crate::runtime::RuntimeError;

    /// Answers `dead` never, `flaky` from its second attempt on, everything else at once.
    #[derive(Default)]
    struct Flaky {
        seen: Mutex<HashMap<String, u32>>,
    }

    impl Runtime for Flaky {
        async fn run(
            &self,
            _agent: &AgentRef,
            plan: Plan,
            results: mpsc::Sender<ProbeResult>,
        ) -> Result<(), RuntimeError> {
            for spec in &plan.probes {
                let n = {
                    let mut seen = self.seen.lock().unwrap();
                    let n = seen.entry(spec.id.clone()).or_default();
                    *n += 1;
                    *n
                };
                // `starved-*`: timed out while the agent was kept from running.
                let (outcome, stalled) = match spec.id.as_str() {
                    "starved-always" => (Outcome::Timeout, true),
                    "starved-then-ok" | "starved-then-dead" if n == 1 => (Outcome::Timeout, true),
                    "dead" | "starved-then-dead" => (Outcome::Timeout, false),
                    "flaky" if n == 1 => (Outcome::Timeout, false),
                    _ => (Outcome::Ok, false),
                };
                let mut r = ProbeResult::new(&spec.id, outcome, "fake");
                r.stalled_ms = stalled.then_some(400);
                let _ = results.send(r).await;
            }
            Ok(())
        }
    }

    async fn run_flaky(probes: &Planned, cfg: &RunConfig) -> crate::run::RunOutput {
        let rt = Arc::new(Flaky::default());
        run(probes, rt, cfg, &(), std::future::pending()).await
    }

    fn planned(id: &str) -> PlannedProbe {
        PlannedProbe {
            id: id.into(),
            path: PathClass::NodeToNode,
            from: AgentRef {
                node: "n1".into(),
                agent: AgentKind::Host,
            },
            to: Target {
                node: Some("n2".into()),
                agent: Some(AgentKind::Host),
                service: None,
                address: "10.0.0.2".parse().unwrap(),
                port: Some(10250),
                protocol: Protocol::Tcp,
            },
            probe: Probe::Tcp(TcpProbe {
                address: "10.0.0.2".parse().unwrap(),
                port: probe_proto::Port::new(10250).unwrap(),
                echo: false,
            }),
            receipt_port: None,
        }
    }

    #[tokio::test]
    async fn a_path_is_blamed_only_when_every_attempt_failed() {
        let rt = Arc::new(Flaky::default());
        let probes = Planned::from(vec![planned("dead"), planned("flaky"), planned("fine")]);
        let out = run(
            &probes,
            rt.clone(),
            &RunConfig::default(),
            &(),
            std::future::pending(),
        )
        .await;
        // One record per planned probe, in the plan's order.
        let results = out.results.to_vec();
        let ids: Vec<&str> = results.iter().map(|r| r.result.id.as_str()).collect();
        assert_eq!(ids, ["dead", "flaky", "fine"]);
        let by: HashMap<&str, &ProbeResult> = results
            .iter()
            .map(|r| (r.result.id.as_str(), &r.result))
            .collect();
        assert_eq!(by["dead"].outcome, Outcome::Timeout);
        assert_eq!(
            (by["dead"].attempts, by["dead"].ok_attempts),
            (Some(3), Some(0))
        );
        assert_eq!(by["flaky"].outcome, Outcome::Ok);
        assert!(by["flaky"].is_intermittent(), "{:?}", by["flaky"]);
        assert_eq!(
            (by["flaky"].attempts, by["flaky"].ok_attempts),
            (Some(2), Some(1))
        );
        assert_eq!((by["fine"].attempts, by["fine"].ok_attempts), (None, None));
        {
            let seen = rt.seen.lock().unwrap();
            assert_eq!((seen["dead"], seen["flaky"], seen["fine"]), (3, 2, 1));
        }
        // With retries off, one attempt and nothing recorded.
        let cfg = RunConfig {
            retries: 0,
            ..RunConfig::default()
        };
        let out = run_flaky(&probes, &cfg).await;
        assert!(out.results.iter().all(|r| r.result.attempts.is_none()));
        assert_eq!(
            out.results
                .iter()
                .filter(|r| r.result.outcome.is_ok())
                .count(),
            1
        );
    }

    /// Every phase and the steps done in it.
    #[derive(Default)]
    struct Phases(Mutex<Vec<(Phase, u64, u64)>>);

    impl Progress for Phases {
        fn phase(&self, phase: Phase, steps: u64) {
            self.0.lock().unwrap().push((phase, steps, 0));
        }
        fn done(&self, steps: u64) {
            if let Some(last) = self.0.lock().unwrap().last_mut() {
                last.2 += steps;
            }
        }
    }

    #[tokio::test]
    async fn progress_counts_what_was_planned_phase_by_phase() {
        let probes = Planned::from(vec![planned("dead"), planned("flaky"), planned("fine")]);
        // The agent's own responder check runs too, but is not one of the planned probes.
        let cfg = RunConfig {
            responders: [(probes.at(0).from.clone(), "10.0.0.1:9917".parse().unwrap())].into(),
            ..RunConfig::default()
        };
        let phases = Phases::default();
        run(
            &probes,
            Arc::new(Flaky::default()),
            &cfg,
            &phases,
            std::future::pending(),
        )
        .await;
        assert_eq!(
            *phases.0.lock().unwrap(),
            [
                (Phase::Probing, 3, 3),
                (Phase::Retrying { round: 1 }, 2, 2),
                (Phase::Retrying { round: 2 }, 1, 1),
            ]
        );
    }

    #[tokio::test]
    async fn a_timeout_while_the_agent_was_starved_is_no_attempt() {
        let ids = ["starved-then-ok", "starved-always", "starved-then-dead"];
        let probes = Planned::from(ids.iter().map(|id| planned(id)).collect::<Vec<_>>());
        let out = run_flaky(&probes, &RunConfig::default()).await;
        let results = out.results.to_vec();
        let by: HashMap<&str, &crate::model::ResultRecord> =
            results.iter().map(|r| (r.result.id.as_str(), r)).collect();
        // Starved once, then through: a path that works, not a lossy one.
        let r = &by["starved-then-ok"].result;
        assert_eq!(r.outcome, Outcome::Ok);
        assert!(!r.is_intermittent(), "{r:?}");
        assert_eq!((r.attempts, r.ok_attempts), (Some(1), Some(1)));
        // Starved on every attempt: no measurement at all, never a failed path.
        let r = by["starved-always"];
        assert_eq!(r.unknown, Some(crate::model::Unknown::Starved), "{r:?}");
        assert!(!r.is_failed());
        assert_eq!(r.result.stalled_ms, Some(400));
        assert!(
            r.result.detail.contains("kept from running for 400 ms"),
            "{}",
            r.result.detail
        );
        // Starved once, then measured failures: the measured ones decide.
        let r = by["starved-then-dead"];
        assert_eq!((r.unknown, r.result.outcome), (None, Outcome::Timeout));
        assert_eq!(
            (r.result.attempts, r.result.ok_attempts),
            (Some(2), Some(0))
        );
        assert_eq!(r.result.stalled_ms, None);
    }

    #[test]
    fn icmp_budget_refills_one_a_second_up_to_the_burst() {
        let t0 = Instant::now();
        let mut b = IcmpBudget::new(t0);
        let h: IpAddr = "10.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.0.2".parse().unwrap();
        assert!(!b.take(h, t0 + Duration::from_millis(300)));
        assert!(b.take(h, t0 + Duration::from_millis(1300)));
        assert!(!b.take(h, t0 + Duration::from_millis(1400)));
        // Another host has a limiter of its own.
        assert!(b.take(other, t0 + Duration::from_millis(1400)));
        // Ten quiet seconds refill only the burst.
        let later = t0 + Duration::from_secs(12);
        let taken = (0..10).filter(|_| b.take(h, later)).count();
        assert_eq!(taken, 6);
    }

    #[test]
    fn the_tally_decides_what_the_result_says() {
        let mut r = ProbeResult::new("x", Outcome::Ok, "connected");
        record(
            &mut r,
            Tally {
                rounds: 1,
                attempts: 2,
                ok: 1,
            },
            "timeout after 1000 ms",
        );
        assert!(r.is_intermittent());
        assert!(
            r.detail.starts_with("intermittent: got through on 1 of 2"),
            "{}",
            r.detail
        );
        let mut r = ProbeResult::new("x", Outcome::Timeout, "timeout");
        record(
            &mut r,
            Tally {
                rounds: 2,
                attempts: 3,
                ok: 0,
            },
            "timeout",
        );
        assert!(!r.is_intermittent());
        assert_eq!((r.attempts, r.ok_attempts), (Some(3), Some(0)));
        assert!(r.detail.ends_with("(failed all 3 attempts)"));
    }
}
