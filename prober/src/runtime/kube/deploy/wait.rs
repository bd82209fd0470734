//! Waiting for the agents: one list of the agent pods and of the warning events in their
//! namespace (a `DaemonSet`'s `FailedCreate`; a pod's `FailedMount`, `FailedCreatePodSandBox`,
//! image pull failures), then watches on both (never a list every second, which on a large
//! cluster is thousands of pods a second). It stops as soon as every agent is ready, every
//! missing agent's `DaemonSet` has said why it cannot create pods, or every agent is stuck on
//! its image; the nodes without an agent pod are then read once, for a `NotReady` one.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures_util::{FutureExt, Stream, StreamExt};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Client;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use tokio::time::Instant;

use super::agents::{
    AgentPod, Why, agents_from_pods, all_stuck_pulling, component_kind, node_down,
};
use super::{DeployError, api_err, timed};
use crate::model::{AgentKind, AgentRef, AgentStatus};
use crate::runtime::kube::manifests::{AgentSpec, HOST_DAEMONSET, POD_DAEMONSET};

/// The field selector of the events that explain a missing agent: every warning in the agents'
/// namespace (a `DaemonSet`'s `FailedCreate`, a pod's mount, sandbox or pull failure). `type`
/// is one of an Event's selectable fields (kubernetes/kubernetes
/// `pkg/registry/core/event/strategy.go`, `ToSelectableFields`).
pub const WARNINGS: &str = "type=Warning";
/// A watch the server ended is resumed no sooner than this after it was opened.
const REWATCH: Duration = Duration::from_secs(1);

type Events<K> = std::pin::Pin<Box<dyn Stream<Item = Result<WatchEvent<K>, kube::Error>> + Send>>;

/// Lists every page; returns the objects and the list's resource version (to watch from).
async fn list<K>(api: &Api<K>, lp: &ListParams, what: &str) -> Result<(Vec<K>, String), DeployError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut lp = lp.clone().limit(crate::runtime::kube::discover::list::PAGE);
    let mut out = Vec::new();
    loop {
        let page = timed(what, api.list(&lp)).await?;
        out.extend(page.items);
        match page.metadata.continue_ {
            Some(t) if !t.is_empty() => lp = lp.continue_token(&t),
            _ => return Ok((out, page.metadata.resource_version.unwrap_or_default())),
        }
    }
}

async fn watch<K>(
    api: &Api<K>,
    wp: &WatchParams,
    version: &str,
    deadline: Instant,
    what: &str,
) -> Result<Events<K>, DeployError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    // The server ends the watch at the deadline (plus a second), never after 290 s.
    let left = deadline
        .saturating_duration_since(Instant::now())
        .as_millis()
        .div_ceil(1000)
        + 1;
    let wp = wp
        .clone()
        .timeout(u32::try_from(left.min(290)).unwrap_or(290));
    // Opening it is one request under its deadline; the stream then has none but the wait's
    // own, since a watch on pods that do not change is quiet for as long as they do not.
    let stream = timed(what, api.watch(&wp, version)).await?;
    Ok(stream.boxed())
}

fn key(p: &Pod) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

/// Records what a warning event explains: a `DaemonSet`'s refusal, or a pod's trouble.
fn explain(spec: &AgentSpec, e: &Event, why: &mut Why) {
    match e.involved_object.kind.as_deref() {
        Some("DaemonSet") if e.reason.as_deref() == Some("FailedCreate") => {
            if let Some((kind, text)) = refusal(spec, e) {
                why.refused.insert(kind, text);
            }
        }
        Some("Pod") => {
            if let Some(pod) = e.involved_object.name.clone() {
                let reason = e.reason.clone().unwrap_or_default();
                let message = e.message.clone().unwrap_or_default();
                why.pod_events
                    .insert(pod, format!("{reason}: {}", message.trim()));
            }
        }
        _ => {}
    }
}

