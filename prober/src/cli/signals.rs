//! Signals. A matrix stops on SIGINT or SIGTERM (what Kubernetes sends a Job's pod at its
//! deadline) with what it gathered; a lab being built is torn down before the process exits.

use super::out::errln;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use prober::lab;

/// Kubernetes waits 30 s after SIGTERM before SIGKILL; the report, `--save` and the cleanup of
/// the run's objects must fit well inside that.
pub const GRACE: Duration = Duration::from_secs(20);

/// Resolves on the first SIGINT or SIGTERM (for a lab command, once the lab thread passes it
/// on: see [`hand_over`]).
pub async fn interrupted() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        // Without signal handlers the run is simply not interruptible.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => errln!("{}: SIGTERM: stopping with what was gathered", super::running()),
        _ = int.recv() => errln!("{}: interrupted: stopping with what was gathered", super::running()),
        () = handed_over_stop() => {}
    }
}

/// Set while a built lab's run is under way: a first signal stops the run (which then reports
/// what it gathered and tears the lab down itself) instead of tearing down and exiting at once.
static HANDED_OVER: AtomicBool = AtomicBool::new(false);
/// Set when such a signal came.
static STOPPED: AtomicBool = AtomicBool::new(false);
static STOP: std::sync::LazyLock<tokio::sync::Notify> =
    std::sync::LazyLock::new(tokio::sync::Notify::new);

/// From now on the first SIGINT or SIGTERM stops the run instead of the process; a second one
/// still tears the lab down and exits.
pub fn hand_over() {
    HANDED_OVER.store(true, Ordering::SeqCst);
}

/// Whether a signal stopped a handed-over run.
pub fn stopped() -> bool {
    STOPPED.load(Ordering::SeqCst)
}

/// Resolves once a handed-over signal came; never otherwise.
async fn handed_over_stop() {
    loop {
        // Registered before the flag is read, so a signal in between is not missed.
        let notified = STOP.notified();
        if stopped() {
            return;
        }
        notified.await;
    }
}

/// SIGINT and SIGTERM caught from the moment [`Interrupts::install`] runs, for a whole kube
/// session: a signal while the agents are being created must not kill the process with the
/// default action (leaving them behind), and must not be lost because nothing awaited it yet.
#[derive(Clone)]
pub struct Interrupts(tokio::sync::watch::Receiver<bool>);

impl Interrupts {
    /// Installs the handlers now (they are registered before this returns).
    pub fn install() -> Self {
        use tokio::signal::unix::{SignalKind, signal};
        let (tx, rx) = tokio::sync::watch::channel(false);
        if let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            tokio::spawn(async move {
                tokio::select! {
                    _ = term.recv() => errln!("{}: SIGTERM: stopping with what was gathered", super::running()),
                    _ = int.recv() => errln!("{}: interrupted: stopping with what was gathered", super::running()),
                }
                let _ = tx.send(true);
                // Keep the handlers (and the sender) for the rest of the run: a second signal
                // must not kill the cleanup under way.
                loop {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = int.recv() => {}
                    }
                }
            });
        } else {
            // Without handlers the run is simply not interruptible: never resolve.
            std::mem::forget(tx);
        }
        Self(rx)
    }

    /// Whether a signal has arrived.
    pub fn fired(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once a signal has arrived (at once, if one already did).
    pub fn wait(&self) -> impl std::future::Future<Output = ()> + use<> {
        let mut rx = self.0.clone();
        async move {
            if rx.wait_for(|v| *v).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

/// The lab being built, for the signal handler.
static CURRENT: Mutex<Option<(String, PathBuf)>> = Mutex::new(None);

/// Records which lab a signal must tear down.
pub fn building(prefix: String, state_dir: PathBuf) {
    if let Ok(mut c) = CURRENT.lock() {
        *c = Some((prefix, state_dir));
    }
}

/// Blocks SIGINT/SIGTERM in every thread and tears the current lab down when one arrives, so
/// Ctrl-C never leaves namespaces behind. Must run before any other thread starts (the runtime
/// included), so that every thread inherits the mask.
pub fn install_lab_teardown() {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    if set.thread_block().is_err() {
        return;
    }
    std::thread::spawn(move || {
        let sig = loop {
            let Ok(sig) = set.wait() else { return };
            if HANDED_OVER.load(Ordering::SeqCst) && !STOPPED.swap(true, Ordering::SeqCst) {
                errln!(
                    "{}: {sig}: stopping with what was gathered, then tearing the lab down",
                    super::running()
                );
                STOP.notify_waiters();
                continue;
            }
            break sig;
        };
        let held = lab::LAB_LOCK.lock();
        if let Some((prefix, state)) = CURRENT.lock().ok().and_then(|c| c.clone()) {
            errln!("{}: {sig}: tearing the lab down", super::running());
            if let Err(e) = lab::teardown_locked(&prefix, &state) {
                errln!("{}: teardown: {e}", super::running());
            }
        }
        // Exit while still holding the lock: released earlier, the build thread could start one
        // more `ip netns add` that would outlive us and leave a namespace behind.
        let _held = held;
        std::process::exit(130);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_signal_before_anyone_waits_is_caught_and_kept() {
        // Installed at the start of a kube run: a Ctrl-C while the agents are being created
        // (before anything awaits it) neither kills the process nor is lost.
        let interrupts = Interrupts::install();
        nix::sys::signal::raise(nix::sys::signal::Signal::SIGINT).unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(5), interrupts.wait())
            .await
            .expect("the signal was kept for whoever waits next");
        // Every later wait resolves too (the cleanup's, the probe loop's).
        tokio::time::timeout(std::time::Duration::from_secs(1), interrupts.wait())
            .await
            .unwrap();
    }
}
