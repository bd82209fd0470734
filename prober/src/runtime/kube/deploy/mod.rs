//! Agents in the cluster: finding a permanent install (then a run uses it and changes nothing),
//! else creating this run's own objects — each named and labelled with the run id, recorded as
//! it is created so that cleanup removes exactly those on every exit path, a failed apply
//! included — waiting for them, and removing them.

pub mod agents;
mod cleanup;
pub mod ports;
pub mod runs;
pub mod session;
pub mod wait;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};

pub use agents::{AgentPod, agents_from_pods, attach_agents};
pub use cleanup::{cleanup, cleanup_leftovers};
pub use session::{Session, SessionError, with_agents};
pub use wait::wait;

use super::manifests::{
    self, ALLOW_POLICY, AgentSpec, HOST_DAEMONSET, POD_DAEMONSET, RUN_LABEL, SERVICE_ACCOUNT,
};

/// The field manager of every object the prober writes.
pub const FIELD_MANAGER: &str = "prober";

#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    #[error("cannot {what}: {source}")]
    Api { what: String, source: kube::Error },
    #[error(
        "no agent can start: every agent pod is stuck pulling the image {image} ({message}); \
         build and publish it (deploy/Dockerfile) and pass --image, or let the nodes reach its \
         registry"
    )]
    ImagePull { image: String, message: String },
    #[error("cannot {what}: no answer within {secs} s")]
    Deadline { what: String, secs: u64 },
    #[error(
        "namespace {namespace} is still being deleted (a previous run's cleanup, most likely) \
         after waiting {secs} s: the API server refuses new objects in it until it is gone; run \
         again in a minute, or pass --namespace NAME to use another"
    )]
    Terminating { namespace: String, secs: u64 },
    #[error(
        "another prober run ({run}) has its agents in namespace {namespace}{until}: its host \
         agents hold the agents' port on every node, and removing it would stop that run; wait \
         for it to finish, pass --namespace NAME to run elsewhere, or, if it crashed, \
         `prober cleanup --all -n {namespace}`"
    )]
    OtherRun {
        namespace: String,
        run: String,
        until: String,
    },
    #[error(
        "port {port} is held on the nodes by {by}: host agents of this run could not listen \
         there; pass another --host-agent-port, or none to have a free one chosen"
    )]
    PortHeld { port: u16, by: String },
    #[error(
        "--use-existing: no permanent agents in namespace {namespace} (DaemonSets labelled \
         app.kubernetes.io/name=prober without a run label); install them with \
         `kubectl apply -k deploy/base`, or run without --use-existing"
    )]
    NoPermanentAgents { namespace: String },
}

pub(crate) fn api_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> DeployError {
    let what = what.into();
    move |source| DeployError::Api { what, source }
}

/// One API request under [`REQUEST_TIMEOUT`](crate::runtime::kube::REQUEST_TIMEOUT): the
/// client has no read timeout (it would break watches and exec), so each request brings its own.
pub(crate) async fn timed<T>(
    what: impl Into<String>,
    request: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, DeployError> {
    let limit = crate::runtime::kube::REQUEST_TIMEOUT;
    match tokio::time::timeout(limit, request).await {
        Ok(r) => r.map_err(api_err(what)),
        Err(_) => Err(DeployError::Deadline {
            what: what.into(),
            secs: limit.as_secs(),
        }),
    }
}

/// One object a run created: deleted by name, only while it is still the same object (uid).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owned {
    pub name: String,
    pub uid: Option<String>,
}

impl Owned {
    fn of(meta: &ObjectMeta, fallback: &str) -> Self {
        Self {
            name: meta.name.clone().unwrap_or_else(|| fallback.to_string()),
            uid: meta.uid.clone(),
        }
    }
}

/// What a run created so far, so cleanup removes exactly that.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Created {
    pub namespace: Option<Owned>,
    pub service_account: Option<Owned>,
    /// The agents' allow `NetworkPolicy` ([`manifests::network_policy`]).
    pub network_policy: Option<Owned>,
    pub daemonsets: Vec<Owned>,
}

/// Whether a permanent install (`deploy/base`: both agent `DaemonSets`, without a run label)
/// runs in `namespace`. One list; an absent namespace lists nothing.
pub async fn permanent(client: &Client, namespace: &str) -> Result<bool, DeployError> {
    let spec = AgentSpec {
        namespace: namespace.into(),
        ..AgentSpec::default()
    };
    let api = Api::<DaemonSet>::namespaced(client.clone(), namespace);
    let list = timed(
        format!("list the prober DaemonSets in {namespace}"),
        api.list(&ListParams::default().labels(&spec.selector())),
    )
    .await?;
    let has = |name: &str| {
        list.items
            .iter()
            .any(|d| d.metadata.name.as_deref() == Some(name))
    };
    Ok(has(HOST_DAEMONSET) && has(POD_DAEMONSET))
}

