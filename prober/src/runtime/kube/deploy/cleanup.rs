//! Removing agents: exactly what a run created (and whatever else carries its run label), and
//! what crashed runs left behind, never another live run's objects or a permanent install.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Preconditions};

use super::{Created, DeployError, Owned, live_others, runs, timed};
use crate::runtime::kube::manifests::{AgentSpec, RUN_LABEL};

/// Deletes one object, only if it is still the one recorded; `Ok(false)` when it was gone or
/// replaced by another object of that name.
async fn delete_owned<K>(api: &Api<K>, owned: &Owned, what: String) -> Result<bool, DeployError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    delete_with_grace(api, owned, what, None).await
}

/// [`delete_owned`] with a grace period (`Some(0)`: at once, unconfirmed by any kubelet).
async fn delete_with_grace<K>(
    api: &Api<K>,
    owned: &Owned,
    what: String,
    grace: Option<u32>,
) -> Result<bool, DeployError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let dp = DeleteParams {
        preconditions: owned.uid.clone().map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        grace_period_seconds: grace,
        ..DeleteParams::background()
    };
    match timed(what, api.delete(&owned.name, &dp)).await {
        Ok(_) => Ok(true),
        Err(DeployError::Api {
            source: kube::Error::Api(s),
            ..
        }) if s.code == 404 || s.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

/// How long a run's cleanup waits for the namespace it deleted to be gone, so that the next
/// run finds none Terminating (the namespace controller takes a few seconds).
pub const NAMESPACE_GONE_WAIT: std::time::Duration = std::time::Duration::from_secs(12);

/// Ends, with grace 0, the agent pods `selector` matches in `ns` that are bound to a node that
/// is not Ready. A graceful delete there is never confirmed: only the node's kubelet confirms it
/// (kubernetes/kubernetes `pkg/registry/core/pod/strategy.go`, `CheckGracefulDelete`), and the
/// pod garbage collector force-deletes only on nodes tainted
/// `node.kubernetes.io/out-of-service` (`pkg/controller/podgc/gc_controller.go`), so the pod
/// would stay Terminating, and its namespace with it, for as long as the node is down. No
/// kubelet runs the agent there; should the node come back, its kubelet finds the pod gone and
/// stops the container. Returns what it deleted (`pod/name`).
pub(super) async fn end_on_down_nodes(
    client: &Client,
    ns: &str,
    selector: &str,
) -> Result<Vec<String>, DeployError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let lp = ListParams::default().labels(selector);
    // Best effort: a list that fails leaves the pods to their graceful deletion.
    let Ok(list) = timed(format!("list agent pods in {ns}"), pods.list(&lp)).await else {
        return Ok(Vec::new());
    };
    let bound: Vec<(&Pod, &str)> = list
        .items
        .iter()
        .filter_map(|p| Some((p, p.spec.as_ref()?.node_name.as_deref()?)))
        .collect();
    if bound.is_empty() {
        return Ok(Vec::new());
    }
    let Ok(down) = super::wait::not_ready_nodes(client).await else {
        return Ok(Vec::new());
    };
    let mut deleted = Vec::new();
    for (p, node) in bound {
        if !down.contains_key(node) {
            continue;
        }
        let owned = Owned::of(&p.metadata, "");
        let what = format!("delete pod {ns}/{} (node {node} is not Ready)", owned.name);
        if delete_with_grace(&pods, &owned, what, Some(0)).await? {
            deleted.push(format!("pod/{}", owned.name));
        }
    }
    Ok(deleted)
}

