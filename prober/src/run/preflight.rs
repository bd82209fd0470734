//! Preflight's cluster side through the Kubernetes API: the existing nodes' host agents — the
//! permanent install, or else this run's own `DaemonSets` exactly as `matrix` creates them — are
//! reached through `pods/exec`; the candidate only through its own runtime (its exec prefix).
//! Nothing is applied for the candidate: it is not a node yet, so no object names it and no
//! `DaemonSet` schedules a pod there.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::inventory::Inventory;
use crate::model::{AgentKind, AgentStatus};
use crate::plan::preflight::{Candidate, preflight, with_candidate};
use crate::runtime::Runtime;
use crate::runtime::kube::deploy::{Session, SessionError, with_agents};
use crate::runtime::kube::exec::KubeExec;
use crate::runtime::split::Split;

use super::{RunConfig, RunOutput};

/// The agents this run's own `DaemonSets` start exit by themselves after this, should the
/// cleanup never run (a killed coordinator).
pub const RUN_TTL: &str = "30m";
/// The most time removing this run's objects may take.
pub const CLEANUP_DEADLINE: Duration = Duration::from_secs(20);

/// What a run through the API produced.
pub struct ApiRun {
    pub out: RunOutput,
    /// The cluster with its agents attached and the candidate added, for the report.
    pub inventory: Inventory,
    /// Lines for stderr: which agents were used, what was created and removed.
    pub notes: Vec<String>,
}

/// Why a run through the API produced no report.
pub type ApiError = SessionError<std::convert::Infallible>;

/// Runs preflight for `candidate` joining the cluster `inv` (discovered through `client`): the
/// existing nodes' host agents through `pods/exec`, the candidate through `on_candidate`.
/// Whatever happens, removes exactly the objects this run created (unless told to keep them).
/// `cancel` makes a future that resolves on an interruption; it is called once per phase.
pub async fn through_api<C, F>(
    client: &kube::Client,
    mut inv: Inventory,
    candidate: &Candidate,
    on_candidate: C,
    session: &Session,
    cfg: &RunConfig,
    cancel: impl Fn() -> F,
) -> Result<ApiRun, ApiError>
where
    C: Runtime + 'static,
    F: Future<Output = ()> + Send,
{
    let mut notes = Vec::new();
    // The existing nodes only: the candidate is no node, no agent pod can run there.
    let out = with_agents(
        client,
        session,
        &mut inv,
        &mut |n| notes.push(n),
        &|_, _| {},
        &cancel,
        async |inv: &Inventory, ready| {
            let planned = preflight(inv, candidate);
            let runtime = Split {
                node: candidate.name.clone(),
                own: on_candidate,
                others: KubeExec::new(client.clone(), &ready.namespace, ready.ready),
            };
            let mut out = super::run_owned(planned, Arc::new(runtime), cfg, &(), cancel()).await;
            // Preflight uses the host agents only: a missing pod agent changes nothing.
            out.agents.extend(
                ready
                    .missing
                    .into_iter()
                    .filter(|m: &AgentStatus| m.agent == AgentKind::Host),
            );
            Ok(out)
        },
    )
    .await?;
    Ok(ApiRun {
        out,
        inventory: with_candidate(&inv, candidate),
        notes,
    })
}