fn already_exists(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

fn api_code(e: &DeployError) -> Option<u16> {
    match e {
        DeployError::Api {
            source: kube::Error::Api(s),
            ..
        } => Some(s.code),
        _ => None,
    }
}

/// The refusal of the `NamespaceLifecycle` admission plugin for a create in a namespace being
/// deleted: 403, "unable to create new content in namespace X because it is being terminated"
/// (kubernetes/kubernetes
/// `staging/src/k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle/admission.go`).
fn being_terminated(e: &DeployError) -> bool {
    matches!(e, DeployError::Api { source: kube::Error::Api(s), .. }
        if s.code == 403 && s.message.contains("being terminated"))
}

/// Every create names the prober as its field manager.
fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    }
}

/// How long a run waits for a namespace being deleted to go before it creates it anew.
pub const TERMINATING_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// The agents' namespace, ready for this run's objects: used as it is when it exists (no
/// cluster-wide `create` needed), created (and owned) when it does not, and waited for when a
/// previous run's cleanup is still deleting it (its phase `Terminating`; creating in it is
/// refused until it is gone).
async fn ensure_namespace(
    client: &Client,
    spec: &AgentSpec,
    created: &mut Created,
    note: &mut dyn FnMut(String),
) -> Result<(), DeployError> {
    let ns = &spec.namespace;
    let api = Api::<Namespace>::all(client.clone());
    let pp = post_params();
    let give_up = tokio::time::Instant::now() + TERMINATING_WAIT;
    let mut said = false;
    loop {
        let readable = match timed(format!("get namespace {ns}"), api.get_opt(ns)).await {
            Ok(Some(n)) if n.metadata.deletion_timestamp.is_some() => {
                if tokio::time::Instant::now() >= give_up {
                    return Err(DeployError::Terminating {
                        namespace: ns.clone(),
                        secs: TERMINATING_WAIT.as_secs(),
                    });
                }
                if !said {
                    // An earlier run's agent pods on a node that is not Ready hold it forever:
                    // being deleted with their namespace, they are ended at once (best effort:
                    // without the right to, the wait says the rest).
                    let selector = format!("app.kubernetes.io/name=prober,{RUN_LABEL}");
                    let ended = cleanup::end_on_down_nodes(client, ns, &selector)
                        .await
                        .unwrap_or_default();
                    let ended = if ended.is_empty() {
                        String::new()
                    } else {
                        format!(
                            "; ended its {} on nodes that are not Ready",
                            ended.join(", ")
                        )
                    };
                    note(format!(
                        "namespace {ns} is still being deleted (a previous run's cleanup){ended}; waiting up to {} s for it to go",
                        TERMINATING_WAIT.as_secs()
                    ));
                    said = true;
                }
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                continue;
            }
            // It exists (a permanent install's, one made by hand, another run's): used, not
            // owned, and never deleted by this run.
            Ok(Some(_)) => return Ok(()),
            Ok(None) => true,
            // May not read it: creating it says whether it exists.
            Err(e) if api_code(&e) == Some(403) => false,
            Err(e) => return Err(e),
        };
        match timed(
            format!("create namespace {ns}"),
            api.create(&pp, &manifests::namespace(spec)),
        )
        .await
        {
            Ok(n) => {
                created.namespace = Some(Owned::of(&n.metadata, ns));
                return Ok(());
            }
            Err(DeployError::Api { source, .. }) if already_exists(&source) && !readable => {
                return Ok(());
            }
            // Created (or its deletion begun) since it was read: look again.
            Err(DeployError::Api { source, .. })
                if already_exists(&source) && tokio::time::Instant::now() < give_up =>
            {
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// The other runs whose agents (`DaemonSets`) are live in `spec`'s namespace.
async fn live_others(
    client: &Client,
    spec: &AgentSpec,
) -> Result<Vec<(String, Option<k8s_openapi::jiff::Timestamp>)>, DeployError> {
    let ns = &spec.namespace;
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), ns);
    let list = timed(
        format!("list run DaemonSets in {ns}"),
        api.list(&ListParams::default().labels(RUN_LABEL)),
    )
    .await?;
    Ok(runs::other_live_runs(
        list.items.iter().map(|d| &d.metadata),
        spec.run.as_deref(),
        k8s_openapi::jiff::Timestamp::now(),
    ))
}

/// Another run's live objects in `spec`'s namespace (its `DaemonSets`), as an error.
async fn no_other_run(client: &Client, spec: &AgentSpec) -> Result<(), DeployError> {
    let ns = &spec.namespace;
    let others = live_others(client, spec).await?;
    match others.into_iter().next() {
        None => Ok(()),
        Some((run, until)) => Err(DeployError::OtherRun {
            namespace: ns.clone(),
            run,
            until: until.map(|t| format!(" until {t}")).unwrap_or_default(),
        }),
    }
}

/// Creates this run's objects (`spec.run` set): the namespace when it does not exist (waiting
/// for one a previous run is still deleting), the service account, the agents' allow
/// `NetworkPolicy` (before the agents, so a namespace default-deny never drops their first
/// probes; not allowed to create it, the run goes on and says so), both `DaemonSets`. Each one
/// created is recorded in `created` at once, so a failure half-way leaves nothing cleanup does
/// not know about. Objects are created, never updated: an existing object is someone else's
/// and is left alone. Another run's live agents in the namespace stop it before it creates
/// anything, and again after (two runs that start together: the later one gives way).
pub async fn apply(
    client: &Client,
    spec: &AgentSpec,
    created: &mut Created,
    note: &mut dyn FnMut(String),
) -> Result<(), DeployError> {
    let ns = &spec.namespace;
    let pp = post_params();
    Box::pin(ensure_namespace(client, spec, created, note)).await?;
    if created.namespace.is_none() {
        Box::pin(no_other_run(client, spec)).await?;
    }
    let terminating = |e: DeployError| {
        if being_terminated(&e) {
            DeployError::Terminating {
                namespace: ns.clone(),
                secs: 0,
            }
        } else {
            e
        }
    };
    let sa_name = spec.name(SERVICE_ACCOUNT);
    let sas = Api::<ServiceAccount>::namespaced(client.clone(), ns);
    let sa = timed(
        format!("create serviceaccount {ns}/{sa_name}"),
        sas.create(&pp, &manifests::service_account(spec)),
    )
    .await
    .map_err(terminating)?;
    created.service_account = Some(Owned::of(&sa.metadata, &sa_name));
    Box::pin(allow_policy(client, spec, created, note))
        .await
        .map_err(terminating)?;
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), ns);
    for ds in [
        manifests::host_daemonset(spec),
        manifests::pod_daemonset(spec),
    ] {
        let name = ds.metadata.name.clone().unwrap_or_default();
        let what = format!("create daemonset {ns}/{name}");
        let made = timed(what, daemonsets.create(&pp, &ds))
            .await
            .map_err(terminating)?;
        created.daemonsets.push(Owned::of(&made.metadata, &name));
    }
    // Two runs that checked at the same moment both see the other now: the one created later
    // (by its DaemonSets' creation, then run id) gives way, and its own objects are removed.
    let list = timed(
        format!("list run DaemonSets in {ns}"),
        daemonsets.list(&ListParams::default().labels(RUN_LABEL)),
    )
    .await?;
    let key = |d: &DaemonSet| {
        (
            d.metadata.creation_timestamp.as_ref().map(|t| t.0),
            runs::run_of(&d.metadata).map(String::from),
        )
    };
    let own = list
        .items
        .iter()
        .filter(|d| runs::run_of(&d.metadata) == spec.run.as_deref())
        .map(key)
        .min();
    let now = k8s_openapi::jiff::Timestamp::now();
    let earlier = list.items.iter().find(|d| {
        runs::run_of(&d.metadata) != spec.run.as_deref()
            && !runs::stale(&d.metadata, now)
            && own.as_ref().is_some_and(|o| key(d) < *o)
    });
    if let Some(d) = earlier {
        return Err(DeployError::OtherRun {
            namespace: ns.clone(),
            run: runs::run_of(&d.metadata).unwrap_or_default().to_string(),
            until: runs::expiry(&d.metadata)
                .map(|t| format!(" until {t}"))
                .unwrap_or_default(),
        });
    }
    Ok(())
}

