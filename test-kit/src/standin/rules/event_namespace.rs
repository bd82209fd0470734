//! A core/v1 Event must sit in its involved object's namespace; one about a cluster-scoped
//! object (a Namespace, a Node) only in "" or "default". Kubernetes:
//! `pkg/apis/core/validation/events.go` (`legacyValidateEvent`: "does not match
//! event.namespace" on `involvedObject.namespace`), answered 422 Invalid.

use serde_json::Value;

use super::super::api::Status;

pub fn validate(ns: &str, name: &str, event: &Value) -> Result<(), Status> {
    // Events with an eventTime are the events.k8s.io kind, validated otherwise.
    if event["eventTime"].is_string() {
        return Ok(());
    }
    let involved = event["involvedObject"]["namespace"]
        .as_str()
        .unwrap_or_default();
    let ok = if involved.is_empty() {
        ns.is_empty() || ns == "default"
    } else {
        involved == ns
    };
    if ok {
        Ok(())
    } else {
        Err(Status::invalid(
            "Event",
            "",
            name,
            "involvedObject.namespace",
            &format!("Invalid value: {involved:?}: does not match event.namespace"),
        ))
    }
}
