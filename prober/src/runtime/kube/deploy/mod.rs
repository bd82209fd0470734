//! Agents in the cluster: finding a permanent install (then a run uses it and changes nothing),
//! else creating this run's own objects — each named and labelled with the run id, recorded as
//! it is created so that cleanup removes exactly those on every exit path, a failed apply
//! included — waiting for them, and removing them.

pub mod agents;
pub mod session;
pub mod wait;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};

pub use agents::{AgentPod, agents_from_pods, attach_agents};
pub use session::{Session, SessionError, with_agents};
pub use wait::wait;

use super::manifests::{
    self, AgentSpec, HOST_DAEMONSET, POD_DAEMONSET, RUN_LABEL, SERVICE_ACCOUNT,
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
    pub daemonsets: Vec<Owned>,
}

/// Whether a permanent install (`deploy/base`: both agent `DaemonSets`, without a run label)
/// runs in `namespace`. One list; an absent namespace lists nothing.
pub async fn permanent(client: &Client, namespace: &str) -> Result<bool, DeployError> {
    let spec = AgentSpec {
        namespace: namespace.into(),
        ..AgentSpec::default()
    };
    let list = Api::<DaemonSet>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().labels(&spec.selector()))
        .await
        .map_err(api_err(format!(
            "list the prober DaemonSets in {namespace}"
        )))?;
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

/// Creates this run's objects (`spec.run` set): the namespace when it does not exist, the
/// service account, both `DaemonSets`. Each one created is recorded in `created` at once, so a
/// failure half-way leaves nothing cleanup does not know about. Objects are created, never
/// updated: an existing object is someone else's and is left alone.
pub async fn apply(
    client: &Client,
    spec: &AgentSpec,
    created: &mut Created,
) -> Result<(), DeployError> {
    let ns = &spec.namespace;
    let pp = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    match Api::<Namespace>::all(client.clone())
        .create(&pp, &manifests::namespace(spec))
        .await
    {
        Ok(n) => created.namespace = Some(Owned::of(&n.metadata, ns)),
        // The namespace exists (a permanent install's, or one made by hand): used, not owned.
        Err(e) if already_exists(&e) => {}
        Err(e) => return Err(api_err(format!("create namespace {ns}"))(e)),
    }
    let sa_name = spec.name(SERVICE_ACCOUNT);
    let sa = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create(&pp, &manifests::service_account(spec))
        .await
        .map_err(api_err(format!("create serviceaccount {ns}/{sa_name}")))?;
    created.service_account = Some(Owned::of(&sa.metadata, &sa_name));
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), ns);
    for ds in [
        manifests::host_daemonset(spec),
        manifests::pod_daemonset(spec),
    ] {
        let name = ds.metadata.name.clone().unwrap_or_default();
        let made = daemonsets
            .create(&pp, &ds)
            .await
            .map_err(api_err(format!("create daemonset {ns}/{name}")))?;
        created.daemonsets.push(Owned::of(&made.metadata, &name));
    }
    Ok(())
}

/// Deletes one object, only if it is still the one recorded; `Ok(false)` when it was gone or
/// replaced by another object of that name.
async fn delete_owned<K>(api: &Api<K>, owned: &Owned, what: String) -> Result<bool, DeployError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let dp = DeleteParams {
        preconditions: owned.uid.clone().map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    match api.delete(&owned.name, &dp).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(false),
        Err(source) => Err(DeployError::Api { what, source }),
    }
}

/// Deletes what `apply` recorded, newest first. Returns what was deleted (`kind/name`).
pub async fn cleanup(
    client: &Client,
    spec: &AgentSpec,
    created: &Created,
) -> Result<Vec<String>, DeployError> {
    let ns = &spec.namespace;
    let mut deleted = Vec::new();
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), ns);
    for ds in created.daemonsets.iter().rev() {
        let what = format!("delete daemonset {ns}/{}", ds.name);
        if delete_owned(&daemonsets, ds, what).await? {
            deleted.push(format!("daemonset/{}", ds.name));
        }
    }
    if let Some(sa) = &created.service_account {
        let api: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
        let what = format!("delete serviceaccount {ns}/{}", sa.name);
        if delete_owned(&api, sa, what).await? {
            deleted.push(format!("serviceaccount/{}", sa.name));
        }
    }
    if let Some(n) = &created.namespace {
        let api: Api<Namespace> = Api::all(client.clone());
        if delete_owned(&api, n, format!("delete namespace {}", n.name)).await? {
            deleted.push(format!("namespace/{}", n.name));
        }
    }
    Ok(deleted)
}

/// Removes what crashed runs left in `namespace`: `DaemonSets` and service accounts carrying a
/// run label, and the namespace itself when a run created it. A permanent install (no run label)
/// is never touched. Returns what was deleted.
pub async fn cleanup_leftovers(
    client: &Client,
    namespace: &str,
) -> Result<Vec<String>, DeployError> {
    let lp = ListParams::default().labels(RUN_LABEL);
    let mut deleted = Vec::new();
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), namespace);
    let list = daemonsets
        .list(&lp)
        .await
        .map_err(api_err(format!("list run DaemonSets in {namespace}")))?;
    for ds in list.items {
        let owned = Owned::of(&ds.metadata, "");
        let what = format!("delete daemonset {namespace}/{}", owned.name);
        if delete_owned(&daemonsets, &owned, what).await? {
            deleted.push(format!("daemonset/{}", owned.name));
        }
    }
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let list = sas
        .list(&lp)
        .await
        .map_err(api_err(format!("list run service accounts in {namespace}")))?;
    for sa in list.items {
        let owned = Owned::of(&sa.metadata, "");
        let what = format!("delete serviceaccount {namespace}/{}", owned.name);
        if delete_owned(&sas, &owned, what).await? {
            deleted.push(format!("serviceaccount/{}", owned.name));
        }
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = namespaces
        .get_opt(namespace)
        .await
        .map_err(api_err(format!("get namespace {namespace}")))?;
    if let Some(n) = ns.filter(|n| {
        n.metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(RUN_LABEL))
    }) {
        let owned = Owned::of(&n.metadata, namespace);
        if delete_owned(&namespaces, &owned, format!("delete namespace {namespace}")).await? {
            deleted.push(format!("namespace/{namespace}"));
        }
    }
    Ok(deleted)
}
