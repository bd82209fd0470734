//! Scheduling delay: how long this process was kept from running when it should have run. One
//! thread sleeps a short tick over and over and adds up how late it wakes; on a starved machine
//! (a CPU hog beside the agent, a throttled cgroup, a coordinator sharing its cores with builds)
//! the lateness piles up. A timer that fired late because its process was not running measured
//! the scheduler, not the network: the agent reruns such a probe and reports the stall, and the
//! diagnosis never reads it as loss or a gap.

use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How often the watching thread wakes. Short enough to see a stall that eats a good part of a
/// probe's timeout, long enough to cost nothing (100 wake-ups a second, no work in them).
pub const TICK: Duration = Duration::from_millis(10);

/// Lateness below this is the kernel's timer slack and a busy scheduler's ordinary wake-up
/// latency (a few of its time slices), not a stall. Counting every few-millisecond delay would
/// add up to "stalls" on any loaded machine and hide real timeouts; what can fake a timeout is
/// a process kept off the CPU for a long stretch (a throttled cgroup's period, a stopped task).
pub const SLACK: Duration = Duration::from_millis(20);

static STALLED_MICROS: AtomicU64 = AtomicU64::new(0);
static LONGEST_MICROS: AtomicU64 = AtomicU64::new(0);
static STARTED: Once = Once::new();

/// How much of one tick's sleep was a stall: the lateness beyond the slack, all of it counted
/// once it passes the slack (a thread 40 ms late lost 40 ms, not 20).
#[must_use]
pub fn lateness(asked: Duration, slept: Duration) -> Duration {
    let late = slept.saturating_sub(asked);
    if late > SLACK { late } else { Duration::ZERO }
}

/// Starts the watching thread (once per process; later calls do nothing). When the thread
/// cannot be spawned the process runs unwatched and every reading stays zero: a missing
/// measurement never invents a stall.
pub fn watch() {
    STARTED.call_once(|| {
        let spawned = std::thread::Builder::new()
            .name("stall-watch".into())
            .spawn(|| {
                loop {
                    let before = Instant::now();
                    std::thread::sleep(TICK);
                    record(lateness(TICK, before.elapsed()));
                }
            });
        drop(spawned);
    });
}

fn record(late: Duration) {
    if late.is_zero() {
        return;
    }
    let us = u64::try_from(late.as_micros()).unwrap_or(u64::MAX);
    STALLED_MICROS.fetch_add(us, Ordering::Relaxed);
    LONGEST_MICROS.fetch_max(us, Ordering::Relaxed);
}

/// A reading of the stall counter, to measure the stall over a span of work.
#[derive(Debug, Clone, Copy)]
pub struct Mark(u64);

/// The counter now.
#[must_use]
pub fn mark() -> Mark {
    Mark(STALLED_MICROS.load(Ordering::Relaxed))
}

impl Mark {
    /// The stall since this mark (zero when the thread is not watching).
    #[must_use]
    pub fn since(self) -> Duration {
        Duration::from_micros(
            STALLED_MICROS
                .load(Ordering::Relaxed)
                .saturating_sub(self.0),
        )
    }
}

/// The longest single stall this process has seen.
#[must_use]
pub fn longest() -> Duration {
    Duration::from_micros(LONGEST_MICROS.load(Ordering::Relaxed))
}

/// Whether a stall of `stalled` over a probe that had `timeout` is enough to doubt a timeout:
/// half the timeout, and at least 100 ms. Below that the probe still had most of its time to
/// hear an answer that arrives within milliseconds; doubting less would let a loaded node hide a
/// real gap.
#[must_use]
pub fn doubts(stalled: Duration, timeout: Duration) -> bool {
    stalled >= Duration::from_millis(100).max(timeout / 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lateness_counts_only_past_the_slack_and_then_all_of_it() {
        let tick = Duration::from_millis(10);
        assert_eq!(lateness(tick, Duration::from_millis(25)), Duration::ZERO);
        assert_eq!(lateness(tick, Duration::from_millis(9)), Duration::ZERO);
        assert_eq!(
            lateness(tick, Duration::from_millis(50)),
            Duration::from_millis(40)
        );
    }

    #[test]
    fn a_stopped_thread_is_seen_as_stalled() {
        // The real thing: this test's own process is stopped (SIGSTOP) by a child for 300 ms and
        // continued (SIGCONT); the watching thread must have counted about that long.
        watch();
        std::thread::sleep(TICK * 3);
        let m = mark();
        let pid = std::process::id().to_string();
        let status = std::process::Command::new("sh")
            .args([
                "-c",
                "sleep 0.1; kill -STOP \"$0\"; sleep 0.3; kill -CONT \"$0\"",
            ])
            .arg(&pid)
            .status()
            .expect("sh runs");
        assert!(status.success());
        // The stop happened while this thread waited for the child; give the watcher a tick to
        // wake and count it.
        std::thread::sleep(TICK * 3);
        let stalled = m.since();
        assert!(
            stalled >= Duration::from_millis(250),
            "a 300 ms stop counted as {stalled:?}"
        );
        assert!(longest() >= Duration::from_millis(250));
    }

    #[test]
    fn doubt_needs_half_the_timeout_and_a_hundred_ms() {
        let s = Duration::from_millis;
        assert!(!doubts(s(90), s(100)));
        assert!(doubts(s(100), s(100)));
        assert!(!doubts(s(400), s(1000)));
        assert!(doubts(s(500), s(1000)));
    }
}