/// Waits, up to [`NAMESPACE_GONE_WAIT`], until the namespace `owned` is gone; whether it is.
async fn namespace_gone(client: &Client, owned: &Owned) -> bool {
    let api: Api<Namespace> = Api::all(client.clone());
    let until = tokio::time::Instant::now() + NAMESPACE_GONE_WAIT;
    loop {
        match timed(
            format!("get namespace {}", owned.name),
            api.get_opt(&owned.name),
        )
        .await
        {
            Ok(Some(n)) if n.metadata.uid == owned.uid || owned.uid.is_none() => {}
            // Gone, or another namespace of that name.
            Ok(_) => return true,
            // Not allowed to read it, or no answer: not known to be gone.
            Err(_) => return false,
        }
        if tokio::time::Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// This run's objects found by its run label, beyond what `created` recorded: a create whose
/// answer never came (an interruption, a deadline) may still have made its object. Best
/// effort: a list that fails leaves the recorded objects to delete.
async fn found_by_label<K>(
    api: &Api<K>,
    run: &str,
    known: &[Owned],
    what: String,
) -> Result<Vec<Owned>, DeployError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let lp = ListParams::default().labels(&format!("{RUN_LABEL}={run}"));
    let list = timed(what, api.list(&lp)).await?;
    Ok(list
        .items
        .iter()
        // Checked here too: deleting another run's object on a server's word is not an option.
        .filter(|o| runs::run_of(o.meta()) == Some(run))
        .map(|o| Owned::of(o.meta(), ""))
        .filter(|o| !o.name.is_empty() && !known.iter().any(|k| k.name == o.name))
        .collect())
}

/// Deletes what `apply` recorded, newest first, and whatever else carries this run's label (a
/// create interrupted before its answer). The namespace goes only when this run created it and
/// no other run's live objects are in it. Returns what was deleted (`kind/name`).
pub async fn cleanup(
    client: &Client,
    spec: &AgentSpec,
    created: &Created,
) -> Result<Vec<String>, DeployError> {
    let ns = &spec.namespace;
    let mut deleted = Vec::new();
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), ns);
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let policies: Api<NetworkPolicy> = Api::namespaced(client.clone(), ns);
    let mut ds_list: Vec<Owned> = created.daemonsets.iter().rev().cloned().collect();
    let mut np_list: Vec<Owned> = created.network_policy.iter().cloned().collect();
    let mut sa_list: Vec<Owned> = created.service_account.iter().cloned().collect();
    let mut namespace = created.namespace.clone();
    if let Some(run) = &spec.run {
        let more = found_by_label(
            &daemonsets,
            run,
            &ds_list,
            format!("list run DaemonSets in {ns}"),
        )
        .await
        .unwrap_or_default();
        ds_list.extend(more);
        let more = found_by_label(
            &policies,
            run,
            &np_list,
            format!("list run network policies in {ns}"),
        )
        .await
        .unwrap_or_default();
        np_list.extend(more);
        let more = found_by_label(
            &sas,
            run,
            &sa_list,
            format!("list run service accounts in {ns}"),
        )
        .await
        .unwrap_or_default();
        sa_list.extend(more);
        if namespace.is_none() {
            let api: Api<Namespace> = Api::all(client.clone());
            let found = timed(format!("get namespace {ns}"), api.get_opt(ns)).await;
            // Not allowed to read it: then this run could not have created it either.
            if let Ok(Some(n)) = found
                && n.metadata.deletion_timestamp.is_none()
                && runs::run_of(&n.metadata) == Some(run.as_str())
            {
                namespace = Some(Owned::of(&n.metadata, ns));
            }
        }
    }
    for ds in &ds_list {
        let what = format!("delete daemonset {ns}/{}", ds.name);
        if delete_owned(&daemonsets, ds, what).await? {
            deleted.push(format!("daemonset/{}", ds.name));
        }
    }
    for np in &np_list {
        let what = format!("delete networkpolicy {ns}/{}", np.name);
        if delete_owned(&policies, np, what).await? {
            deleted.push(format!("networkpolicy/{}", np.name));
        }
    }
    for sa in &sa_list {
        let what = format!("delete serviceaccount {ns}/{}", sa.name);
        if delete_owned(&sas, sa, what).await? {
            deleted.push(format!("serviceaccount/{}", sa.name));
        }
    }
    // The DaemonSets' pods go with them, but those on a node that is not Ready never would:
    // this run's own, ended at once.
    if spec.run.is_some() {
        deleted.extend(end_on_down_nodes(client, ns, &spec.selector()).await?);
    }
    if let Some(n) = &namespace {
        // Another run may have started in the namespace this run created: deleting it would
        // delete that run's agents with it. It stays, for the last run (or `prober cleanup`).
        if Box::pin(live_others(client, spec)).await?.is_empty() {
            let api: Api<Namespace> = Api::all(client.clone());
            if delete_owned(&api, n, format!("delete namespace {}", n.name)).await? {
                // Waited for, being this run's own: the next run must not find it Terminating
                // (it could create nothing in it).
                if namespace_gone(client, n).await {
                    deleted.push(format!("namespace/{}", n.name));
                } else {
                    deleted.push(format!(
                        "namespace/{} (its deletion still under way after {} s)",
                        n.name,
                        NAMESPACE_GONE_WAIT.as_secs()
                    ));
                }
            }
        }
    }
    Ok(deleted)
}

