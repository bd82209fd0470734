//! How agents are started and reached. Every runtime honours one contract (DESIGN.md section 4):
//! run `<exec prefix> probe-pod probe --plan -`, write the plan to stdin, read one JSON result per
//! line from stdout. Only the way a command reaches the agent differs.

pub mod kube;
pub mod local;

use std::future::Future;

use probe_pod::proto::{Plan, ProbeResult};
use tokio::sync::mpsc;

use crate::plan::AgentRef;

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
    #[error("`{command}` did not finish within {secs} s")]
    Deadline { command: String, secs: u64 },
    #[error("`{command}`: {message}")]
    Protocol { command: String, message: String },
    #[error("the inventory names no exec prefix for agent {0}")]
    NoAgent(AgentRef),
}

/// Reads the agent's stdout — one JSON result per line, in chunks of any size — and sends each
/// result on. Returns how many; an unreadable line is a protocol error.
pub async fn read_results<R: tokio::io::AsyncRead + Unpin>(
    stdout: R,
    results: &mpsc::Sender<ProbeResult>,
) -> Result<usize, String> {
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let mut n = 0;
    loop {
        match lines.next_line().await {
            Ok(Some(line)) if line.trim().is_empty() => {}
            Ok(Some(line)) => {
                let r: ProbeResult = serde_json::from_str(&line)
                    .map_err(|e| format!("unreadable result line: {e}"))?;
                n += 1;
                let _ = results.send(r).await;
            }
            Ok(None) => return Ok(n),
            Err(e) => return Err(format!("reading results: {e}")),
        }
    }
}

/// Runs plans on agents.
pub trait Runtime: Send + Sync {
    /// Runs `plan` on `agent`, sending each result as it arrives. Results already sent stand even
    /// when the run then fails.
    fn run(
        &self,
        agent: &AgentRef,
        plan: &Plan,
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
        let reader = tokio::spawn(async move { read_results(r, &tx).await });
        // Frames cut lines anywhere, as the exec stream's stdout channel does.
        let text = "{\"id\":\"a\",\"outcome\":\"ok\",\"detail\":\"x\"}\n\n{\"id\":\"b\",\"outcome\":\"timeout\",\"detail\":\"y\"}\n";
        for chunk in text.as_bytes().chunks(7) {
            w.write_all(chunk).await.unwrap();
        }
        drop(w);
        assert_eq!(reader.await.unwrap(), Ok(2));
        assert_eq!(rx.recv().await.unwrap().id, "a");
        assert_eq!(
            rx.recv().await.unwrap().outcome,
            probe_pod::proto::Outcome::Timeout
        );
    }

    #[tokio::test]
    async fn a_garbled_line_is_a_protocol_error() {
        let (tx, _rx) = mpsc::channel(8);
        let err = read_results(&b"not json\n"[..], &tx).await.unwrap_err();
        assert!(err.contains("unreadable result line"), "{err}");
    }
}
