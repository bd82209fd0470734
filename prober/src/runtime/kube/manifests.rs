//! The agents as Kubernetes objects, built in code: a namespace, a `ServiceAccount` with no API
//! access, and two `DaemonSets` (host network and pod network). `prober manifests` prints exactly
//! these, and `deploy/base` holds the same (a test compares them).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, HostPathVolumeSource, Namespace, PodSecurityContext, PodSpec,
    PodTemplateSpec, ResourceRequirements, SecurityContext, ServiceAccount, Sysctl, Toleration,
    Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

pub const DEFAULT_NAMESPACE: &str = "prober-system";
pub const DEFAULT_IMAGE: &str = concat!("ghcr.io/prober-dev/prober:", env!("CARGO_PKG_VERSION"));
pub const SERVICE_ACCOUNT: &str = "prober-agent";
pub const HOST_DAEMONSET: &str = "probe-host";
pub const POD_DAEMONSET: &str = "probe-pod";
/// Every object the prober creates carries this label, so `prober cleanup` finds leftovers.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "prober");
/// The label tying agents to one run.
pub const RUN_LABEL: &str = "prober.io/run";

/// What to build.
#[derive(Debug, Clone)]
pub struct AgentSpec {
    pub namespace: String,
    pub image: String,
    /// Set on agents a run creates (they exit by themselves after it); none for `deploy/`.
    pub ttl: Option<String>,
    /// Set on agents a run creates.
    pub run: Option<String>,
}

impl Default for AgentSpec {
    fn default() -> Self {
        Self {
            namespace: DEFAULT_NAMESPACE.into(),
            image: DEFAULT_IMAGE.into(),
            ttl: None,
            run: None,
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

fn meta(spec: &AgentSpec, name: &str, component: &str, namespaced: bool) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespaced.then(|| spec.namespace.clone()),
        labels: Some(labels(spec, component)),
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

fn args(spec: &AgentSpec, extra: &[&str]) -> Vec<String> {
    let mut a = vec!["serve".to_string()];
    a.extend(extra.iter().map(ToString::to_string));
    if let Some(ttl) = &spec.ttl {
        a.extend(["--ttl".into(), ttl.clone()]);
    }
    a
}

fn host_path(name: &str, path: &str, kind: &str) -> (Volume, VolumeMount) {
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
            mount_path: format!("/host{path}"),
            read_only: Some(true),
            ..VolumeMount::default()
        },
    )
}

fn daemonset(spec: &AgentSpec, name: &str, component: &str, pod: PodSpec) -> DaemonSet {
    let selector = BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), "prober".to_string()),
        (
            "app.kubernetes.io/component".to_string(),
            component.to_string(),
        ),
    ]);
    DaemonSet {
        metadata: meta(spec, name, component, true),
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

/// Tolerates every taint: control-plane nodes must be covered too.
fn tolerate_all() -> Vec<Toleration> {
    vec![Toleration {
        operator: Some("Exists".into()),
        ..Toleration::default()
    }]
}

/// The host-network agent: sniffs VXLAN (`CAP_NET_RAW` only) and reads the node's files read-only.
#[must_use]
pub fn host_daemonset(spec: &AgentSpec) -> DaemonSet {
    let mounts = [
        host_path("cni-config", "/etc/cni/net.d", "DirectoryOrCreate"),
        host_path("kubernetes", "/etc/kubernetes", "DirectoryOrCreate"),
        host_path("resolv-conf", "/etc/resolv.conf", "File"),
    ];
    let container = Container {
        name: "probe-pod".into(),
        image: Some(spec.image.clone()),
        args: Some(args(spec, &[])),
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
            service_account_name: Some(SERVICE_ACCOUNT.into()),
            automount_service_account_token: Some(false),
            tolerations: Some(tolerate_all()),
            priority_class_name: Some("system-node-critical".into()),
            containers: vec![container],
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
            ..SecurityContext::default()
        }),
        ..Container::default()
    };
    daemonset(
        spec,
        POD_DAEMONSET,
        "pod-agent",
        PodSpec {
            service_account_name: Some(SERVICE_ACCOUNT.into()),
            automount_service_account_token: Some(false),
            tolerations: Some(tolerate_all()),
            security_context: Some(PodSecurityContext {
                sysctls: Some(vec![Sysctl {
                    name: "net.ipv4.ping_group_range".into(),
                    value: "0 2147483647".into(),
                }]),
                ..PodSecurityContext::default()
            }),
            containers: vec![container],
            ..PodSpec::default()
        },
    )
}

