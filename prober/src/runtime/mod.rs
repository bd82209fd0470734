//! How agents are started and reached. Every runtime honours one contract (docs/design.md, "Contracts"):
//! run `<exec prefix> probe-pod probe --plan -`, write the plan to stdin, read one JSON result per
//! line from stdout. Only the way a command reaches the agent differs.

pub mod clock;
pub mod kube;
pub mod local;
pub mod split;
pub mod standins;

use std::future::Future;

use probe_proto::{Plan, ProbeResult};
use tokio::sync::mpsc;

use crate::model::AgentRef;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("cannot start `{command}`: {source}")]
    Start {
        command: String,
        source: std::io::Error,
    },
    #[error("`{command}` exited with {status}: {stderr}")]
    Exit {
        command: String,
        status: String,
        stderr: String,
    },
    #[error(
        "`{command}` could not start the agent binary `{bin}` ({stderr}): give its path as the \
         exec prefix sees it with --agent-bin PATH (or PROBER_AGENT_BIN), or `agentBin:` in the \
         inventory"
    )]
    AgentBinary {
        command: String,
        bin: String,
        stderr: String,
    },
    #[error("`{command}` did not finish within {secs} s")]
    Deadline { command: String, secs: u64 },
    #[error(
        "`{command}` stopped sending results: none for {quiet} s past its deadline (cut after \
         {secs} s; the results read before it are kept)"
    )]
    Stalled {
        command: String,
        quiet: u64,
        secs: u64,
    },
    #[error("`{command}`: {message}")]
    Protocol { command: String, message: String },
    #[error("`{command}`: {source}")]
    Results { command: String, source: ReadError },
    #[error("the inventory names no exec prefix for agent {0}")]
    NoAgent(AgentRef),
}

/// Why an agent's results could not be read; the caller names the command.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("unreadable result line {line}: {source}")]
    Line {
        line: usize,
        source: serde_json::Error,
    },
    #[error("result line {line} is longer than {max} bytes: the agent broke the protocol")]
    LineTooLong { line: usize, max: usize },
    #[error(
        "the agent printed more than {budget} bytes for its plan: it broke the protocol (the rest was not read)"
    )]
    TooMuch { budget: u64 },
    #[error("reading results: {0}")]
    Io(#[source] std::io::Error),
}

impl ReadError {
    /// The error as a runtime error of `command`.
    #[must_use]
    pub fn of(self, command: &str) -> RuntimeError {
        RuntimeError::Results {
            command: command.to_string(),
            source: self,
        }
    }
}

/// Most stderr kept for an error message.
const STDERR_LIMIT: u64 = 16 * 1024;
/// Time beyond the plan's own deadline before an agent session is abandoned.
const GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// How long one agent session may take.
#[must_use]
pub fn session_deadline(plan: &Plan) -> std::time::Duration {
    std::time::Duration::from_millis(plan.deadline_ms.get()) + GRACE
}

/// The plan as the agent reads it, or a protocol error naming `command`.
pub fn plan_text(plan: &Plan, command: &str) -> Result<String, RuntimeError> {
    serde_json::to_string(plan).map_err(|e| RuntimeError::Protocol {
        command: command.to_string(),
        message: e.to_string(),
    })
}

/// What one conversation with an agent produced.
pub struct Conversation {
    /// `Err` when a result line could not be read.
    pub read: Result<usize, ReadError>,
    /// The start of the agent's stderr, for an error message.
    pub stderr: String,
}

