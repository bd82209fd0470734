//! The agents as Kubernetes objects, built in code: a namespace, a `ServiceAccount` with no API
//! access, the agents' own allow `NetworkPolicy`, and two `DaemonSets` (host network and pod
//! network). `prober manifests` prints exactly these, and `deploy/base` holds the same (a test
//! compares them). A run's objects carry its run id in their names and labels, so they never
//! collide with a permanent install or another run.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, HTTPGetAction, HostPathVolumeSource, Namespace,
    PodSecurityContext, PodSpec, PodTemplateSpec, Probe, ResourceRequirements, SeccompProfile,
    SecurityContext, ServiceAccount, Sysctl, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::inventory::NodeFiles;

mod network_policy;

pub use network_policy::{as_read as allow_policy_as_read, network_policy};

pub const DEFAULT_NAMESPACE: &str = "prober-system";
pub const DEFAULT_IMAGE: &str = concat!("ghcr.io/prober-dev/prober:", env!("CARGO_PKG_VERSION"));
pub const SERVICE_ACCOUNT: &str = "prober-agent";
pub const HOST_DAEMONSET: &str = "probe-host";
pub const POD_DAEMONSET: &str = "probe-pod";
/// The agents' own `NetworkPolicy`, admitting the probes to and from them.
pub const ALLOW_POLICY: &str = "prober-agents";
/// Every object the prober creates carries this label, so `prober cleanup` finds leftovers.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "prober");
/// The label tying agents to one run.
pub const RUN_LABEL: &str = "prober.io/run";
/// When a run's objects expire (RFC 3339): past it, its agents have stopped serving and
/// `prober cleanup` removes them; before it, they may belong to a run still going.
pub const EXPIRES_ANNOTATION: &str = "prober.io/expires";
/// Pod Security admission: the host agent needs the host network, host paths and `NET_RAW`,
/// which `baseline` and `restricted` refuse; without the label a hardened cluster's default
/// level applies and the `DaemonSet` can create no pod.
pub const POD_SECURITY: [(&str, &str); 3] = [
    ("pod-security.kubernetes.io/enforce", "privileged"),
    ("pod-security.kubernetes.io/audit", "privileged"),
    ("pod-security.kubernetes.io/warn", "privileged"),
];
/// Only kube-system may use the `system-*` priority classes on every distribution (GKE and
/// others cap them elsewhere with a quota, and the pods are refused).
pub const SYSTEM_NAMESPACE: &str = "kube-system";

/// What to build.
#[derive(Debug, Clone)]
pub struct AgentSpec {
    pub namespace: String,
    pub image: String,
    /// Set on agents a run creates (they exit by themselves after it); none for `deploy/`.
    pub ttl: Option<String>,
    /// Set on agents a run creates.
    pub run: Option<String>,
    /// The node's files the host agent mounts for the node checks (host paths), for the
    /// distribution discovery found. `None` (`deploy/base`, which must start on every
    /// distribution): none of them, since a missing host file either stops the pod (`File`,
    /// `Directory`) or is created on the host (`DirectoryOrCreate`, and an unchecked path that
    /// the container runtime creates); `deploy/components/<distribution>` adds them.
    pub node_files: Option<NodeFiles>,
    /// The overlay's tunnel port, when the host agents' sniffer would not watch it by default
    /// (`serve --vxlan-port`/`--geneve-port`): a crafted probe to it must be recorded.
    pub tunnel: Option<(String, u16)>,
    /// When this run's objects expire (RFC 3339, [`EXPIRES_ANNOTATION`]); set with `run`.
    pub expires: Option<String>,
    /// Secrets the kubelet pulls the image with (`--image-pull-secret`), in the agents'
    /// namespace.
    pub image_pull_secrets: Vec<String>,
    /// The port the host agents serve on (TCP and UDP, on each node's host network): the
    /// agent's default, or another one so that this run's host agents do not collide with
    /// other prober agents on the same nodes (`--host-agent-port`). The pod agents, each in
    /// its own network namespace, keep the default.
    pub host_port: u16,
}

impl Default for AgentSpec {
    fn default() -> Self {
        Self {
            namespace: DEFAULT_NAMESPACE.into(),
            image: DEFAULT_IMAGE.into(),
            ttl: None,
            run: None,
            node_files: None,
            tunnel: None,
            expires: None,
            image_pull_secrets: Vec::new(),
            host_port: probe_proto::DEFAULT_AGENT_PORT,
        }
    }
}

