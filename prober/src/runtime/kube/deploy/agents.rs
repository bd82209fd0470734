//! Pure: which agents are ready, why the others are not (in the words `kubectl get pods` and the
//! `DaemonSet`'s events use), and whether every agent is stuck on its image.

use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::inventory::NO_IPV4;

use k8s_openapi::api::core::v1::Pod;

use crate::model::{AgentKind, AgentRef, AgentStatus};
use crate::runtime::kube::discover::family;

/// A ready agent: its pod, the address other agents probe, and the port it serves on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentPod {
    pub pod: String,
    /// Its IPv4 address; [`NO_IPV4`] for an IPv6-only pod.
    pub address: Ipv4Addr,
    /// Its IPv6 address (dual-stack or IPv6-only).
    pub address6: Option<Ipv6Addr>,
    pub port: u16,
}

/// The port the agent in `p` listens on, as its container says: `--port` in its arguments
/// (what `probe-pod serve` obeys first), else `PROBE_POD_PORT` in its environment, else the
/// container port named `probe` (or its only one), else the agent's default. A permanent
/// install may have changed any of them.
#[must_use]
pub fn agent_port(p: &Pod) -> u16 {
    template_port(p.spec.as_ref())
}

/// [`agent_port`] of the pods a `DaemonSet` makes, read from its pod template.
#[must_use]
pub fn daemonset_port(d: &k8s_openapi::api::apps::v1::DaemonSet) -> u16 {
    template_port(d.spec.as_ref().and_then(|s| s.template.spec.as_ref()))
}

fn template_port(spec: Option<&k8s_openapi::api::core::v1::PodSpec>) -> u16 {
    let containers = spec.map_or(&[][..], |s| s.containers.as_slice());
    let named = |c: &&k8s_openapi::api::core::v1::Container| {
        c.ports
            .iter()
            .flatten()
            .any(|cp| cp.name.as_deref() == Some("probe"))
    };
    let Some(c) = containers.iter().find(named).or_else(|| containers.first()) else {
        return probe_proto::DEFAULT_AGENT_PORT;
    };
    let args = c.command.iter().flatten().chain(c.args.iter().flatten());
    let mut from_args = None;
    let mut next_is_port = false;
    for a in args {
        if next_is_port {
            from_args = a.parse().ok();
            next_is_port = false;
        } else if a == "--port" {
            next_is_port = true;
        } else if let Some(v) = a.strip_prefix("--port=") {
            from_args = v.parse().ok();
        }
    }
    let from_env = || {
        c.env
            .iter()
            .flatten()
            .find(|e| e.name == "PROBE_POD_PORT")
            .and_then(|e| e.value.as_deref()?.parse().ok())
    };
    let from_ports = || {
        let ports = c.ports.as_deref().unwrap_or_default();
        ports
            .iter()
            .find(|cp| cp.name.as_deref() == Some("probe"))
            .or(if ports.len() == 1 {
                ports.first()
            } else {
                None
            })
            .and_then(|cp| u16::try_from(cp.container_port).ok())
    };
    from_args
        .or_else(from_env)
        .or_else(from_ports)
        .unwrap_or(probe_proto::DEFAULT_AGENT_PORT)
}

/// Said of a node where no agent pod exists, its `DaemonSet` reported nothing and the node is
/// Ready. Never "a taint": the agents tolerate every taint.
pub const NOT_SCHEDULED: &str = "no agent pod was created there although the node is Ready (see \
     `kubectl describe daemonset` in the agents' namespace)";

/// What explains a missing agent beyond its pod's own status: its `DaemonSet`'s refusal
/// (`FailedCreate`: Pod Security, a quota), its pod's warning events (`FailedMount`,
/// `FailedCreatePodSandBox`, an image pull), and its node's own state (`NotReady`).
#[derive(Debug, Clone, Default)]
pub struct Why {
    /// By agent kind: the `DaemonSet`'s `FailedCreate` message.
    pub refused: BTreeMap<AgentKind, String>,
    /// By pod name: its latest warning event, as `Reason: message`.
    pub pod_events: BTreeMap<String, String>,
    /// By node name: why the node cannot run pods (`NotReady: ...`).
    pub nodes: BTreeMap<String, String>,
}

/// Why a node is not Ready, from its `Ready` condition (`None`: it is Ready, or says nothing).
#[must_use]
pub fn node_down(n: &k8s_openapi::api::core::v1::Node) -> Option<String> {
    let ready = n
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?;
    (ready.status != "True").then(|| {
        let why = ready
            .message
            .clone()
            .or_else(|| ready.reason.clone())
            .unwrap_or_default();
        format!("the node is NotReady (Ready={}): {why}", ready.status)
    })
}

