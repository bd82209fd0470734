//! Agents in the cluster: server-side apply of the manifests, waiting until every node has both
//! agents ready (or saying why not), and removing exactly what a run created.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};

use super::manifests::{
    self, AgentSpec, HOST_DAEMONSET, MANAGED_BY, POD_DAEMONSET, RUN_LABEL, SERVICE_ACCOUNT,
};
use crate::model::AgentStatus;
use crate::model::{AgentKind, AgentRef};

/// The field manager of every server-side apply.
pub const FIELD_MANAGER: &str = "prober";

#[derive(Debug, thiserror::Error)]
#[error("cannot {what}: {source}")]
pub struct DeployError {
    what: String,
    source: kube::Error,
}

fn err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> DeployError {
    let what = what.into();
    move |source| DeployError { what, source }
}

/// Applies the namespace, the service account and both agent `DaemonSets`. Returns whether the
/// namespace is new (then cleanup removes it too).
pub async fn apply(client: &Client, spec: &AgentSpec) -> Result<bool, DeployError> {
    let ns = &spec.namespace;
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let existed = namespaces
        .get_opt(ns)
        .await
        .map_err(err(format!("get namespace {ns}")))?
        .is_some();
    namespaces
        .patch(ns, &pp, &Patch::Apply(manifests::namespace(spec)))
        .await
        .map_err(err(format!("apply namespace {ns}")))?;
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .patch(
            SERVICE_ACCOUNT,
            &pp,
            &Patch::Apply(manifests::service_account(spec)),
        )
        .await
        .map_err(err(format!("apply serviceaccount {ns}/{SERVICE_ACCOUNT}")))?;
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), ns);
    for ds in [
        manifests::host_daemonset(spec),
        manifests::pod_daemonset(spec),
    ] {
        let name = ds.metadata.name.clone().unwrap_or_default();
        daemonsets
            .patch(&name, &pp, &Patch::Apply(ds))
            .await
            .map_err(err(format!("apply daemonset {ns}/{name}")))?;
    }
    Ok(!existed)
}

/// A ready agent: its pod and the address other agents probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentPod {
    pub pod: String,
    pub address: Ipv4Addr,
}

/// Points the inventory's agents at the ready agent pods (reached through `pods/exec`); agents
/// that are not ready are left out, so their probes are unknown, not failed.
pub fn attach_agents(
    inv: &mut crate::inventory::Inventory,
    ready: &BTreeMap<AgentRef, AgentPod>,
    namespace: &str,
) {
    for n in &mut inv.nodes {
        for (kind, slot) in [
            (AgentKind::Host, &mut n.agents.host),
            (AgentKind::Pod, &mut n.agents.pod),
        ] {
            let agent = AgentRef {
                node: n.name.clone(),
                agent: kind,
            };
            *slot = ready.get(&agent).map(|p| crate::inventory::Agent {
                exec: ["kubectl", "-n", namespace, "exec", &p.pod, "--"]
                    .map(String::from)
                    .to_vec(),
                address: p.address,
                // The manifests start `probe-pod serve` on its default port.
                port: probe_proto::DEFAULT_AGENT_PORT,
            });
        }
    }
}

/// Why a pod is not ready, in the words `kubectl get pods` would use.
fn not_ready_reason(p: &Pod) -> String {
    let status = p.status.as_ref();
    let waiting = status
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .find_map(|c| {
            c.state.as_ref()?.waiting.as_ref().map(|w| {
                (
                    w.reason.clone().unwrap_or_default(),
                    w.message.clone().unwrap_or_default(),
                )
            })
        });
    if let Some((reason, message)) = waiting {
        return if message.is_empty() {
            reason
        } else {
            format!("{reason}: {message}")
        };
    }
    let unscheduled = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        .map(|c| {
            format!(
                "Pending: {}",
                c.message
                    .clone()
                    .unwrap_or_else(|| c.reason.clone().unwrap_or_default())
            )
        });
    unscheduled.unwrap_or_else(|| {
        status
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| "Unknown".into())
    })
}

fn component_kind(p: &Pod) -> Option<AgentKind> {
    match p
        .metadata
        .labels
        .as_ref()?
        .get("app.kubernetes.io/component")?
        .as_str()
    {
        "host-agent" => Some(AgentKind::Host),
        "pod-agent" => Some(AgentKind::Pod),
        _ => None,
    }
}

