//! Kubernetes manifests in tests: a YAML stream as objects, and strict validation against the real schemas.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The Kubernetes versions every manifest must validate against.
pub const KUBE_VERSIONS: [&str; 5] = ["1.30.0", "1.31.0", "1.32.0", "1.33.0", "1.34.0"];

/// The objects of a multi-document YAML stream; a document of comments only (the header of
/// deploy/base/agents.yaml) is no object and left out.
#[must_use]
pub fn docs(text: &str) -> Vec<Value> {
    text.split("\n---")
        .map(|d| d.trim_start_matches("---").trim())
        .filter(|d| !d.is_empty())
        .map(|d| serde_saphyr::from_str(d).unwrap_or_else(|e| panic!("not YAML: {e}\n{d}")))
        .filter(|v: &Value| !v.is_null())
        .collect()
}

/// Checks that `files` (`what` names them in a failure) validate with `validator`
/// (`kubernetes-validate`) `--strict` against every version of [`KUBE_VERSIONS`]: every field
/// known to the schema. First it checks the validator can fail: an unknown field is refused.
pub fn validate_strictly(validator: &Path, files: &[PathBuf], what: &str) {
    let dir = tempfile_dir();
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: x\nbogus: 1\n",
    )
    .unwrap();
    let refused = Command::new(validator)
        .args(["--strict", "--quiet", "-k", KUBE_VERSIONS[0]])
        .arg(&bad)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        !refused.status.success(),
        "kubernetes-validate accepted an unknown field"
    );
    for version in KUBE_VERSIONS {
        let out = Command::new(validator)
            .args(["--strict", "--quiet", "-k", version])
            .args(files)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{what} does not validate against Kubernetes {version}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A fresh directory of this process for the validator's refused document.
fn tempfile_dir() -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "test-kit-validate-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[cfg(test)]
mod tests {
    #[test]
    fn comment_only_documents_are_no_objects() {
        let got = super::docs("# header\n---\napiVersion: v1\nkind: A\n---\n---\nkind: B\n");
        let kinds: Vec<_> = got.iter().map(|v| v["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["A", "B"]);
    }
}