/// Writes the plan while reading the results and stderr, all three at once, so no pipe can fill
/// up and stall the others. Stdin stays open until every one of the `expected` results (one per
/// planned probe) has been read, or the results end: the agent waits for that close to exit, so
/// it never exits (and, over `pods/exec`, has the kubelet end the connection) while its last
/// lines are still on their way. Over `pods/exec` without the v5 stream protocol closing stdin
/// closes everything, which is then no loss. `read` counts the results read so far, for a
/// caller whose stream may end before the conversation does.
pub async fn converse<W, O, E>(
    mut stdin: W,
    stdout: O,
    stderr: Option<E>,
    (plan, expected, read): (&str, usize, &std::sync::atomic::AtomicUsize),
    results: &mpsc::Sender<ProbeResult>,
) -> Conversation
where
    W: tokio::io::AsyncWrite + Unpin,
    O: tokio::io::AsyncRead + Unpin,
    E: tokio::io::AsyncRead + Unpin,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let all_read = tokio::sync::Notify::new();
    let writer = async {
        let _ = stdin.write_all(plan.as_bytes()).await;
        let _ = stdin.write_all(b"\n").await;
        let _ = stdin.flush().await;
        all_read.notified().await;
        let _ = stdin.shutdown().await;
        drop(stdin);
    };
    let reader = async {
        let until = Until {
            expected,
            all_read: &all_read,
            read,
        };
        let read = read_results_until(stdout, results, budget_of(plan), until).await;
        // Ended otherwise (the agent exited, a line unreadable): stdin is of no more use.
        all_read.notify_one();
        read
    };
    let mut err_text = String::new();
    let err_reader = async {
        if let Some(e) = stderr {
            let _ = e.take(STDERR_LIMIT).read_to_string(&mut err_text).await;
        }
    };
    let ((), read, ()) = tokio::join!(writer, reader, err_reader);
    Conversation {
        read,
        stderr: err_text.trim().to_string(),
    }
}

/// Reads the agent's stdout — one JSON result per line, in chunks of any size — and sends each
/// result on. Returns how many; an unreadable line is a protocol error. No line is held beyond
/// [`probe_proto::MAX_RESULT_LINE_BYTES`], and nothing is read past `budget` bytes in all: a
/// runaway or hostile agent costs a bounded amount of memory.
pub async fn read_results<R: tokio::io::AsyncRead + Unpin>(
    stdout: R,
    results: &mpsc::Sender<ProbeResult>,
    budget: u64,
) -> Result<usize, ReadError> {
    let until = Until {
        expected: usize::MAX,
        all_read: &tokio::sync::Notify::new(),
        read: &std::sync::atomic::AtomicUsize::new(0),
    };
    read_results_until(stdout, results, budget, until).await
}

/// What reading the results tells as it goes: the count so far, and when `expected` are in.
struct Until<'a> {
    expected: usize,
    all_read: &'a tokio::sync::Notify,
    read: &'a std::sync::atomic::AtomicUsize,
}

fn budget_of(plan: &str) -> u64 {
    probe_proto::result_budget(plan.len())
}

/// [`read_results`], notifying `all_read` once `expected` results have been read.
async fn read_results_until<R: tokio::io::AsyncRead + Unpin>(
    stdout: R,
    results: &mpsc::Sender<ProbeResult>,
    budget: u64,
    until: Until<'_>,
) -> Result<usize, ReadError> {
    use tokio::io::AsyncBufReadExt;
    const MAX: usize = probe_proto::MAX_RESULT_LINE_BYTES;
    let mut reader = tokio::io::BufReader::new(stdout);
    let mut line: Vec<u8> = Vec::new();
    let (mut n, mut line_no, mut total) = (0, 0, 0_u64);
    loop {
        let buf = reader.fill_buf().await.map_err(ReadError::Io)?;
        let eof = buf.is_empty();
        let (chunk, used, ended) = match buf.iter().position(|&b| b == b'\n') {
            Some(at) => (&buf[..at], at + 1, true),
            None => (buf, buf.len(), eof),
        };
        total += used as u64;
        if total > budget {
            return Err(ReadError::TooMuch { budget });
        }
        if line.len() + chunk.len() > MAX {
            return Err(ReadError::LineTooLong {
                line: line_no + 1,
                max: MAX,
            });
        }
        line.extend_from_slice(chunk);
        reader.consume(used);
        if !ended {
            continue;
        }
        line_no += 1;
        if !line.trim_ascii().is_empty() {
            let r: ProbeResult =
                serde_json::from_slice(&line).map_err(|source| ReadError::Line {
                    line: line_no,
                    source,
                })?;
            n += 1;
            let _ = results.send(r).await;
            until.read.store(n, std::sync::atomic::Ordering::Relaxed);
            if n == until.expected {
                until.all_read.notify_one();
            }
        }
        line.clear();
        if eof {
            return Ok(n);
        }
    }
}