/// Creates the agents' allow `NetworkPolicy` and records it. A 403 (an RBAC from before the
/// policy was shipped) is said through `note`, not fatal: the probes then pass only where no
/// policy selects the agents, and diagnosis tells a policy's drop from a firewall's.
async fn allow_policy(
    client: &Client,
    spec: &AgentSpec,
    created: &mut Created,
    note: &mut dyn FnMut(String),
) -> Result<(), DeployError> {
    let ns = &spec.namespace;
    let name = spec.name(ALLOW_POLICY);
    let api = Api::<NetworkPolicy>::namespaced(client.clone(), ns);
    let made = timed(
        format!("create networkpolicy {ns}/{name}"),
        api.create(&post_params(), &manifests::network_policy(spec)),
    )
    .await;
    match made {
        Ok(np) => {
            created.network_policy = Some(Owned::of(&np.metadata, &name));
            Ok(())
        }
        Err(e) if api_code(&e) == Some(403) && !being_terminated(&e) => {
            note(format!(
                "not allowed to create the agents' NetworkPolicy {ns}/{name}: a policy that \
                 selects the pod agents (a namespace default-deny) may drop the probes; grant \
                 networkpolicies create and delete in {ns} as deploy/base/rbac.yaml does"
            ));
            Ok(())
        }
        Err(e) => Err(e),
    }
}
