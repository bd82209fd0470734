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
use crate::runtime::kube::deploy::{self, Created, DeployError};
use crate::runtime::kube::exec::KubeExec;
use crate::runtime::kube::manifests::AgentSpec;
use crate::runtime::split::Split;

use super::{RunConfig, RunOutput};

/// The agents this run's own `DaemonSets` start exit by themselves after this, should the
/// cleanup never run (a killed coordinator).
const RUN_TTL: &str = "30m";
/// The most time removing this run's objects may take.
const CLEANUP_DEADLINE: Duration = Duration::from_secs(20);

/// Where the existing nodes' agents are and what the run may do about them.
#[derive(Debug, Clone)]
pub struct ApiAgents {
    pub namespace: String,
    pub image: String,
    /// Fail unless a permanent install runs (create nothing).
    pub use_existing: bool,
    /// Leave this run's own agents running afterwards.
    pub keep_agents: bool,
    pub wait: Duration,
    /// Names this run's objects when it has to create them.
    pub run_id: String,
}

/// What a run through the API produced.
pub struct ApiRun {
    pub out: RunOutput,
    /// The cluster with its agents attached and the candidate added, for the report.
    pub inventory: Inventory,
    /// Lines for stderr: which agents were used, what was created and removed.
    pub notes: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Deploy(#[from] DeployError),
    #[error("interrupted while waiting for the agents")]
    Interrupted,
}

/// Runs preflight for `candidate` joining the cluster `inv` (discovered through `client`): the
/// existing nodes' host agents through `pods/exec`, the candidate through `on_candidate`.
/// Whatever happens, removes exactly the objects this run created (unless told to keep them).
/// `cancel` makes a future that resolves on an interruption; it is called once per phase.
pub async fn through_api<C, F>(
    client: &kube::Client,
    mut inv: Inventory,
    candidate: &Candidate,
    on_candidate: C,
    agents: &ApiAgents,
    cfg: &RunConfig,
    cancel: impl Fn() -> F,
) -> Result<ApiRun, ApiError>
where
    C: Runtime + 'static,
    F: Future<Output = ()> + Send,
{
    let namespace = agents.namespace.clone();
    let existing = deploy::permanent(client, &namespace).await?;
    if agents.use_existing && !existing {
        return Err(DeployError::NoPermanentAgents { namespace }.into());
    }
    let mut notes = Vec::new();
    if existing {
        notes.push(format!(
            "using the permanent agents in {namespace}; this run creates and removes nothing"
        ));
    }
    let spec = AgentSpec {
        namespace,
        image: agents.image.clone(),
        ttl: (!existing).then(|| RUN_TTL.to_string()),
        run: (!existing).then(|| agents.run_id.clone()),
        node_files: inv.cluster.node_files.clone(),
    };
    let mut created = Created::default();
    let outcome = async {
        if !existing {
            deploy::apply(client, &spec, &mut created).await?;
        }
        // The existing nodes only: the candidate is no node, no agent pod can run there.
        let existing_nodes: Vec<String> = inv.nodes.iter().map(|n| n.name.clone()).collect();
        let (ready, missing) = tokio::select! {
            w = deploy::wait(client, &spec, &existing_nodes, agents.wait, &|_, _| {}) => w?,
            () = cancel() => return Err(ApiError::Interrupted),
        };
        deploy::attach_agents(&mut inv, &ready, &spec.namespace);
        let planned = preflight(&inv, candidate);
        let runtime = Split {
            node: candidate.name.clone(),
            own: on_candidate,
            others: KubeExec::new(client.clone(), &spec.namespace, ready),
        };
        let mut out = super::run(&planned, Arc::new(runtime), cfg, &(), cancel()).await;
        // Preflight uses the host agents only: a missing pod agent changes nothing.
        out.agents.extend(
            missing
                .into_iter()
                .filter(|m: &AgentStatus| m.agent == AgentKind::Host),
        );
        Ok(out)
    }
    .await;
    if !existing && !agents.keep_agents {
        match tokio::time::timeout(CLEANUP_DEADLINE, deploy::cleanup(client, &spec, &created)).await
        {
            Ok(Ok(deleted)) if !deleted.is_empty() => {
                notes.push(format!("removed {}", deleted.join(", ")));
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => notes.push(format!("cleanup: {e} (run `prober cleanup`)")),
            Err(_) => notes.push("cleanup did not finish in time (run `prober cleanup`)".into()),
        }
    }
    let out = outcome?;
    Ok(ApiRun {
        out,
        inventory: with_candidate(&inv, candidate),
        notes,
    })
}
