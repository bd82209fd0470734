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

/// The longest `Retry-After` followed: a longer one is cut to this (the session's deadline
/// bounds the whole anyway).
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

/// How long to wait before retrying after `e`: the server's `Retry-After` when it sent one (a
/// 429 or 503 `Status` carries it as `details.retryAfterSeconds`, the header's value:
/// `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go`), else
/// `backoff`.
fn wait_before_retry(e: &kube::Error, backoff: Duration) -> Duration {
    match e {
        kube::Error::Api(s) => match s.details.as_ref().map(|d| d.retry_after_seconds) {
            Some(secs) if secs > 0 => Duration::from_secs(u64::from(secs)).min(MAX_RETRY_AFTER),
            _ => backoff,
        },
        _ => backoff,
    }
}

impl KubeExec {
    /// Starts the exec session, retrying transient API errors after the server's `Retry-After`,
    /// else with backoff (0.5 s, 1 s, 2 s).
    async fn start(
        &self,
        pod: &str,
        ap: &AttachParams,
    ) -> Result<kube::api::AttachedProcess, kube::Error> {
        let mut delay = Duration::from_millis(500);
        for _ in 0..3 {
            match self.pods.exec(pod, COMMAND, ap).await {
                Err(e) if transient(&e) => {
                    tokio::time::sleep(wait_before_retry(&e, delay)).await;
                    delay *= 2;
                }
                other => return other,
            }
        }
        self.pods.exec(pod, COMMAND, ap).await
    }
}

/// How long the results already on their way may take to arrive once the exec stream has
/// ended: the agent's last lines are in the pipe by then, so this is only the copy.
const DRAIN: Duration = Duration::from_secs(2);

/// How one exec session ended, as the stream and the status channel tell it.
#[derive(Debug)]
enum Ended {
    /// The command's own status arrived (channel 3): success or its failure.
    Status(Box<k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>),
    /// The stream closed cleanly without a status: the command's fate is unknown.
    ClosedWithoutStatus,
    /// The stream broke (a read or write on the WebSocket failed): its cause.
    Broke(String),
}

/// Waits for the conversation (`talk`: the plan written, every result read) and the exec
/// stream (`joined`: kube's message loop; `status`: the command's status) together. kube ends
/// its loop on a broken stream without closing stdout, so waiting for the results' end alone
/// would wait until the session's deadline; and a stream that closes without a status is not a
/// command that succeeded. Results read before the end are kept (they were sent on already).
async fn supervise<T, E, C, J, S>(talk: C, joined: J, status: S) -> (Option<T>, Ended)
where
    E: std::fmt::Display,
    C: std::future::Future<Output = T>,
    J: std::future::Future<Output = Result<(), E>>,
    S: std::future::Future<Output = Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>>,
{
    tokio::pin!(talk, joined);
    let (talked, loop_end) = tokio::select! {
        // The results end when kube closes stdout, after the stream's end; or earlier, on a
        // line that cannot be read, and then the stream is not waited for long.
        t = &mut talk => {
            let j = match tokio::time::timeout(DRAIN, &mut joined).await {
                Ok(j) => j.map_err(|e| e.to_string()),
                Err(_) => Err("the stream stayed open after the results ended".to_string()),
            };
            (Some(t), j)
        }
        j = &mut joined => {
            // The stream is over: whatever the agent wrote is in the pipe, or lost.
            let t = tokio::time::timeout(DRAIN, &mut talk).await.ok();
            (t, j.map_err(|e| e.to_string()))
        }
    };
    let ended = match loop_end {
        Err(e) => Ended::Broke(e),
        Ok(()) => match status.await {
            Some(s) => Ended::Status(Box::new(s)),
            None => Ended::ClosedWithoutStatus,
        },
    };
    (talked, ended)
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
        let expected = plan.probes.len();
        let progress = crate::runtime::clock::Progress::default();
        drop(plan);
        let protocol = |message: String| RuntimeError::Protocol {
            command: command.clone(),
            message,
        };
        // The results read so far, known even when the stream ends before the conversation.
        let read = std::sync::atomic::AtomicUsize::new(0);
        let work = async {
            let mut proc = self
                .start(pod, &ap)
                .await
                .map_err(|e| RuntimeError::Start {
                    command: command.clone(),
                    source: std::io::Error::other(e.to_string()),
                })?;
            let stdin = proc
                .stdin()
                .ok_or_else(|| protocol("no stdin channel".into()))?;
            let stdout = proc
                .stdout()
                .ok_or_else(|| protocol("no stdout channel".into()))?;
            let stderr = proc.stderr();
            let status = proc
                .take_status()
                .ok_or_else(|| protocol("no status channel".into()))?;
            let talk = crate::runtime::converse(
                stdin,
                progress.watch(stdout),
                stderr,
                (&text, expected, &read),
                &results,
            );
            let (talk, ended) = supervise(talk, proc.join(), status).await;
            let stderr = talk.as_ref().map(|t| t.stderr.clone()).unwrap_or_default();
            let unreadable = talk.as_ref().is_some_and(|t| t.read.is_err());
            // Every planned result arrived: how the stream ended then loses nothing (the
            // kubelet ends the connection once the command exits, and on v4 closing stdin,
            // which says every result was read, closes the whole session).
            let complete =
                !unreadable && read.load(std::sync::atomic::Ordering::Relaxed) >= expected;
            match ended {
                Ended::ClosedWithoutStatus | Ended::Broke(_) if complete => Ok(()),
                Ended::Status(s) if s.status.as_deref() == Some("Failure") => {
                    Err(RuntimeError::Exit {
                        command: command.clone(),
                        status: s
                            .message
                            .clone()
                            .unwrap_or_else(|| s.reason.clone().unwrap_or_default()),
                        stderr,
                    })
                }
                _ if unreadable => match talk.map(|t| t.read) {
                    Some(Err(e)) => Err(e.of(&command)),
                    _ => Ok(()),
                },
                Ended::Status(_) => match talk {
                    Some(t) => t.read.map(|_| ()).map_err(|e| e.of(&command)),
                    None => Err(protocol("the command ended but its results did not".into())),
                },
                Ended::ClosedWithoutStatus => Err(protocol(format!(
                    "the exec stream closed without the command's exit status (the API server \
                     or the kubelet ended the session); the results read before it are kept{}",
                    tail(&stderr)
                ))),
                Ended::Broke(cause) => Err(protocol(format!(
                    "the exec stream broke: {cause}; the results read before it are kept{}",
                    tail(&stderr)
                ))),
            }
        };
        match crate::runtime::clock::within(deadline, &progress, work).await {
            Ok(r) => r,
            Err(cut) => Err(cut.error(command)),
        }
    }
}

