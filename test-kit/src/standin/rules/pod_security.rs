//! Pod Security admission: a namespace's `pod-security.kubernetes.io/enforce` level refuses
//! pods that break it (no label: `privileged`, the default of a cluster without an admission
//! configuration). The host agent (hostNetwork, hostPath, `NET_RAW`, a host port) needs
//! `privileged`. Kubernetes: `staging/src/k8s.io/pod-security-admission/policy/`
//! `check_hostNamespaces.go`, `check_hostPathVolumes.go`, `check_hostPorts.go`,
//! `check_capabilities_baseline.go`, `check_runAsNonRoot.go` and `admission/admission.go`
//! (the 403 "violates PodSecurity \"LEVEL:latest\": ...").

use serde_json::Value;

use super::super::api::Status;
use super::super::store::{KINDS, Key, Store, index};

/// The capabilities the baseline level allows a container to add
/// (`check_capabilities_baseline.go`, `capabilities_allowed_1_0`).
const BASELINE_CAPS: [&str; 13] = [
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

fn baseline(spec: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let host: Vec<&str> = ["hostNetwork", "hostPID", "hostIPC"]
        .into_iter()
        .filter(|f| spec[*f] == true)
        .collect();
    if !host.is_empty() {
        let list: Vec<String> = host.iter().map(|f| format!("{f}=true")).collect();
        out.push(format!("host namespaces ({})", list.join(", ")));
    }
    let host_paths: Vec<String> = spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["hostPath"].is_object())
        .map(|v| format!("{:?}", v["name"].as_str().unwrap_or_default()))
        .collect();
    if !host_paths.is_empty() {
        out.push(format!(
            "hostPath volumes (volumes {})",
            host_paths.join(", ")
        ));
    }
    let mut ports = Vec::new();
    let mut caps = Vec::new();
    for c in spec["containers"].as_array().into_iter().flatten() {
        for p in c["ports"].as_array().into_iter().flatten() {
            if let Some(hp) = p["hostPort"].as_i64().filter(|p| *p > 0) {
                ports.push(hp.to_string());
            }
        }
        for cap in c["securityContext"]["capabilities"]["add"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !BASELINE_CAPS.contains(&cap) {
                caps.push(format!("{cap:?}"));
            }
        }
        if c["securityContext"]["privileged"] == true {
            out.push("privileged".into());
        }
    }
    if !ports.is_empty() {
        out.push(format!("hostPort (ports {})", ports.join(", ")));
    }
    if !caps.is_empty() {
        out.push(format!(
            "non-default capabilities (capabilities {})",
            caps.join(", ")
        ));
    }
    out
}

fn restricted(spec: &Value) -> Vec<String> {
    let mut out = baseline(spec);
    for c in spec["containers"].as_array().into_iter().flatten() {
        let sc = &c["securityContext"];
        let non_root =
            sc["runAsNonRoot"] == true || spec["securityContext"]["runAsNonRoot"] == true;
        if !non_root || sc["runAsUser"] == 0 {
            out.push("runAsNonRoot != true".into());
        }
        if sc["allowPrivilegeEscalation"] != false {
            out.push("allowPrivilegeEscalation != false".into());
        }
    }
    out
}

pub fn admit(store: &Store, ns: &str, name: &str, pod: &Value) -> Result<(), Status> {
    let level = store
        .get(&Key::new(index("namespaces"), "", ns))
        .and_then(|n| {
            n["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
                .as_str()
                .map(String::from)
        })
        .unwrap_or_else(|| "privileged".into());
    let broken = match level.as_str() {
        "baseline" => baseline(&pod["spec"]),
        "restricted" => restricted(&pod["spec"]),
        _ => Vec::new(),
    };
    if broken.is_empty() {
        return Ok(());
    }
    Err(Status::forbidden(
        &KINDS[index("pods")],
        name,
        &format!(
            "violates PodSecurity \"{level}:latest\": {}",
            broken.join(", ")
        ),
    ))
}