/// The `serve` flag and port that make the host agents' sniffer watch `overlay`'s tunnel port,
/// when it is not one the agent watches by default (VXLAN 8472 and 4789, Geneve 6081).
#[must_use]
pub fn tunnel_flag(overlay: Option<&crate::inventory::Overlay>) -> Option<(String, u16)> {
    use crate::inventory::Overlay;
    match *overlay? {
        Overlay::Vxlan { port, .. } if !probe_proto::DEFAULT_VXLAN_PORTS.contains(&port.get()) => {
            Some(("--vxlan-port".into(), port.get()))
        }
        Overlay::Geneve { port, .. } if port.get() != probe_proto::DEFAULT_GENEVE_PORT => {
            Some(("--geneve-port".into(), port.get()))
        }
        _ => None,
    }
}

impl AgentSpec {
    /// An object's name: the permanent install's, or with the run id appended, so a run never
    /// changes (and rolls) an existing `DaemonSet`.
    #[must_use]
    pub fn name(&self, base: &str) -> String {
        match &self.run {
            Some(run) => format!("{base}-{run}"),
            None => base.to_string(),
        }
    }

    /// The label selector of this spec's agent pods: this run's, or the permanent ones (those
    /// without a run label).
    #[must_use]
    pub fn selector(&self) -> String {
        match &self.run {
            Some(run) => format!("app.kubernetes.io/name=prober,{RUN_LABEL}={run}"),
            None => format!("app.kubernetes.io/name=prober,!{RUN_LABEL}"),
        }
    }
}

fn labels(spec: &AgentSpec, component: &str) -> BTreeMap<String, String> {
    let mut l = BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), "prober".to_string()),
        (
            "app.kubernetes.io/component".to_string(),
            component.to_string(),
        ),
        (MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string()),
    ]);
    if let Some(run) = &spec.run {
        l.insert(RUN_LABEL.into(), run.clone());
    }
    l
}

/// The labels of the pod agents' pods (what a policy's pod selector sees).
#[must_use]
pub fn pod_agent_labels(spec: &AgentSpec) -> BTreeMap<String, String> {
    labels(spec, "pod-agent")
}

/// The agents' namespace's labels as the API server keeps them (it adds
/// `kubernetes.io/metadata.name`): what a policy's namespace selector sees.
#[must_use]
pub fn namespace_labels(spec: &AgentSpec) -> BTreeMap<String, String> {
    let mut l = namespace(spec).metadata.labels.unwrap_or_default();
    l.insert("kubernetes.io/metadata.name".into(), spec.namespace.clone());
    l
}

fn meta(spec: &AgentSpec, name: &str, component: &str, namespaced: bool) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespaced.then(|| spec.namespace.clone()),
        labels: Some(labels(spec, component)),
        annotations: spec
            .expires
            .as_ref()
            .map(|at| BTreeMap::from([(EXPIRES_ANNOTATION.to_string(), at.clone())])),
        ..ObjectMeta::default()
    }
}

fn resources() -> ResourceRequirements {
    let q = |s: &str| Quantity(s.into());
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".into(), q("10m")),
            ("memory".into(), q("16Mi")),
        ])),
        limits: Some(BTreeMap::from([
            ("cpu".into(), q("500m")),
            ("memory".into(), q("128Mi")),
        ])),
        ..ResourceRequirements::default()
    }
}

fn args(spec: &AgentSpec, extra: &[impl ToString]) -> Vec<String> {
    let mut a = vec!["serve".to_string()];
    a.extend(extra.iter().map(ToString::to_string));
    if let Some((flag, port)) = &spec.tunnel {
        a.extend([flag.clone(), port.to_string()]);
    }
    if let Some(ttl) = &spec.ttl {
        // A DaemonSet's pods restart whatever their agent does (`restartPolicy: Always` is the
        // only one `ValidateDaemonSetSpec` allows, kubernetes/kubernetes
        // `pkg/apis/apps/validation/validation.go`): an agent that exits at its TTL would start
        // again with a fresh one. It stops serving instead and waits to be deleted.
        a.extend([
            "--ttl".into(),
            ttl.clone(),
            "--on-ttl".into(),
            "idle".into(),
        ]);
    }
    a
}

