//! Probing through `pods/exec` (API server -> kubelet -> container): the coordinator never relies
//! on the paths it measures to reach its agents.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, AttachParams};
use probe_proto::{Plan, ProbeResult};
use tokio::sync::mpsc;

use super::deploy::AgentPod;
use crate::model::AgentRef;
use crate::runtime::{Runtime, RuntimeError};

/// The agent container's name and command.
pub const CONTAINER: &str = "probe-pod";
pub const COMMAND: [&str; 4] = ["probe-pod", "probe", "--plan", "-"];

pub struct KubeExec {
    pods: Api<Pod>,
    agents: BTreeMap<AgentRef, AgentPod>,
}

impl KubeExec {
    #[must_use]
    pub fn new(
        client: kube::Client,
        namespace: &str,
        agents: BTreeMap<AgentRef, AgentPod>,
    ) -> Self {
        Self {
            pods: Api::namespaced(client, namespace),
            agents,
        }
    }
}

/// An API error worth retrying: throttling, server errors, and failed connections.
fn transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 429 || s.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

impl KubeExec {
    /// Starts the exec session, retrying transient API errors with backoff (0.5 s, 1 s, 2 s).
    async fn start(
        &self,
        pod: &str,
        ap: &AttachParams,
    ) -> Result<kube::api::AttachedProcess, kube::Error> {
        let mut delay = Duration::from_millis(500);
        for _ in 0..3 {
            match self.pods.exec(pod, COMMAND, ap).await {
                Err(e) if transient(&e) => {
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                }
                other => return other,
            }
        }
        self.pods.exec(pod, COMMAND, ap).await
    }
}

impl Runtime for KubeExec {
    async fn run(
        &self,
        agent: &AgentRef,
        plan: Plan,
        results: mpsc::Sender<ProbeResult>,
    ) -> Result<(), RuntimeError> {
        let pod = &self
            .agents
            .get(agent)
            .ok_or_else(|| RuntimeError::NoAgent(agent.clone()))?
            .pod;
        let command = format!("pods/exec {pod}: {}", COMMAND.join(" "));
        let text = crate::runtime::plan_text(&plan, &command)?;
        let ap = AttachParams::default()
            .container(CONTAINER)
            .stdin(true)
            .stdout(true)
            .stderr(true);
        let deadline = crate::runtime::session_deadline(&plan);
        drop(plan);
        let protocol = |message: &str| RuntimeError::Protocol {
            command: command.clone(),
            message: message.to_string(),
        };
        let work = async {
            let mut proc = self
                .start(pod, &ap)
                .await
                .map_err(|e| RuntimeError::Start {
                    command: command.clone(),
                    source: std::io::Error::other(e.to_string()),
                })?;
            let stdin = proc.stdin().ok_or_else(|| protocol("no stdin channel"))?;
            let stdout = proc.stdout().ok_or_else(|| protocol("no stdout channel"))?;
            let stderr = proc.stderr();
            let status = proc.take_status();
            let talk = crate::runtime::converse(stdin, stdout, stderr, &text, &results).await;
            talk.read.map_err(|e| e.of(&command))?;
            let status = match status {
                Some(s) => s.await,
                None => None,
            };
            match status {
                Some(s) if s.status.as_deref() == Some("Failure") => Err(RuntimeError::Exit {
                    command: command.clone(),
                    status: s.message.unwrap_or_else(|| s.reason.unwrap_or_default()),
                    stderr: talk.stderr,
                }),
                _ => Ok(()),
            }
        };
        match tokio::time::timeout(deadline, work).await {
            Ok(r) => r,
            Err(_) => Err(RuntimeError::Deadline {
                command,
                secs: deadline.as_secs(),
            }),
        }
    }
}
