//! An agent session's deadline, following its progress: the plan's deadline plus a grace for
//! the agent to probe; past it, the session lives on while result bytes keep arriving (a big
//! matrix's stream read by a slow coordinator), is cut once they stop for [`QUIET`], and never
//! outlives [`MAX_EXTENSION`] past the plan's deadline.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, ReadBuf};
use tokio::time::Instant;

/// How long a session past its deadline may go without a result byte.
pub const QUIET: Duration = Duration::from_secs(10);
/// The most a stream that keeps flowing may run past the session's own deadline.
pub const MAX_EXTENSION: Duration = Duration::from_secs(15 * 60);

/// No byte yet.
const NONE: u64 = u64::MAX;

/// When a session last received result bytes.
#[derive(Debug, Clone)]
pub struct Progress {
    started: Instant,
    /// Milliseconds from `started` to the last byte; [`NONE`] before the first.
    last_ms: Arc<AtomicU64>,
}

impl Default for Progress {
    fn default() -> Self {
        Self {
            started: Instant::now(),
            last_ms: Arc::new(AtomicU64::new(NONE)),
        }
    }
}

impl Progress {
    fn tick(&self) {
        let ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(NONE - 1);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    /// When the session may be cut for silence: [`QUIET`] after its last byte, if any.
    fn quiet_until(&self) -> Option<Instant> {
        match self.last_ms.load(Ordering::Relaxed) {
            NONE => None,
            ms => Some(self.started + Duration::from_millis(ms) + QUIET),
        }
    }

    /// `reader`, noting here each time it yields bytes.
    pub fn watch<R>(&self, reader: R) -> Watched<R> {
        Watched {
            inner: reader,
            progress: self.clone(),
        }
    }
}

/// A reader whose reads count as its session's progress.
pub struct Watched<R> {
    inner: R,
    progress: Progress,
}

impl<R: AsyncRead + Unpin> AsyncRead for Watched<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.progress.tick();
        }
        polled
    }
}

/// Why a session was cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Not done at its deadline with no byte for [`QUIET`], or still sending at
    /// [`MAX_EXTENSION`] past it.
    Deadline { after: Duration },
    /// Kept past its deadline by arriving results, which then stopped for [`QUIET`].
    Stalled { after: Duration },
}

/// Runs `work` until it ends, or until the session's deadline (`deadline` from now, then
/// extended by `progress` as the module says) passes.
pub async fn within<T>(
    deadline: Duration,
    progress: &Progress,
    work: impl Future<Output = T>,
) -> Result<T, Cut> {
    let start = Instant::now();
    let base = start + deadline;
    let cap = base + MAX_EXTENSION;
    tokio::pin!(work);
    let due = || progress.quiet_until().map_or(base, |q| q.max(base));
    loop {
        let until = due().min(cap);
        tokio::select! {
            out = &mut work => return Ok(out),
            () = tokio::time::sleep_until(until) => {}
        }
        let now = Instant::now();
        let after = now - start;
        if now >= cap {
            return Err(Cut::Deadline { after });
        }
        let due = due();
        if now >= due {
            return Err(if due > base {
                Cut::Stalled { after }
            } else {
                Cut::Deadline { after }
            });
        }
    }
}

impl Cut {
    /// The runtime's error for a session `command` this cut.
    #[must_use]
    pub fn error(self, command: String) -> super::RuntimeError {
        match self {
            Self::Deadline { after } => super::RuntimeError::Deadline {
                command,
                secs: after.as_secs(),
            },
            Self::Stalled { after } => super::RuntimeError::Stalled {
                command,
                quiet: QUIET.as_secs(),
                secs: after.as_secs(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// Bytes every `every`, `n` times, then silence.
    fn trickle(every: Duration, n: usize) -> impl AsyncRead + Unpin {
        let (mut w, r) = tokio::io::duplex(64);
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            for _ in 0..n {
                tokio::time::sleep(every).await;
                let _ = w.write_all(b"x").await;
            }
            std::future::pending::<()>().await;
        });
        r
    }

    async fn drain(mut r: impl AsyncRead + Unpin) {
        let mut buf = [0u8; 16];
        while r.read(&mut buf).await.is_ok_and(|n| n > 0) {}
    }

    #[tokio::test(start_paused = true)]
    async fn a_flowing_stream_outlives_the_deadline_and_a_silent_one_is_cut_soon_after() {
        // A byte a second for 30 s, against a 2 s deadline: alive until the bytes stop, then
        // cut QUIET later.
        let progress = Progress::default();
        let r = progress.watch(trickle(Duration::from_secs(1), 30));
        match within(Duration::from_secs(2), &progress, drain(r)).await {
            Err(Cut::Stalled { after }) => {
                assert!(after >= Duration::from_secs(30) + QUIET, "{after:?}");
                assert!(after <= Duration::from_secs(31) + QUIET, "{after:?}");
            }
            other => panic!("{other:?}"),
        }
        // Silent from the start: cut at the deadline itself.
        let progress = Progress::default();
        let r = progress.watch(trickle(Duration::from_secs(1), 0));
        assert_eq!(
            within(Duration::from_secs(2), &progress, drain(r)).await,
            Err(Cut::Deadline {
                after: Duration::from_secs(2)
            })
        );
        // Flowing for ever: cut at the cap.
        let progress = Progress::default();
        let r = progress.watch(trickle(Duration::from_secs(1), usize::MAX));
        assert_eq!(
            within(Duration::from_secs(2), &progress, drain(r)).await,
            Err(Cut::Deadline {
                after: Duration::from_secs(2) + MAX_EXTENSION
            })
        );
    }
}
