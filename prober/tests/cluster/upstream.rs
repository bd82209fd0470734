//! Discovery on upstream projects' own objects applied to the real API server: flannel's
//! `Documentation/kube-flannel.yml`, read from the Go module cache at the version
//! `test-kit/cluster/upstream/go.mod` pins (never copied into the repository).

use std::path::PathBuf;
use std::process::Command;

use crate::common::{root, text};
use crate::flow::rbac_only;
use crate::kit::*;
use serde_json::Value;

/// An upstream module's directory in the module cache (fetched through the proxy when missing).
fn module_dir(module: &str) -> PathBuf {
    let out = Command::new("go")
        .args(["list", "-m", "-f", "{{.Dir}}", module])
        .current_dir(root().join("test-kit/cluster/upstream"))
        .env("GOFLAGS", "-mod=mod")
        .output()
        .expect("go is installed (scripts/test builds the control plane with it)");
    assert!(out.status.success(), "go list -m {module}: {}", text(&out));
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// flannel's own manifest (its namespace, RBAC, ConfigMap with `net-conf.json` and DaemonSet,
/// as `kubectl apply -f kube-flannel.yml` installs them): discovery reads the lab's cluster from
/// it exactly as from the lab's own description, VXLAN port and VNI left to flannel's defaults.
#[test]
fn discovery_on_flannels_own_manifest_finds_the_labs_cluster() {
    let dir = module_dir("github.com/flannel-io/flannel");
    let text_yaml = std::fs::read_to_string(dir.join("Documentation/kube-flannel.yml")).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text_yaml).unwrap();
    let docs: Vec<Value> = docs.into_iter().filter(|d| !d.is_null()).collect();
    assert!(
        docs.iter().any(|d| d["kind"] == "DaemonSet"),
        "{}",
        dir.display()
    );
    let Some(k) = RealLab::up_with_flannel("rcf", "tests/scenarios/flannel-8472.yaml", docs) else {
        return;
    };
    rbac_only(&k);
    let user = k.user("prober");
    let out = run(&k, &["discover", "-o", "json"], &user);
    assert!(out.status.success(), "{}", text(&out));
    let found: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_discovered_the_lab(&k, found, "on flannel's own manifest");
}