/// `--port` for the host agents on another port than the default (none for the default, so
/// that `deploy/base` stays as it is).
fn host_port_args(spec: &AgentSpec) -> Vec<String> {
    if spec.host_port == probe_proto::DEFAULT_AGENT_PORT {
        Vec::new()
    } else {
        vec!["--port".into(), spec.host_port.to_string()]
    }
}

/// Mounts the host's `path` read-only at `/host<at>`: where the node checks look, whatever
/// the distribution's own layout.
fn host_path(name: &str, path: &str, at: &str, kind: &str) -> (Volume, VolumeMount) {
    (
        Volume {
            name: name.into(),
            host_path: Some(HostPathVolumeSource {
                path: path.into(),
                type_: Some(kind.into()),
            }),
            ..Volume::default()
        },
        VolumeMount {
            name: name.into(),
            mount_path: format!("/host{at}"),
            read_only: Some(true),
            ..VolumeMount::default()
        },
    )
}

/// Ready means answering: the kubelet asks the agent's own `/healthz` on its probe port.
fn readiness(port: u16) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some("/healthz".into()),
            port: IntOrString::Int(i32::from(port)),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(2),
        timeout_seconds: Some(1),
        failure_threshold: Some(3),
        ..Probe::default()
    }
}

fn ports() -> Vec<ContainerPort> {
    vec![ContainerPort {
        name: Some("probe".into()),
        container_port: i32::from(probe_proto::DEFAULT_AGENT_PORT),
        ..ContainerPort::default()
    }]
}

/// A crashed agent's last log lines become its termination message, so the reason a node's
/// agent is missing says why it crashed (a port in use, a refused capability) rather than only
/// `CrashLoopBackOff`.
const TERMINATION_MESSAGE_POLICY: &str = "FallbackToLogsOnError";

fn pull_secrets(spec: &AgentSpec) -> Option<Vec<k8s_openapi::api::core::v1::LocalObjectReference>> {
    (!spec.image_pull_secrets.is_empty()).then(|| {
        spec.image_pull_secrets
            .iter()
            .map(|name| k8s_openapi::api::core::v1::LocalObjectReference { name: name.clone() })
            .collect()
    })
}

/// Linux nodes only: the agent is a Linux binary and Windows nodes could not start it.
fn node_selector() -> BTreeMap<String, String> {
    BTreeMap::from([("kubernetes.io/os".to_string(), "linux".to_string())])
}

fn runtime_default_seccomp() -> SeccompProfile {
    SeccompProfile {
        type_: "RuntimeDefault".into(),
        ..SeccompProfile::default()
    }
}

fn daemonset(spec: &AgentSpec, name: &str, component: &str, pod: PodSpec) -> DaemonSet {
    let mut selector = BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), "prober".to_string()),
        (
            "app.kubernetes.io/component".to_string(),
            component.to_string(),
        ),
    ]);
    // A run's DaemonSet selects only its own pods, never a permanent install's.
    if let Some(run) = &spec.run {
        selector.insert(RUN_LABEL.into(), run.clone());
    }
    DaemonSet {
        metadata: meta(spec, &spec.name(name), component, true),
        spec: Some(DaemonSetSpec {
            selector: LabelSelector {
                match_labels: Some(selector),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(spec, component)),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod),
            },
            ..DaemonSetSpec::default()
        }),
        ..DaemonSet::default()
    }
}

/// Tolerates every taint: the matrix needs an agent on every node, control-plane and tainted
/// nodes included (a taint says what may be scheduled there, not which paths must work), and a
/// node turning `NotReady` mid-run must not evict the agent that would show why.
fn tolerate_all() -> Vec<Toleration> {
    vec![Toleration {
        operator: Some("Exists".into()),
        ..Toleration::default()
    }]
}

