//! The local runtime: an exec prefix (`ip netns exec NS`, later `ssh host`) in front of the agent
//! binary, for the lab and for hosts reachable without Kubernetes.

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use probe_pod::proto::{Plan, ProbeResult};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use tokio::sync::mpsc;

use super::{Runtime, RuntimeError};
use crate::inventory::Inventory;
use crate::plan::{AgentKind, AgentRef};

/// Most stderr kept for an error message.
const STDERR_LIMIT: u64 = 16 * 1024;
/// Time beyond the plan's own deadline before the agent is killed.
const GRACE: Duration = Duration::from_secs(5);

pub struct Local {
    /// The agent binary as the exec prefix sees it (a path, or a name on its PATH).
    pub agent_bin: String,
    prefixes: HashMap<AgentRef, Vec<String>>,
}

impl Local {
    #[must_use]
    pub fn new(inv: &Inventory, agent_bin: impl Into<String>) -> Self {
        let mut prefixes = HashMap::new();
        for n in &inv.nodes {
            for (kind, agent) in [
                (AgentKind::Host, &n.agents.host),
                (AgentKind::Pod, &n.agents.pod),
            ] {
                if let Some(a) = agent {
                    prefixes.insert(
                        AgentRef {
                            node: n.name.clone(),
                            agent: kind,
                        },
                        a.exec.clone(),
                    );
                }
            }
        }
        Self {
            agent_bin: agent_bin.into(),
            prefixes,
        }
    }
}

impl Runtime for Local {
    async fn run(
        &self,
        agent: &AgentRef,
        plan: &Plan,
        results: mpsc::Sender<ProbeResult>,
    ) -> Result<(), RuntimeError> {
        let prefix = self
            .prefixes
            .get(agent)
            .ok_or_else(|| RuntimeError::NoAgent(agent.clone()))?;
        let mut argv: Vec<&str> = prefix.iter().map(String::as_str).collect();
        argv.extend([self.agent_bin.as_str(), "probe", "--plan", "-"]);
        let command = argv.join(" ");
        let text = serde_json::to_string(plan).map_err(|e| RuntimeError::Protocol {
            command: command.clone(),
            message: e.to_string(),
        })?;
        let mut child = Command::new(argv[0])
            .args(&argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| RuntimeError::Start {
                command: command.clone(),
                source,
            })?;
        let mut stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        let deadline = Duration::from_millis(plan.deadline_ms.get()) + GRACE;
        let work = async {
            // Write the plan while reading: a large plan must not deadlock against a full pipe.
            let writer = async {
                let _ = stdin.write_all(text.as_bytes()).await;
                drop(stdin);
            };
            let reader = async { super::read_results(stdout, &results).await.map(drop) };
            let mut err_text = String::new();
            let mut limited = (&mut stderr).take(STDERR_LIMIT);
            let err_reader = limited.read_to_string(&mut err_text);
            let ((), read, _) = tokio::join!(writer, reader, err_reader);
            let status = child.wait().await;
            (read, status, err_text)
        };
        let Ok((read, status, err_text)) = tokio::time::timeout(deadline, work).await else {
            return Err(RuntimeError::Deadline {
                command,
                secs: deadline.as_secs(),
            });
        };
        if let Err(message) = read {
            return Err(RuntimeError::Protocol { command, message });
        }
        match status {
            Ok(s) if s.success() => Ok(()),
            Ok(s) => Err(RuntimeError::Exit {
                command,
                status: s.to_string(),
                stderr: err_text.trim().to_string(),
            }),
            Err(e) => Err(RuntimeError::Exit {
                command,
                status: "unknown".into(),
                stderr: e.to_string(),
            }),
        }
    }
}
