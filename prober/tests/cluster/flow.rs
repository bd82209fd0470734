//! A run against the real control plane: discovery and the matrix on the lab's own cluster,
//! as a user bound to deploy/base's RBAC, and what the run leaves behind (nothing).

use crate::common::{root, text};
use crate::kit::*;
use serde_json::Value;

/// deploy/base's namespace, service accounts and RBAC, without the agents' DaemonSets (a run
/// creates its own), and the optional binding for flannel's namespace, applied by an admin.
pub(crate) fn rbac_only(k: &RealLab) {
    let mut docs: Vec<Value> = Vec::new();
    for f in [
        "deploy/base/agents.yaml",
        "deploy/base/rbac.yaml",
        "deploy/base/optional/kube-flannel.yaml",
    ] {
        let text = std::fs::read_to_string(root().join(f)).unwrap();
        let parsed: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
        docs.extend(
            parsed
                .into_iter()
                .filter(|d| !d.is_null() && d["kind"] != "DaemonSet"),
        );
    }
    k.cluster.apply(&docs).unwrap();
}

#[test]
fn discovery_and_the_matrix_on_the_real_control_plane_find_the_8472_gap_and_leave_nothing() {
    let Some(k) = RealLab::up("rcm", "tests/scenarios/flannel-8472.yaml") else {
        return;
    };
    rbac_only(&k);
    let user = k.user("prober");
    let since = k.cluster.audit().len();

    // discover: the lab's own inventory, as far as discovery can know it.
    let out = run(&k, &["discover", "-o", "json"], &user);
    assert!(out.status.success(), "{}", text(&out));
    let mut found: Value = serde_json::from_slice(&out.stdout).unwrap();
    let policies = found["cluster"]["policies"].take();
    assert_eq!(
        policies[0]["metadata"]["name"], "prober-agents",
        "{policies}"
    );
    assert_discovered_the_lab(&k, found, "through the real API server");

    // matrix: this run's own agents, scheduled by the real scheduler, run by the shims.
    let out = matrix(&k, &user, "90s", &[]);
    let r = report(&out);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    for want in &k.scenario.expanded_expect().findings {
        assert!(
            r["findings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| want.matches(&serde_json::from_value(f.clone()).unwrap())),
            "the run misses {want:?}:\n{}",
            text(&out)
        );
    }
    all_ran(&out);
    nothing_left(&k);
    // Namespaces the cluster does not have are no permission problem: no warning about them.
    assert!(
        !text(&out).contains("not allowed to"),
        "warned about namespaces that do not exist:\n{}",
        text(&out)
    );
    let refused = refused(&k, since);
    assert!(
        refused.is_empty(),
        "the API server refused: {refused:#?}\n{}",
        text(&out)
    );
    let token = std::fs::read_to_string(&user).unwrap();
    let token = token
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .unwrap();
    assert!(!text(&out).contains(token), "the token was printed");
}
