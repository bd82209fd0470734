//! deploy/scheduled: `prober manifests --scheduled` is the overlay, and valid.

use crate::common::{KUBE_DEPS, tool};
use crate::common::{root, text};
use crate::kit::*;
use test_kit::manifests::{docs, validate_strictly};

use std::process::Command;

use serde_json::Value;

/// Whether `v` survives a round trip through its Kubernetes type unchanged: a field the schema
/// does not know is dropped on the way, and the comparison fails.
fn strict<K: serde::de::DeserializeOwned + serde::Serialize>(v: &Value) {
    let typed: K = serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{e}: {v}"));
    assert_eq!(
        &serde_json::to_value(typed).unwrap(),
        v,
        "fields the schema does not know"
    );
}

/// `yaml` validates with `kubernetes-validate --strict` against Kubernetes 1.30 to 1.34 (every
/// field known to the schema), as deploy/base does in tests/manifests.rs.
fn validates_strictly(yaml: &str) {
    let Some(validator) = tool("kubernetes-validate", KUBE_DEPS) else {
        return;
    };
    let dir = tmp("prober-sched-validate-");
    let file = dir.path().join("scheduled.yaml");
    std::fs::write(&file, yaml).unwrap();
    validate_strictly(&validator, &[file], "deploy/scheduled");
}

#[test]
fn manifests_scheduled_is_the_overlay_and_valid() {
    use k8s_openapi::api::apps::v1::DaemonSet;
    use k8s_openapi::api::batch::v1::CronJob;
    use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};

    let out = run(&["manifests", "--scheduled"]);
    assert!(out.status.success(), "{}", text(&out));
    let printed = String::from_utf8(out.stdout).unwrap();
    let objects = docs(&printed);
    for o in &objects {
        match o["kind"].as_str().unwrap() {
            "Namespace" => strict::<Namespace>(o),
            "ServiceAccount" => strict::<ServiceAccount>(o),
            "Role" => strict::<Role>(o),
            "ClusterRole" => strict::<ClusterRole>(o),
            "RoleBinding" => strict::<RoleBinding>(o),
            "ClusterRoleBinding" => strict::<ClusterRoleBinding>(o),
            "CronJob" => strict::<CronJob>(o),
            "DaemonSet" => strict::<DaemonSet>(o),
            "NetworkPolicy" => strict::<NetworkPolicy>(o),
            other => panic!("unexpected kind {other}"),
        }
    }
    let ns = &objects[0];
    assert_eq!(
        ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "privileged"
    );
    let cron = objects.iter().find(|o| o["kind"] == "CronJob").unwrap();
    assert_eq!(cron["spec"]["concurrencyPolicy"], "Forbid");
    let job = &cron["spec"]["jobTemplate"]["spec"];
    assert!(job["activeDeadlineSeconds"].as_u64().unwrap() > 0);
    assert!(cron["spec"]["successfulJobsHistoryLimit"].is_u64());
    assert!(cron["spec"]["failedJobsHistoryLimit"].is_u64());
    let pod = &job["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "prober-scheduled");
    let args: Vec<&str> = pod["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(&args[..3], ["matrix", "--use-existing", "--remember"]);
    // Its RBAC: prober/tests/kube/scheduled_rbac.rs (scheduled_rbac_allows_every_request_of_a_scheduled_run)
    // replays every request of a scheduled run against these rules. Here: what it is bound to
    // exists in what is printed, so no binding points at a missing role.
    for b in objects
        .iter()
        .filter(|o| o["kind"] == "RoleBinding" || o["kind"] == "ClusterRoleBinding")
    {
        let (kind, name) = (&b["roleRef"]["kind"], &b["roleRef"]["name"]);
        assert!(
            objects.iter().any(|o| &o["kind"] == kind
                && &o["metadata"]["name"] == name
                && (kind == "ClusterRole"
                    || o["metadata"]["namespace"] == b["metadata"]["namespace"])),
            "{} {} in {} binds {kind} {name}, which deploy/scheduled does not hold",
            b["kind"],
            b["metadata"]["name"],
            b["metadata"]["namespace"]
        );
    }
    validates_strictly(&printed);
    let Some(kubectl) = tool("kubectl", KUBE_DEPS) else {
        return;
    };
    let rendered = Command::new(kubectl)
        .arg("kustomize")
        .arg(root().join("deploy/scheduled"))
        .output()
        .unwrap();
    assert!(rendered.status.success(), "{}", text(&rendered));
    assert_eq!(
        printed,
        String::from_utf8(rendered.stdout).unwrap(),
        "`prober manifests --scheduled` differs from `kubectl kustomize deploy/scheduled`"
    );
}