/// Kubelet reasons meaning the image cannot be had: waiting longer will not help.
const PULL_FAILURES: [&str; 4] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
];

/// `Reason: message`, or the reason alone when there is no message.
fn said(reason: String, message: &str) -> String {
    if message.is_empty() {
        reason
    } else {
        format!("{reason}: {message}")
    }
}

/// The pod's container statuses (none before it is scheduled).
fn statuses(p: &Pod) -> impl Iterator<Item = &k8s_openapi::api::core::v1::ContainerStatus> {
    p.status
        .iter()
        .flat_map(|s| s.container_statuses.iter().flatten())
}

fn waiting(p: &Pod) -> Option<(String, String)> {
    statuses(p).find_map(|c| {
        c.state.as_ref()?.waiting.as_ref().map(|w| {
            (
                w.reason.clone().unwrap_or_default(),
                w.message.clone().unwrap_or_default(),
            )
        })
    })
}

/// The last termination of a crashing container: its exit code and message (with
/// `FallbackToLogsOnError`, the last lines of its log).
fn last_crash(p: &Pod) -> Option<String> {
    statuses(p).find_map(|c| {
        let t = c.last_state.as_ref()?.terminated.as_ref()?;
        let message = t.message.as_deref().unwrap_or_default().trim();
        if let Some(said) = port_in_use(message) {
            return Some(said);
        }
        let reason = t.reason.as_deref().unwrap_or("Error");
        Some(said(
            format!("it exited with {} ({reason})", t.exit_code),
            message,
        ))
    })
}

/// A crash because the agent's port was taken, in plain words, from the agent's own typed line
/// (`probe_proto::ServeEvent::PortInUse`) among its last log lines.
fn port_in_use(message: &str) -> Option<String> {
    message
        .lines()
        .find_map(|l| match probe_proto::ServeEvent::parse(l)? {
            probe_proto::ServeEvent::PortInUse { protocol, port } => Some(format!(
                "port {port}/{} is in use on this node (most likely another prober \
                 run's host agents, or deploy/base's; else another program): this run's agent \
                 cannot listen there; pass --host-agent-port with a free port",
                match protocol {
                    probe_proto::Transport::Tcp => "tcp",
                    probe_proto::Transport::Udp => "udp",
                }
            )),
        })
}

/// Why a pod is not ready, in the words `kubectl get pods` would use, or its warning event's
/// (`event`: a mount, sandbox or pull failure says more than `ContainerCreating`).
#[must_use]
pub fn not_ready_reason(p: &Pod, event: Option<&str>) -> String {
    let status = p.status.as_ref();
    if let Some((reason, message)) = waiting(p) {
        if reason == "CrashLoopBackOff"
            && let Some(crash) = last_crash(p)
        {
            return format!("CrashLoopBackOff: {crash}");
        }
        if let Some(e) = event.filter(|_| reason == "ContainerCreating" || reason.is_empty()) {
            return e.to_string();
        }
        return said(reason, &message);
    }
    // The scheduler's own words first: its condition says why the pod has no node now, while
    // the latest warning may be older (its FailedScheduling event says the same when the
    // condition carries no message).
    let unscheduled = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        .and_then(|c| {
            let said = c.message.clone().filter(|m| !m.is_empty());
            let said =
                said.or_else(|| event?.strip_prefix("FailedScheduling: ").map(String::from))?;
            let reason = c.reason.clone().unwrap_or_else(|| "Pending".into());
            Some(format!("{reason}: the scheduler cannot place it: {said}"))
        });
    if let Some(u) = unscheduled {
        return u;
    }
    if let Some(e) = event {
        return e.to_string();
    }
    let unscheduled = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        .map(|c| format!("Pending: {}", c.reason.clone().unwrap_or_default()));
    unscheduled.unwrap_or_else(|| {
        let phase = status
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| "Unknown".into());
        if phase == "Running" {
            "Running but not ready: its /healthz does not answer the kubelet".into()
        } else {
            phase
        }
    })
}

