//! A pod's deletion grace period: the one the delete asks for, else the pod's own
//! `terminationGracePeriodSeconds` (30 s by default); 0 for a pod no node runs (unscheduled) or
//! one that has finished. Grace 0 removes the object at once; otherwise it stays, with its
//! `deletionTimestamp`, until its node's kubelet confirms the containers stopped, which a node
//! without a working kubelet (`NotReady`) never does. Kubernetes: `pkg/registry/core/pod/
//! strategy.go` (`CheckGracefulDelete`), `staging/src/k8s.io/apiserver/pkg/registry/rest/
//! delete.go` (`BeforeDelete`: an object already being deleted may only have its grace shortened,
//! and grace 0 deletes it immediately).

use serde_json::Value;

/// The grace period, in seconds, a delete with `options` (`DeleteOptions`) gives `pod`.
pub fn grace(pod: &Value, options: &Value) -> i64 {
    let asked = options["gracePeriodSeconds"]
        .as_i64()
        .or_else(|| pod["spec"]["terminationGracePeriodSeconds"].as_i64())
        .unwrap_or(30);
    let unscheduled = pod["spec"]["nodeName"].as_str().is_none_or(str::is_empty);
    let finished = matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    );
    if unscheduled || finished {
        0
    } else if asked < 0 {
        1
    } else {
        asked
    }
}