/// Runs plans on agents.
pub trait Runtime: Send + Sync {
    /// Runs `plan` on `agent`, sending each result as it arrives. Results already sent stand even
    /// when the run then fails. The plan is the runtime's to drop once it has written it out, so
    /// the plans of the agents in flight are held as text, not twice.
    fn run(
        &self,
        agent: &AgentRef,
        plan: Plan,
        results: mpsc::Sender<ProbeResult>,
    ) -> impl Future<Output = Result<(), RuntimeError>> + Send;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn results_split_across_frames_are_reassembled() {
        let (mut w, r) = tokio::io::duplex(64);
        let (tx, mut rx) = mpsc::channel(8);
        let reader = tokio::spawn(async move { read_results(r, &tx, 1 << 20).await });
        // Frames cut lines anywhere, as the exec stream's stdout channel does.
        let text = "{\"id\":\"a\",\"outcome\":\"ok\",\"detail\":\"x\"}\n\n{\"id\":\"b\",\"outcome\":\"timeout\",\"detail\":\"y\"}\n";
        for chunk in text.as_bytes().chunks(7) {
            w.write_all(chunk).await.unwrap();
        }
        drop(w);
        assert_eq!(reader.await.unwrap().unwrap(), 2);
        assert_eq!(rx.recv().await.unwrap().id, "a");
        assert_eq!(
            rx.recv().await.unwrap().outcome,
            probe_proto::Outcome::Timeout
        );
    }

    /// An endless stream of `a` with no line break.
    struct Endless;

    impl tokio::io::AsyncRead for Endless {
        fn poll_read(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            buf.put_slice(&vec![b'a'; buf.remaining()]);
            std::task::Poll::Ready(Ok(()))
        }
    }

    /// A 400 MB line once cost 403 MB; now no line is held past the cap, and no agent is read
    /// past its budget. Runs where 256 MiB more is all it may take.
    #[test]
    fn a_runaway_line_costs_a_bounded_amount_of_memory() {
        if !crate::testutil::in_child_with_memory_limit(
            "runtime::tests::a_runaway_line_costs_a_bounded_amount_of_memory",
            256 << 20,
        ) {
            return;
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (tx, _rx) = mpsc::channel(8);
        let err = rt
            .block_on(read_results(Endless, &tx, 1 << 40))
            .unwrap_err();
        assert!(
            matches!(err, ReadError::LineTooLong { line: 1, max } if max == probe_proto::MAX_RESULT_LINE_BYTES),
            "{err:?}"
        );
        // Lines of a sane length, but more of them than the plan allows in all.
        let line = "{\"id\":\"a\",\"outcome\":\"ok\",\"detail\":\"x\"}\n".repeat(1000);
        let (tx, mut rx) = mpsc::channel(2000);
        let err = rt
            .block_on(read_results(line.as_bytes(), &tx, 10_000))
            .unwrap_err();
        assert!(
            matches!(err, ReadError::TooMuch { budget: 10_000 }),
            "{err:?}"
        );
        assert!(rx.try_recv().is_ok(), "what came before the budget stands");
    }

    #[tokio::test]
    async fn a_garbled_line_is_a_protocol_error() {
        let (tx, _rx) = mpsc::channel(8);
        let err = read_results(&b"\nnot json\n"[..], &tx, 1 << 20)
            .await
            .unwrap_err();
        assert!(matches!(err, ReadError::Line { line: 2, .. }), "{err:?}");
        let err = err.of("probe-pod probe --plan -").to_string();
        assert!(
            err.starts_with("`probe-pod probe --plan -`: unreadable result line 2:"),
            "{err}"
        );
    }
}
