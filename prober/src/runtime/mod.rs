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