/// The node a pod is for: its `nodeName` once the scheduler bound it, else the node its
/// required node affinity names. The `DaemonSet` controller never sets `nodeName`: it gives each
/// pod a required node affinity matching `metadata.name` to its node and lets the scheduler
/// bind it (kubernetes/kubernetes `pkg/controller/daemon/daemon_controller.go`,
/// `ReplaceDaemonSetPodNodeNameNodeAffinity`; read back as `GetTargetNodeName` in
/// `pkg/controller/daemon/util/daemonset_util.go` does), so a pod the scheduler cannot place
/// has only that.
#[must_use]
pub fn target_node(p: &Pod) -> Option<String> {
    let spec = p.spec.as_ref()?;
    if let Some(n) = spec.node_name.as_ref().filter(|n| !n.is_empty()) {
        return Some(n.clone());
    }
    let required = spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?;
    required.node_selector_terms.iter().find_map(|t| {
        t.match_fields.iter().flatten().find_map(|f| {
            let values = f.values.as_deref().unwrap_or_default();
            match values {
                [node] if f.key == "metadata.name" && f.operator == "In" => Some(node.clone()),
                _ => None,
            }
        })
    })
}

/// Which agent a pod is, by its component label.
#[must_use]
pub fn component_kind(p: &Pod) -> Option<AgentKind> {
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

fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// Which agents are ready on which node, and why the others are not: their pod's status and
/// warning events, else the node's state, else what the `DaemonSet` of that agent kind
/// reported when it could create no pod (its `FailedCreate` event: Pod Security, a quota).
#[must_use]
pub fn agents_from_pods<'p>(
    pods: impl IntoIterator<Item = &'p Pod>,
    nodes: &[String],
    why: &Why,
) -> (BTreeMap<AgentRef, AgentPod>, Vec<AgentStatus>) {
    let mut ready = BTreeMap::new();
    let mut seen: HashMap<AgentRef, String> = HashMap::new();
    for p in pods {
        let (Some(kind), Some(node)) = (component_kind(p), target_node(p)) else {
            continue;
        };
        let agent = AgentRef { node, agent: kind };
        let ips = p.status.as_ref().map(family::pod_ips).unwrap_or_default();
        match (is_ready(p), !ips.is_empty(), p.metadata.name.clone()) {
            (true, true, Some(pod)) => {
                let port = agent_port(p);
                ready.insert(
                    agent,
                    AgentPod {
                        pod,
                        address: ips.v4.unwrap_or(NO_IPV4),
                        address6: ips.v6,
                        port,
                    },
                );
            }
            (_, _, name) => {
                let event = name.and_then(|n| why.pod_events.get(&n));
                seen.insert(agent, not_ready_reason(p, event.map(String::as_str)));
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
            let detail = match (seen.remove(&agent), why.nodes.get(node)) {
                // The node's own state first: its agent pod waits because of it.
                (Some(pod), Some(down)) => format!("{down} (its agent pod: {pod})"),
                (Some(pod), None) => pod,
                (None, down) => down
                    .or_else(|| why.refused.get(&kind))
                    .cloned()
                    .unwrap_or_else(|| NOT_SCHEDULED.into()),
            };
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

/// When every agent pod so far is stuck on its image (and there are enough of them to rule out
/// one node's bad luck), the kubelet's words for it; waiting longer would only delay the error.
#[must_use]
pub fn all_stuck_pulling<'p>(
    pods: impl IntoIterator<Item = &'p Pod>,
    wanted: usize,
) -> Option<String> {
    let agents: Vec<&Pod> = pods
        .into_iter()
        .filter(|p| component_kind(p).is_some())
        .collect();
    if agents.is_empty() || agents.iter().any(|p| is_ready(p)) {
        return None;
    }
    let mut messages = Vec::new();
    for p in &agents {
        let (reason, message) = waiting(p)?;
        if !PULL_FAILURES.contains(&reason.as_str()) {
            return None;
        }
        messages.push((reason, message));
    }
    if agents.len() < wanted.min(3) {
        return None;
    }
    // ErrImagePull carries the registry's answer; the back-off only says it is backing off.
    messages.sort_by_key(|(r, _)| r != "ErrImagePull");
    messages
        .into_iter()
        .next()
        .map(|(reason, message)| said(reason, &message))
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
            // An agent on port 0 serves nothing: not one to probe.
            *slot = ready.get(&agent).and_then(|p| {
                Some(crate::inventory::Agent {
                    exec: ["kubectl", "-n", namespace, "exec", &p.pod, "--"]
                        .map(String::from)
                        .to_vec(),
                    address: p.address,
                    address6: p.address6,
                    port: probe_proto::Port::new(p.port)?,
                })
            });
        }
    }
}