/// What the host agent mounts: `/etc/resolv.conf`, which every Linux node has; then, for a
/// known distribution, its CNI configuration directory and the kubelet's kubeconfig, each where
/// the node checks look. Only those files, never whole directories that hold private keys
/// (`/etc/kubernetes/pki`, `/var/lib/kubelet/pods`). The kubelet's kubeconfig must exist
/// (`File`: the kubelet of that distribution runs from it, and discovery names the distribution
/// only when every node says it); the CNI configuration directory is `DirectoryOrCreate`,
/// because a node whose CNI never wrote its configuration is exactly the node to diagnose, and
/// with `Directory` its host agent would never start (`FailedMount`). An empty directory there
/// is what the kubelet already reads as "no network configured".
fn node_mounts(files: Option<&NodeFiles>) -> Vec<(Volume, VolumeMount)> {
    let mut mounts = vec![host_path(
        "resolv-conf",
        "/etc/resolv.conf",
        "/etc/resolv.conf",
        "File",
    )];
    if let Some(files) = files {
        let path = |p: &std::path::Path| p.display().to_string();
        mounts.push(host_path(
            "cni-config",
            &path(&files.cni_conf_dir),
            "/etc/cni/net.d",
            "DirectoryOrCreate",
        ));
        mounts.push(host_path(
            "kubelet-kubeconfig",
            &path(&files.kubelet_kubeconfig),
            "/etc/kubernetes/kubelet.conf",
            "File",
        ));
    }
    mounts
}

/// The host-network agent: sniffs VXLAN (`CAP_NET_RAW` only) and reads the node's files read-only.
#[must_use]
pub fn host_daemonset(spec: &AgentSpec) -> DaemonSet {
    let mounts = node_mounts(spec.node_files.as_ref());
    let container = Container {
        name: "probe-pod".into(),
        image: Some(spec.image.clone()),
        args: Some(args(spec, &host_port_args(spec))),
        // No container port: on the host network the API server makes every container port a
        // host port (`defaultHostNetworkPorts`, kubernetes/kubernetes
        // `pkg/apis/core/v1/defaults.go`), and the scheduler then keeps any other pod with
        // that host port off the node: a leftover or concurrent run's host agents would stay
        // Pending everywhere. The port is `--port` (or the agent's default), as `agent_port`
        // reads it.
        ports: None,
        readiness_probe: Some(readiness(spec.host_port)),
        termination_message_policy: Some(TERMINATION_MESSAGE_POLICY.into()),
        resources: Some(resources()),
        volume_mounts: Some(mounts.iter().map(|(_, m)| m.clone()).collect()),
        security_context: Some(SecurityContext {
            // Root for the packet socket (Kubernetes has no ambient capabilities), but nothing
            // beyond CAP_NET_RAW, and no writable root filesystem.
            run_as_user: Some(0),
            run_as_non_root: Some(false),
            read_only_root_filesystem: Some(true),
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                add: Some(vec!["NET_RAW".into()]),
                drop: Some(vec!["ALL".into()]),
            }),
            seccomp_profile: Some(runtime_default_seccomp()),
            ..SecurityContext::default()
        }),
        ..Container::default()
    };
    daemonset(
        spec,
        HOST_DAEMONSET,
        "host-agent",
        PodSpec {
            host_network: Some(true),
            dns_policy: Some("ClusterFirstWithHostNet".into()),
            service_account_name: Some(spec.name(SERVICE_ACCOUNT)),
            automount_service_account_token: Some(false),
            node_selector: Some(node_selector()),
            tolerations: Some(tolerate_all()),
            // Keeps the agent on a node under memory pressure, where allowed.
            priority_class_name: (spec.namespace == SYSTEM_NAMESPACE)
                .then(|| "system-node-critical".into()),
            containers: vec![container],
            image_pull_secrets: pull_secrets(spec),
            volumes: Some(mounts.into_iter().map(|(v, _)| v).collect()),
            ..PodSpec::default()
        },
    )
}

