//! The faults a test sets on a node's kubelet, as its pods see them: a `NotReady` node leaves
//! them as they are, a broken CNI fails their sandbox, a failing registry their image pull.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A `NotReady` node's kubelet does nothing; the pod stays as it is.
pub(super) fn not_ready() -> Value {
    json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]})
}

/// The `FailedCreatePodSandBox` event's message when the CNI cannot set up a pod network.
pub(super) const SANDBOX: &str = "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox: plugin type=\"flannel\" failed (add): failed to delegate add: failed to set bridge addr: \"cni0\" already has an IP address different from 10.244.0.1/24";

/// The waiting reason and message of a pod whose image pull fails: `ErrImagePull` at first,
/// `ImagePullBackOff` after.
pub(super) fn image_pull(pod: &Value, created: Instant) -> (&'static str, String) {
    let image = pod["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_default();
    if created.elapsed() < Duration::from_secs(2) {
        (
            "ErrImagePull",
            format!(
                "failed to pull and unpack image \"{image}\": failed to resolve reference \"{image}\": {image}: not found"
            ),
        )
    } else {
        (
            "ImagePullBackOff",
            format!("Back-off pulling image \"{image}\""),
        )
    }
}
