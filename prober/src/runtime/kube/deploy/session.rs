//! One run's agents through the API, from start to finish, for `matrix` and `preflight` alike:
//! use the permanent install when it runs, else create this run's own objects; wait for the
//! agents; attach them to the inventory; run the caller's body; and, whatever happened, remove
//! exactly what this run created (unless told to keep it).

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use kube::Client;

use super::{AgentPod, Created, DeployError, apply, attach_agents, cleanup, permanent, wait};
use crate::inventory::Inventory;
use crate::model::{AgentRef, AgentStatus};
use crate::runtime::kube::manifests::AgentSpec;

/// Where the agents are and what the run may do about them.
#[derive(Debug, Clone)]
pub struct Session {
    pub namespace: String,
    pub image: String,
    /// Fail unless a permanent install runs (create nothing).
    pub use_existing: bool,
    /// Leave this run's own agents running afterwards.
    pub keep_agents: bool,
    /// How long to wait for the agents to be ready.
    pub wait: Duration,
    /// Names this run's objects when it has to create them.
    pub run_id: String,
    /// This run's own agents exit by themselves after this (`30m`, `2h`), should the cleanup
    /// never run (a killed coordinator).
    pub ttl: String,
    /// The most time removing this run's objects may take.
    pub cleanup_deadline: Duration,
    /// Secrets the kubelet pulls the agents' image with (`--image-pull-secret`).
    pub image_pull_secrets: Vec<String>,
    /// The port this run's own host agents serve on (`--host-agent-port`); `None`: the
    /// default, or the first one no other live prober host agents hold.
    pub host_port: Option<u16>,
}

/// Why a session ended without the body's answer.
#[derive(Debug, thiserror::Error)]
pub enum SessionError<E> {
    #[error(transparent)]
    Deploy(#[from] DeployError),
    #[error("interrupted while creating or waiting for the agents")]
    Interrupted,
    /// The body's own error.
    #[error(transparent)]
    Body(E),
}

/// The ready agents, as the body gets them: the inventory already points at them.
pub struct Agents {
    pub namespace: String,
    pub ready: BTreeMap<AgentRef, AgentPod>,
    /// The agents that never became ready, and why: their probes are unknown, not failed.
    pub missing: Vec<AgentStatus>,
}

/// Runs `body` with the cluster's agents attached to `inv` (on the nodes `inv` lists): the
/// permanent install's, or this run's own, created first and removed afterwards on every exit
/// path (a failed apply, an interruption and the body's error included). `note` gets the lines
/// an operator should read on stderr (which agents, what was left behind); `progress(ready,
/// wanted)` while waiting; `cancel` makes a future that resolves on an interruption.
pub async fn with_agents<T, E, F>(
    client: &Client,
    s: &Session,
    inv: &mut Inventory,
    note: &mut dyn FnMut(String),
    progress: &dyn Fn(usize, usize),
    cancel: impl Fn() -> F,
    body: impl AsyncFnOnce(&Inventory, Agents) -> Result<T, E>,
) -> Result<T, SessionError<E>>
where
    F: Future<Output = ()>,
{
    let namespace = s.namespace.clone();
    // Permanent agents (deploy/base) are used as they are: a run must not roll them.
    let existing = permanent(client, &namespace).await?;
    if s.use_existing && !existing {
        return Err(DeployError::NoPermanentAgents { namespace }.into());
    }
    if existing && !s.use_existing {
        note(format!(
            "using the permanent agents in {namespace} (as with --use-existing); this run creates and removes nothing"
        ));
    }
    let host_port = if existing {
        if s.host_port.is_some() {
            note("--host-agent-port: the permanent agents serve on their own port".into());
        }
        probe_proto::DEFAULT_AGENT_PORT
    } else {
        let holders = super::ports::holders(client, &namespace, Some(&s.run_id)).await?;
        super::ports::choose(s.host_port, &holders, note)?
    };
    let spec = AgentSpec {
        host_port,
        namespace,
        image: s.image.clone(),
        ttl: (!existing).then(|| s.ttl.clone()),
        run: (!existing).then(|| s.run_id.clone()),
        // The files of the distribution discovery found (none if it found none).
        node_files: inv.cluster.node_files.clone(),
        tunnel: super::super::manifests::tunnel_flag(inv.cluster.overlay.as_ref()),
        expires: (!existing)
            .then(|| super::runs::expires_at(k8s_openapi::jiff::Timestamp::now(), &s.ttl))
            .flatten(),
        image_pull_secrets: s.image_pull_secrets.clone(),
    };
    let mut created = Created::default();
    let outcome = async {
        if !existing {
            // An interruption while creating: stop at once; cleanup below removes what was
            // created, a create still in flight included (it finds this run's objects by label).
            tokio::select! {
                biased;
                () = cancel() => return Err(SessionError::Interrupted),
                a = Box::pin(apply(client, &spec, &mut created, note)) => a?,
            }
            // Discovery ran before it existed: diagnosis must see the allow policy in force.
            if created.network_policy.is_some() {
                inv.cluster
                    .policies
                    .push(super::super::manifests::allow_policy_as_read(&spec));
            }
        }
        let nodes: Vec<String> = inv.nodes.iter().map(|n| n.name.clone()).collect();
        // An interruption while the agents start: stop waiting, clean up below.
        let (ready, missing) = tokio::select! {
            w = wait(client, &spec, &nodes, s.wait, progress) => w?,
            () = cancel() => return Err(SessionError::Interrupted),
        };
        attach_agents(inv, &ready, &spec.namespace);
        let agents = Agents {
            namespace: spec.namespace.clone(),
            ready,
            missing,
        };
        body(inv, agents).await.map_err(SessionError::Body)
    }
    .await;
    if !existing && !s.keep_agents {
        match tokio::time::timeout(s.cleanup_deadline, cleanup(client, &spec, &created)).await {
            Ok(Ok(deleted)) if !deleted.is_empty() => {
                note(format!("removed {}", deleted.join(", ")));
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => note(format!("cleanup: {e} (run `prober cleanup`)")),
            Err(_) => note("cleanup did not finish in time (run `prober cleanup`)".into()),
        }
    }
    outcome
}