/// The agent kind whose `DaemonSet` an event is about, and what it says.
fn refusal(spec: &AgentSpec, e: &Event) -> Option<(AgentKind, String)> {
    let ds = e.involved_object.name.as_deref()?;
    let kind = if ds == spec.name(HOST_DAEMONSET) {
        AgentKind::Host
    } else if ds == spec.name(POD_DAEMONSET) {
        AgentKind::Pod
    } else {
        return None;
    };
    let message = e.message.clone().unwrap_or_default();
    Some((
        kind,
        format!("the DaemonSet {ds} could not create its pod: {message}"),
    ))
}

/// Every missing agent belongs to a `DaemonSet` that was refused and has no pod at all: the
/// refusal (Pod Security, a quota) will not lift by waiting. One pass over the pods, whatever
/// the number of missing agents.
fn all_refused<'p>(
    pods: impl IntoIterator<Item = &'p Pod>,
    refused: &BTreeMap<AgentKind, String>,
    missing: &[AgentStatus],
) -> bool {
    if missing.is_empty() || refused.is_empty() {
        return false;
    }
    let with_pods: BTreeSet<AgentKind> = pods.into_iter().filter_map(component_kind).collect();
    missing
        .iter()
        .all(|m| refused.contains_key(&m.agent) && !with_pods.contains(&m.agent))
}

/// Waits until both agents run on every node, or `timeout` passes, or waiting cannot help;
/// `on_progress(ready, wanted)` after each change. Returns the ready agents and why the others
/// are missing; an error when every agent is stuck pulling its image.
pub async fn wait(
    client: &Client,
    spec: &AgentSpec,
    nodes: &[String],
    timeout: Duration,
    on_progress: &dyn Fn(usize, usize),
) -> Result<(BTreeMap<AgentRef, AgentPod>, Vec<AgentStatus>), DeployError> {
    let deadline = Instant::now() + timeout;
    let ns = &spec.namespace;
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let events_api: Api<Event> = Api::namespaced(client.clone(), ns);
    let selector = spec.selector();
    let pods_listed = ListParams::default().labels(&selector);
    let pods_what = format!("list agent pods in {ns}");
    let events_what = format!("list the warning events in {ns}");
    let (listed, mut pods_version) = list(&pods_api, &pods_listed, &pods_what).await?;
    let mut pods: BTreeMap<String, Pod> = listed.into_iter().map(|p| (key(&p), p)).collect();
    let (mut why, mut events_version) = warnings(spec, &events_api, &events_what).await?;
    let pods_wp = WatchParams::default().labels(&selector);
    let events_wp = WatchParams::default().fields(WARNINGS);
    let mut pod_stream: Option<Events<Pod>> = None;
    let mut event_stream: Option<Events<Event>> = None;
    // When each watch may be (re)opened: a watch the server ends at once is not hammered.
    let (mut pods_reopen, mut events_reopen) = (Instant::now(), Instant::now());
    loop {
        // Counted from the pods as they are, never copied: on a large cluster this runs once
        // per burst of watch events over thousands of pods.
        let (ready, missing) = agents_from_pods(pods.values(), nodes, &why);
        on_progress(ready.len(), nodes.len() * 2);
        let refused = all_refused(pods.values(), &why.refused, &missing);
        if missing.is_empty() || refused || Instant::now() >= deadline {
            if missing.is_empty() {
                return Ok((ready, missing));
            }
            // A NotReady node says so itself, whether or not its agent pod exists (a refusal by
            // the DaemonSet needs no node to explain it).
            if !refused {
                why.nodes = nodes_down(client, &missing).await;
            }
            return Ok(agents_from_pods(pods.values(), nodes, &why));
        }
        if let Some(message) = all_stuck_pulling(pods.values(), nodes.len() * 2) {
            return Err(DeployError::ImagePull {
                image: spec.image.clone(),
                message,
            });
        }
        let now = Instant::now();
        if pod_stream.is_none() && now >= pods_reopen {
            match watch(&pods_api, &pods_wp, &pods_version, deadline, &pods_what).await {
                Ok(s) => pod_stream = Some(s),
                // Its version is compacted away (HTTP 410): list again, watch from the list.
                Err(e) if expired(&e) => {
                    let (listed, v) = list(&pods_api, &pods_listed, &pods_what).await?;
                    pods = listed.into_iter().map(|p| (key(&p), p)).collect();
                    pods_version = v;
                }
                Err(e) => return Err(e),
            }
            pods_reopen = now + REWATCH;
        }
        if event_stream.is_none() && now >= events_reopen {
            let watched = (&events_api, &events_wp, events_what.as_str());
            event_stream =
                reopen_events(spec, watched, &mut events_version, deadline, &mut why).await?;
            events_reopen = now + REWATCH;
        }
        let reopen = match (&pod_stream, &event_stream) {
            (None, _) => Some(pods_reopen),
            (_, None) => Some(events_reopen),
            _ => None,
        };
        tokio::select! {
            // Pods first: they decide when the wait ends.
            biased;
            ev = next(&mut pod_stream) => match drain(ev, &mut pod_stream, &mut pods, &mut pods_version, &pods_what)? {
                PodWatch::Open => {}
                PodWatch::Closed => pod_stream = None,
                PodWatch::Expired => {
                    let (listed, v) = list(&pods_api, &pods_listed, &pods_what).await?;
                    pods = listed.into_iter().map(|p| (key(&p), p)).collect();
                    pods_version = v;
                    pod_stream = None;
                }
            },
            ev = next(&mut event_stream) => match ev {
                Some(Ok(WatchEvent::Added(e) | WatchEvent::Modified(e))) => {
                    events_version = e.metadata.resource_version.clone().unwrap_or(events_version);
                    explain(spec, &e, &mut why);
                }
                Some(Ok(WatchEvent::Bookmark(b))) => events_version = b.metadata.resource_version,
                // "too old resource version": events have no watch cache, so etcd answers a
                // version compaction passed (kubernetes/kubernetes
                // pkg/kubeapiserver/default_storage_factory_builder.go, DefaultWatchCacheSizes).
                // Re-opening at it would be refused again until the deadline and every warning
                // lost: list again and watch from the list's version.
                Some(Ok(WatchEvent::Error(e))) if e.code == 410 => {
                    event_stream = None;
                    events_version = relist_warnings(spec, &events_api, &events_what, &mut why).await?;
                    events_reopen = Instant::now();
                }
                // Events only explain; losing their watch must not end the wait.
                Some(Ok(WatchEvent::Deleted(_) | WatchEvent::Error(_)) | Err(_)) | None => {
                    event_stream = None;
                }
            },
            () = sleep_until_some(reopen) => {}
            () = tokio::time::sleep_until(deadline) => {}
        }
    }
}