#[must_use]
pub fn namespace(spec: &AgentSpec) -> Namespace {
    Namespace {
        metadata: meta(spec, &spec.namespace, "namespace", false),
        ..Namespace::default()
    }
}

/// The agents' identity: no API permissions at all, and no token mounted.
#[must_use]
pub fn service_account(spec: &AgentSpec) -> ServiceAccount {
    ServiceAccount {
        metadata: meta(spec, SERVICE_ACCOUNT, "agent", true),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_agent_has_host_network_net_raw_only_and_read_only_mounts() {
        let ds = host_daemonset(&AgentSpec::default());
        let pod = ds.spec.unwrap().template.spec.unwrap();
        assert_eq!(pod.host_network, Some(true));
        assert_eq!(pod.dns_policy.as_deref(), Some("ClusterFirstWithHostNet"));
        assert_eq!(pod.automount_service_account_token, Some(false));
        assert_eq!(
            pod.tolerations.unwrap()[0].operator.as_deref(),
            Some("Exists")
        );
        let c = &pod.containers[0];
        let caps = c
            .security_context
            .as_ref()
            .unwrap()
            .capabilities
            .as_ref()
            .unwrap();
        assert_eq!(caps.add.as_deref(), Some(&["NET_RAW".to_string()][..]));
        assert_eq!(caps.drop.as_deref(), Some(&["ALL".to_string()][..]));
        assert_eq!(
            c.security_context
                .as_ref()
                .unwrap()
                .read_only_root_filesystem,
            Some(true)
        );
        let mounts = c.volume_mounts.as_ref().unwrap();
        assert!(
            mounts
                .iter()
                .all(|m| m.read_only == Some(true) && m.mount_path.starts_with("/host/"))
        );
        let paths: Vec<&str> = mounts.iter().map(|m| m.mount_path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/host/etc/cni/net.d",
                "/host/etc/kubernetes",
                "/host/etc/resolv.conf"
            ]
        );
    }

    #[test]
    fn pod_agent_is_unprivileged() {
        let spec = AgentSpec {
            ttl: Some("30m".into()),
            run: Some("r1".into()),
            ..AgentSpec::default()
        };
        let ds = pod_daemonset(&spec);
        assert_eq!(ds.metadata.labels.as_ref().unwrap()[RUN_LABEL], "r1");
        let pod = ds.spec.unwrap().template.spec.unwrap();
        assert_eq!(pod.host_network, None);
        assert!(pod.volumes.is_none(), "no host mounts");
        assert_eq!(
            pod.security_context.unwrap().sysctls.unwrap()[0].name,
            "net.ipv4.ping_group_range"
        );
        let c = &pod.containers[0];
        assert_eq!(
            c.args.as_deref().unwrap(),
            ["serve", "--sniff", "never", "--ttl", "30m"]
        );
        let sc = c.security_context.as_ref().unwrap();
        assert_eq!(
            (sc.run_as_non_root, sc.run_as_user),
            (Some(true), Some(65_534))
        );
        assert!(sc.capabilities.as_ref().unwrap().add.is_none());
    }

    #[test]
    fn the_service_account_mounts_no_token() {
        assert_eq!(
            service_account(&AgentSpec::default()).automount_service_account_token,
            Some(false)
        );
    }
}
