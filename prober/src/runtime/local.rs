//! The local runtime: an exec prefix (`ip netns exec NS`, later `ssh host`) in front of the agent
//! binary, for the lab and for hosts reachable without Kubernetes.

use std::collections::HashMap;
use std::process::Stdio;

use probe_proto::{Plan, ProbeResult};
use tokio::process::Command;
use tokio::sync::mpsc;

use super::{Runtime, RuntimeError};
use crate::inventory::Inventory;
use crate::model::{AgentKind, AgentRef};

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
        plan: Plan,
        results: mpsc::Sender<ProbeResult>,
    ) -> Result<(), RuntimeError> {
        let prefix = self
            .prefixes
            .get(agent)
            .ok_or_else(|| RuntimeError::NoAgent(agent.clone()))?;
        let mut argv: Vec<&str> = prefix.iter().map(String::as_str).collect();
        argv.extend([self.agent_bin.as_str(), "probe", "--plan", "-"]);
        let command = argv.join(" ");
        let text = super::plan_text(&plan, &command)?;
        let expected = plan.probes.len();
        let deadline = super::session_deadline(&plan);
        drop(plan);
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
        let (stdin, stdout, stderr) = (
            child.stdin.take().expect("piped"),
            child.stdout.take().expect("piped"),
            child.stderr.take(),
        );
        let progress = super::clock::Progress::default();
        let stdout = progress.watch(stdout);
        let work = async {
            let talk = super::converse(
                stdin,
                stdout,
                stderr,
                (&text, expected, &std::sync::atomic::AtomicUsize::new(0)),
                &results,
            )
            .await;
            (talk, child.wait().await)
        };
        let (talk, status) = match super::clock::within(deadline, &progress, work).await {
            Ok(done) => done,
            Err(cut) => return Err(cut.error(command)),
        };
        if let Err(e) = talk.read {
            return Err(e.of(&command));
        }
        let err_text = talk.stderr;
        match status {
            Ok(s) if s.success() => Ok(()),
            Ok(s) if agent_not_started(s.code(), &err_text) => Err(RuntimeError::AgentBinary {
                command,
                bin: self.agent_bin.clone(),
                stderr: err_text.trim().to_string(),
            }),
            Ok(s) => Err(RuntimeError::Exit {
                command,
                status: s.to_string(),
                stderr: err_text,
            }),
            Err(e) => Err(RuntimeError::Exit {
                command,
                status: "unknown".into(),
                stderr: e.to_string(),
            }),
        }
    }
}

/// Whether an exec prefix failed to start the agent binary itself (as opposed to the agent
/// failing): `ip netns exec` says `exec of "X" failed` (status 255), a shell says `command not
/// found` / `No such file` (127) or `Permission denied` (126).
fn agent_not_started(code: Option<i32>, stderr: &str) -> bool {
    matches!(code, Some(126 | 127))
        || stderr.contains("exec of \"")
        || (code == Some(255) && stderr.contains("No such file or directory"))
}

#[cfg(test)]
mod tests {
    use super::agent_not_started;

    #[test]
    fn an_exec_prefix_that_could_not_start_the_agent_is_told_apart() {
        assert!(agent_not_started(
            Some(255),
            "exec of \"probe-pod\" failed: No such file or directory\n"
        ));
        assert!(agent_not_started(
            Some(127),
            "bash: probe-pod: command not found"
        ));
        assert!(agent_not_started(Some(126), "probe-pod: Permission denied"));
        assert!(!agent_not_started(
            Some(2),
            "probe-pod probe: plan: unknown field `x`"
        ));
        assert!(!agent_not_started(Some(1), ""));
    }
}