/// The warning events so far, and the version to watch them from.
async fn warnings(
    spec: &AgentSpec,
    api: &Api<Event>,
    what: &str,
) -> Result<(Why, String), DeployError> {
    let (events, version) = list(api, &ListParams::default().fields(WARNINGS), what).await?;
    let mut why = Why::default();
    for e in &events {
        explain(spec, e, &mut why);
    }
    Ok((why, version))
}

/// The warning events listed again after their watch expired, added to `why`; the version to
/// watch them from.
async fn relist_warnings(
    spec: &AgentSpec,
    api: &Api<Event>,
    what: &str,
    why: &mut Why,
) -> Result<String, DeployError> {
    let (listed, version) = warnings(spec, api, what).await?;
    why.refused.extend(listed.refused);
    why.pod_events.extend(listed.pod_events);
    Ok(version)
}

/// The warning events' watch opened again from `version`; `None` when that version is
/// compacted away (HTTP 410), after listing them again into `why` and `version`.
async fn reopen_events(
    spec: &AgentSpec,
    (api, wp, what): (&Api<Event>, &WatchParams, &str),
    version: &mut String,
    deadline: Instant,
    why: &mut Why,
) -> Result<Option<Events<Event>>, DeployError> {
    match watch(api, wp, version, deadline, what).await {
        Ok(s) => Ok(Some(s)),
        Err(e) if expired(&e) => {
            *version = relist_warnings(spec, api, what, why).await?;
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// A watch refused because its version is older than the last compaction: HTTP 410 Gone.
fn expired(e: &DeployError) -> bool {
    matches!(e, DeployError::Api { source: kube::Error::Api(s), .. } if s.code == 410)
}

/// Why each node with a missing agent (an agent pod there or not) cannot run one: its `Ready`
/// condition, from one list of the nodes (under its deadline). Nothing when the list fails:
/// the reasons then fall back to the `DaemonSet`'s words.
async fn nodes_down(client: &Client, missing: &[AgentStatus]) -> BTreeMap<String, String> {
    // Read for every node with a missing agent, pod or not: the DaemonSet controller does
    // create a pod on a NotReady node, and that pod's Pending says less than the node does.
    if missing.is_empty() {
        return BTreeMap::new();
    }
    let Ok(down) = not_ready_nodes(client).await else {
        return BTreeMap::new();
    };
    down.into_iter()
        .filter(|(name, _)| missing.iter().any(|m| &m.node == name))
        .collect()
}

/// The nodes that are not Ready, each with why ([`node_down`]), from one list of the nodes.
pub(super) async fn not_ready_nodes(
    client: &Client,
) -> Result<BTreeMap<String, String>, DeployError> {
    let api: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let (listed, _) = list(&api, &ListParams::default(), "list nodes").await?;
    Ok(listed
        .iter()
        .filter_map(|n| Some((n.metadata.name.clone()?, node_down(n)?)))
        .collect())
}

/// What a pod watch event left the watch as.
enum PodWatch {
    Open,
    /// The server ended it: resume from the last version.
    Closed,
    /// Its version is too old to resume (410): list again.
    Expired,
}

/// Applies one pod watch event to the known pods.
fn on_pod_event(
    ev: Option<Result<WatchEvent<Pod>, kube::Error>>,
    pods: &mut BTreeMap<String, Pod>,
    version: &mut String,
    what: &str,
) -> Result<PodWatch, DeployError> {
    match ev {
        Some(Ok(WatchEvent::Added(p) | WatchEvent::Modified(p))) => {
            if let Some(v) = &p.metadata.resource_version {
                version.clone_from(v);
            }
            pods.insert(key(&p), p);
        }
        Some(Ok(WatchEvent::Deleted(p))) => {
            if let Some(v) = &p.metadata.resource_version {
                version.clone_from(v);
            }
            pods.remove(&key(&p));
        }
        Some(Ok(WatchEvent::Bookmark(b))) => *version = b.metadata.resource_version,
        Some(Ok(WatchEvent::Error(e))) if e.code == 410 => return Ok(PodWatch::Expired),
        Some(Ok(WatchEvent::Error(e))) => return Err(api_err(what)(kube::Error::Api(e))),
        Some(Err(e)) => return Err(api_err(what)(e)),
        None => return Ok(PodWatch::Closed),
    }
    Ok(PodWatch::Open)
}

/// Applies `first` and every pod event already waiting behind it: a burst of changes (a
/// `DaemonSet`'s pods starting on a thousand nodes) is taken whole before the agents are counted
/// again, instead of counting them once per event.
fn drain(
    first: Option<Result<WatchEvent<Pod>, kube::Error>>,
    stream: &mut Option<Events<Pod>>,
    pods: &mut BTreeMap<String, Pod>,
    version: &mut String,
    what: &str,
) -> Result<PodWatch, DeployError> {
    let mut state = on_pod_event(first, pods, version, what)?;
    while matches!(state, PodWatch::Open) {
        let Some(ev) = stream.as_mut().and_then(|s| s.next().now_or_never()) else {
            break;
        };
        state = on_pod_event(ev, pods, version, what)?;
    }
    Ok(state)
}

/// The next event of an open watch; never, for a closed one.
async fn next<K>(stream: &mut Option<Events<K>>) -> Option<Result<WatchEvent<K>, kube::Error>> {
    match stream {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