/// The pod-network agent: unprivileged; ping works through the `ping_group_range` sysctl.
#[must_use]
pub fn pod_daemonset(spec: &AgentSpec) -> DaemonSet {
    let container = Container {
        name: "probe-pod".into(),
        image: Some(spec.image.clone()),
        args: Some(args(spec, &["--sniff", "never"])),
        ports: Some(ports()),
        readiness_probe: Some(readiness(probe_proto::DEFAULT_AGENT_PORT)),
        termination_message_policy: Some(TERMINATION_MESSAGE_POLICY.into()),
        resources: Some(resources()),
        security_context: Some(SecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(65_534),
            read_only_root_filesystem: Some(true),
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                ..Capabilities::default()
            }),
            seccomp_profile: Some(runtime_default_seccomp()),
            ..SecurityContext::default()
        }),
        ..Container::default()
    };
    daemonset(
        spec,
        POD_DAEMONSET,
        "pod-agent",
        PodSpec {
            service_account_name: Some(spec.name(SERVICE_ACCOUNT)),
            automount_service_account_token: Some(false),
            node_selector: Some(node_selector()),
            tolerations: Some(tolerate_all()),
            security_context: Some(PodSecurityContext {
                sysctls: Some(vec![Sysctl {
                    name: "net.ipv4.ping_group_range".into(),
                    value: "0 2147483647".into(),
                }]),
                ..PodSecurityContext::default()
            }),
            image_pull_secrets: pull_secrets(spec),
            containers: vec![container],
            ..PodSpec::default()
        },
    )
}

#[must_use]
pub fn namespace(spec: &AgentSpec) -> Namespace {
    let mut metadata = meta(spec, &spec.namespace, "namespace", false);
    metadata.labels.get_or_insert_with(BTreeMap::new).extend(
        POD_SECURITY
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string())),
    );
    Namespace {
        metadata,
        ..Namespace::default()
    }
}

/// The agents' identity: no API permissions at all, and no token mounted.
#[must_use]
pub fn service_account(spec: &AgentSpec) -> ServiceAccount {
    ServiceAccount {
        metadata: meta(spec, &spec.name(SERVICE_ACCOUNT), "agent", true),
        automount_service_account_token: Some(false),
        ..ServiceAccount::default()
    }
}

/// Everything, in apply order, as JSON values (kind and apiVersion set).
#[must_use]
pub fn all(spec: &AgentSpec) -> Vec<serde_json::Value> {
    let with_type = |mut v: serde_json::Value, api: &str, kind: &str| {
        v["apiVersion"] = api.into();
        v["kind"] = kind.into();
        v
    };
    let json = |v: serde_json::Result<serde_json::Value>| v.unwrap_or(serde_json::Value::Null);
    vec![
        with_type(
            json(serde_json::to_value(namespace(spec))),
            "v1",
            "Namespace",
        ),
        with_type(
            json(serde_json::to_value(service_account(spec))),
            "v1",
            "ServiceAccount",
        ),
        with_type(
            json(serde_json::to_value(network_policy(spec))),
            "networking.k8s.io/v1",
            "NetworkPolicy",
        ),
        with_type(
            json(serde_json::to_value(host_daemonset(spec))),
            "apps/v1",
            "DaemonSet",
        ),
        with_type(
            json(serde_json::to_value(pod_daemonset(spec))),
            "apps/v1",
            "DaemonSet",
        ),
    ]
}

/// `all` as a multi-document YAML stream.
#[must_use]
pub fn yaml(spec: &AgentSpec) -> String {
    let mut out = String::new();
    for v in all(spec) {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&v).unwrap_or_default());
    }
    out
}

/// The namespaces every cluster has and no one may take over: never prober's to create or label.
pub const CLUSTER_NAMESPACES: [&str; 4] =
    ["kube-system", "kube-public", "kube-node-lease", "default"];

/// `yaml` for a namespace that exists and is not prober's: everything but the Namespace object
/// (applied, it would relabel that namespace, e.g. kube-system's Pod Security to `privileged`),
/// headed by a comment saying what labels the namespace needs for the agents to be admitted.
#[must_use]
pub fn yaml_into_existing(spec: &AgentSpec) -> String {
    let labels: Vec<String> = POD_SECURITY
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let mut out = format!(
        "# The namespace {ns} is not prober's: these manifests neither create nor label it.\n\
         # Its Pod Security must admit the host agent (hostNetwork, NET_RAW, NET_ADMIN):\n\
         #   kubectl label namespace {ns} {}\n\
         # (pod-security.kubernetes.io/enforce: privileged), or run the agents in prober-system.\n",
        labels.join(" "),
        ns = spec.namespace,
    );
    for v in all(spec).into_iter().filter(|v| v["kind"] != "Namespace") {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&v).unwrap_or_default());
    }
    out
}

#[cfg(test)]
mod tests;
