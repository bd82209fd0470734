//! `prober preflight --kubeconfig` against the real control plane: the cluster discovered
//! through the API, its nodes probed by this run's host agents through `pods/exec`, the
//! candidate (not a node yet) reached through `ip netns exec`.

use crate::common::{agent, text};
use crate::flow::rbac_only;
use crate::kit::*;

#[test]
fn preflight_through_the_real_api_names_the_gap_toward_the_candidate_and_leaves_nothing() {
    let Some(k) = RealLab::up(
        "rcp",
        "tests/scenarios/preflight/overlay-dropped-to-candidate.yaml",
    ) else {
        return;
    };
    rbac_only(&k);
    let user = k.user("prober");
    let candidate = k
        .lab
        .layout
        .candidate
        .clone()
        .expect("the scenario has a candidate");
    let exec = format!("ip netns exec {}", candidate.ns);
    let out = prober_cmd(
        &k,
        &[
            "preflight",
            "--candidate",
            &candidate.name,
            "--candidate-address",
            &candidate.address.to_string(),
            "--candidate-exec",
            &exec,
            "--candidate-host-root",
            &candidate.root.display().to_string(),
            "--agent-bin",
            &agent().display().to_string(),
            "--image",
            IMAGE,
            "--agent-wait",
            "90s",
            "-o",
            "json",
        ],
        &user,
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let r = report(&out);
    let f = r["findings"].as_array().unwrap();
    assert_eq!(
        f.len(),
        1,
        "one finding and nothing else called broken: {}",
        text(&out)
    );
    assert_eq!(f[0]["kind"], "firewall-gap");
    assert_eq!(f[0]["port"], 8472);
    assert_eq!(f[0]["direction"], "one");
    assert_eq!(f[0]["to"], serde_json::json!([candidate.name]));
    nothing_left(&k);
}
