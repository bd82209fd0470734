//! The termination message the kubelet keeps of a container that exited.

use serde_json::Value;

use super::super::Inner;
use super::process::log_path;

/// The kubelet's termination message of a container that failed under
/// `terminationMessagePolicy: FallbackToLogsOnError`: the tail of its log, at most
/// `MaxContainerTerminationMessageLogLines` (80) lines and `MaxContainerTerminationMessageLogLength`
/// (2,048) bytes, the end kept (kubernetes/kubernetes `pkg/kubelet/kuberuntime/kuberuntime_container.go`,
/// `readLastStringFromContainerLogs`; the limits in `pkg/kubelet/container/runtime.go`). Only on
/// a failure (a non-zero exit), and none under the default policy.
pub(super) fn termination_message(inner: &Inner, pod: &Value, exit: i32) -> Option<String> {
    const LINES: usize = 80;
    const BYTES: usize = 2048;
    let c = &pod["spec"]["containers"][0];
    if exit == 0 || c["terminationMessagePolicy"] != "FallbackToLogsOnError" {
        return None;
    }
    let text = std::fs::read_to_string(log_path(inner, pod)).ok()?;
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(LINES)..].join("\n");
    let mut start = tail.len().saturating_sub(BYTES);
    while !tail.is_char_boundary(start) {
        start += 1;
    }
    Some(tail[start..].to_string())
}