/// Removes what crashed runs left in `namespace`: `DaemonSets`, allow `NetworkPolicies` and
/// service accounts carrying a run label and past their expiry (all of them with `all`: a run still going is stopped), and
/// the namespace itself when a run created it and no run's object is left in it. A permanent
/// install (no run label) is never touched. Returns what was deleted, and the live runs kept.
pub async fn cleanup_leftovers(
    client: &Client,
    namespace: &str,
    all: bool,
) -> Result<(Vec<String>, Vec<String>), DeployError> {
    let lp = ListParams::default().labels(RUN_LABEL);
    let now = k8s_openapi::jiff::Timestamp::now();
    let mut deleted = Vec::new();
    let mut kept = std::collections::BTreeSet::new();
    let mut keep = |meta: &ObjectMeta| {
        let go = all || runs::stale(meta, now);
        if !go {
            kept.insert(runs::run_of(meta).unwrap_or_default().to_string());
        }
        go
    };
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), namespace);
    let list = timed(
        format!("list run DaemonSets in {namespace}"),
        daemonsets.list(&lp),
    )
    .await?;
    for ds in list.items.iter().filter(|d| keep(&d.metadata)) {
        let owned = Owned::of(&ds.metadata, "");
        let what = format!("delete daemonset {namespace}/{}", owned.name);
        if delete_owned(&daemonsets, &owned, what).await? {
            deleted.push(format!("daemonset/{}", owned.name));
        }
    }
    let policies: Api<NetworkPolicy> = Api::namespaced(client.clone(), namespace);
    let list = timed(
        format!("list run network policies in {namespace}"),
        policies.list(&lp),
    )
    .await?;
    for np in list.items.iter().filter(|p| keep(&p.metadata)) {
        let owned = Owned::of(&np.metadata, "");
        let what = format!("delete networkpolicy {namespace}/{}", owned.name);
        if delete_owned(&policies, &owned, what).await? {
            deleted.push(format!("networkpolicy/{}", owned.name));
        }
    }
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let list = timed(
        format!("list run service accounts in {namespace}"),
        sas.list(&lp),
    )
    .await?;
    for sa in list.items.iter().filter(|s| keep(&s.metadata)) {
        let owned = Owned::of(&sa.metadata, "");
        let what = format!("delete serviceaccount {namespace}/{}", owned.name);
        if delete_owned(&sas, &owned, what).await? {
            deleted.push(format!("serviceaccount/{}", owned.name));
        }
    }
    let kept: Vec<String> = kept.into_iter().collect();
    if !kept.is_empty() {
        // A live run's objects are in it: the namespace stays with them.
        return Ok((deleted, kept));
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = timed(
        format!("get namespace {namespace}"),
        namespaces.get_opt(namespace),
    )
    .await?;
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
    Ok((deleted, kept))
}
