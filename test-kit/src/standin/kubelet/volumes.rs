//! The kubelet's volume check: a hostPath volume's path must be on the node as its type says.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// Whether a hostPath volume's path exists under the node's root as its `type` requires, as
/// the kubelet's hostPath type check (`pkg/volume/hostpath/host_path.go`, `checkType`) does.
pub(super) fn host_path_error(root: &Path, pod: &Value) -> Option<String> {
    for v in pod["spec"]["volumes"].as_array().into_iter().flatten() {
        let hp = &v["hostPath"];
        let Some(path) = hp["path"].as_str() else {
            continue;
        };
        let on_node: PathBuf = root.join(path.trim_start_matches('/'));
        let problem = match hp["type"].as_str().unwrap_or_default() {
            "File" if !on_node.is_file() => Some("is not a file"),
            "Directory" if !on_node.is_dir() => Some("is not a directory"),
            _ => None,
        };
        if let Some(p) = problem {
            return Some(format!(
                "MountVolume.SetUp failed for volume {:?} : hostPath type check failed: {path} {p}",
                v["name"].as_str().unwrap_or_default()
            ));
        }
    }
    None
}
