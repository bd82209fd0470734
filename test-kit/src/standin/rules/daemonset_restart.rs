//! A DaemonSet's pods restart always: `restartPolicy` defaults to `Always`
//! (`pkg/apis/core/v1/defaults.go`, `SetDefaults_PodSpec`) and any other value is refused
//! (`pkg/apis/apps/validation/validation.go`, `ValidateDaemonSetSpec`: `NotSupported` with
//! supported values `Always`), answered 422. So an agent that exits 0 is started again.

use serde_json::{Value, json};

use super::super::api::Status;

/// `restartPolicy: Always` where a pod spec leaves it unset.
pub fn default_restart_policy(spec: &mut Value) {
    if spec.is_object() && spec["restartPolicy"].is_null() {
        spec["restartPolicy"] = json!("Always");
    }
}

pub fn validate(name: &str, ds: &Value) -> Result<(), Status> {
    let policy = &ds["spec"]["template"]["spec"]["restartPolicy"];
    if policy == "Always" {
        return Ok(());
    }
    Err(Status::invalid(
        "DaemonSet",
        "apps",
        name,
        "spec.template.spec.restartPolicy",
        &format!("Unsupported value: {policy}: supported values: \"Always\""),
    ))
}