/// The agent's stderr, when it said anything, for an error message.
fn tail(stderr: &str) -> String {
    if stderr.is_empty() {
        String::new()
    } else {
        format!(" (the agent's stderr: {stderr})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;

    fn success() -> Status {
        Status {
            status: Some("Success".into()),
            ..Status::default()
        }
    }

    fn throttled(retry_after_seconds: Option<u32>) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code: 429,
            reason: "TooManyRequests".into(),
            details: retry_after_seconds.map(|secs| kube::core::response::StatusDetails {
                name: String::new(),
                group: String::new(),
                kind: String::new(),
                uid: String::new(),
                causes: Vec::new(),
                retry_after_seconds: secs,
            }),
            ..kube::core::Status::default()
        }))
    }

    #[test]
    fn a_retry_waits_as_long_as_the_server_says() {
        let backoff = Duration::from_millis(500);
        assert_eq!(
            wait_before_retry(&throttled(Some(3)), backoff),
            Duration::from_secs(3)
        );
        assert_eq!(wait_before_retry(&throttled(None), backoff), backoff);
        assert_eq!(wait_before_retry(&throttled(Some(0)), backoff), backoff);
        assert_eq!(
            wait_before_retry(&throttled(Some(3600)), backoff),
            MAX_RETRY_AFTER
        );
    }

    #[tokio::test]
    async fn a_stream_that_breaks_mid_run_ends_the_session_with_its_cause() {
        // kube's loop returned an error and never closed stdout: the results never end.
        let talk = std::future::pending::<&str>();
        let joined = async { Err(std::io::Error::other("connection reset by peer")) };
        let status = async { None };
        let started = tokio::time::Instant::now();
        let (talked, ended) = supervise(talk, joined, status).await;
        assert!(talked.is_none());
        assert!(started.elapsed() <= DRAIN + Duration::from_secs(1));
        match ended {
            Ended::Broke(cause) => assert!(cause.contains("connection reset"), "{cause}"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_close_without_status_is_not_success() {
        let (talked, ended) = supervise(async { "read" }, async { Ok::<(), String>(()) }, async {
            None
        })
        .await;
        assert_eq!(talked, Some("read"));
        assert!(matches!(ended, Ended::ClosedWithoutStatus), "{ended:?}");
    }

    #[tokio::test]
    async fn results_arriving_after_the_stream_ended_are_kept() {
        // The loop ends first (status sent, stdout closed); the last lines are still copied.
        let talk = async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            "all results"
        };
        let (talked, ended) = supervise(talk, async { Ok::<(), String>(()) }, async {
            Some(success())
        })
        .await;
        assert_eq!(talked, Some("all results"));
        assert!(matches!(ended, Ended::Status(s) if s.status.as_deref() == Some("Success")));
    }
}