/// Which agents are ready on which node, and why the others are not. Pure.
#[must_use]
pub fn agents_from_pods(
    pods: &[Pod],
    nodes: &[String],
) -> (BTreeMap<AgentRef, AgentPod>, Vec<AgentStatus>) {
    let mut ready = BTreeMap::new();
    let mut seen: HashMap<AgentRef, String> = HashMap::new();
    for p in pods {
        let (Some(kind), Some(node)) = (
            component_kind(p),
            p.spec.as_ref().and_then(|s| s.node_name.clone()),
        ) else {
            continue;
        };
        let agent = AgentRef { node, agent: kind };
        let is_ready = p
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        let ip = p
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.as_deref())
            .and_then(|ip| ip.parse::<Ipv4Addr>().ok());
        match (is_ready, ip, p.metadata.name.clone()) {
            (true, Some(address), Some(pod)) => {
                ready.insert(agent, AgentPod { pod, address });
            }
            _ => {
                seen.insert(agent, not_ready_reason(p));
            }
        }
    }
    let mut missing = Vec::new();
    for node in nodes {
        for kind in [AgentKind::Host, AgentKind::Pod] {
            let agent = AgentRef {
                node: node.clone(),
                agent: kind,
            };
            if ready.contains_key(&agent) {
                continue;
            }
            let detail = seen.remove(&agent).unwrap_or_else(|| "no agent pod was scheduled there (a NotReady node, or a taint it does not tolerate)".into());
            missing.push(AgentStatus {
                node: node.clone(),
                agent: kind,
                ran: false,
                detail,
            });
        }
    }
    (ready, missing)
}

fn selector(spec: &AgentSpec) -> String {
    let mut s = "app.kubernetes.io/name=prober".to_string();
    if let Some(run) = &spec.run {
        let _ = write!(s, ",{RUN_LABEL}={run}");
    }
    s
}

/// Polls until both agents run on every node or `timeout` passes; `on_progress(ready, wanted)`.
pub async fn wait(
    client: &Client,
    spec: &AgentSpec,
    nodes: &[String],
    timeout: Duration,
    on_progress: &dyn Fn(usize, usize),
) -> Result<(BTreeMap<AgentRef, AgentPod>, Vec<AgentStatus>), DeployError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &spec.namespace);
    let lp = ListParams::default().labels(&selector(spec));
    let started = Instant::now();
    loop {
        let list = pods
            .list(&lp)
            .await
            .map_err(err(format!("list agent pods in {}", spec.namespace)))?;
        let (ready, missing) = agents_from_pods(&list.items, nodes);
        on_progress(ready.len(), nodes.len() * 2);
        if missing.is_empty() || started.elapsed() >= timeout {
            return Ok((ready, missing));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Deletes one object; `Ok(false)` when it was already gone.
async fn delete_one<K>(api: &Api<K>, name: &str, what: String) -> Result<bool, DeployError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(source) => Err(DeployError { what, source }),
    }
}

/// Deletes what `apply` created: both `DaemonSets`, the service account, and the namespace when
/// the run created it. Returns what was deleted.
pub async fn cleanup(
    client: &Client,
    spec: &AgentSpec,
    namespace_created: bool,
) -> Result<Vec<String>, DeployError> {
    let ns = &spec.namespace;
    let mut deleted = Vec::new();
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), ns);
    for name in [HOST_DAEMONSET, POD_DAEMONSET] {
        if delete_one(&daemonsets, name, format!("delete daemonset {ns}/{name}")).await? {
            deleted.push(format!("daemonset/{name}"));
        }
    }
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    if delete_one(
        &sas,
        SERVICE_ACCOUNT,
        format!("delete serviceaccount {ns}/{SERVICE_ACCOUNT}"),
    )
    .await?
    {
        deleted.push(format!("serviceaccount/{SERVICE_ACCOUNT}"));
    }
    if namespace_created {
        let namespaces: Api<Namespace> = Api::all(client.clone());
        if delete_one(&namespaces, ns, format!("delete namespace {ns}")).await? {
            deleted.push(format!("namespace/{ns}"));
        }
    }
    Ok(deleted)
}

/// Removes every agent `DaemonSet` the prober ever created in `namespace` (leftovers of crashed
/// runs), by label. Returns how many.
pub async fn cleanup_leftovers(client: &Client, namespace: &str) -> Result<usize, DeployError> {
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), namespace);
    let lp = ListParams::default().labels(&format!("{}={}", MANAGED_BY.0, MANAGED_BY.1));
    let list = daemonsets
        .list(&lp)
        .await
        .map_err(err(format!("list prober daemonsets in {namespace}")))?;
    let mut n = 0;
    for ds in list.items {
        let name = ds.metadata.name.unwrap_or_default();
        if delete_one(
            &daemonsets,
            &name,
            format!("delete daemonset {namespace}/{name}"),
        )
        .await?
        {
            n += 1;
        }
    }
    Ok(n)
}
