//! The agents' allow `NetworkPolicy` end to end against the API stand-in, with deploy/base's RBAC
//! enforced: a run creates it before its agents and removes it with them, and `prober cleanup`
//! removes the one a crashed run left.

use std::path::PathBuf;

use prober::runtime::kube::deploy::{self, Created};
use prober::runtime::kube::manifests::AgentSpec;
use serde_json::{Value, json};
use test_kit::standin::{Config, StandIn};

/// deploy/base/rbac.yaml's objects, and the namespaces it binds into, as an admin applied them.
fn cluster_with_base_rbac() -> Vec<Value> {
    let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/base/rbac.yaml");
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&std::fs::read_to_string(base).unwrap()).unwrap();
    let ns = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
               "status": {"phase": "Active"}})
    };
    let mut out = vec![ns("default"), ns("kube-system"), ns("prober-system")];
    out.extend(docs.into_iter().filter(|d| !d.is_null()));
    out
}

fn standin(dir: &tempfile::TempDir) -> StandIn {
    let mut config = Config::new(
        &dir.path().join("standin"),
        Vec::new(),
        &PathBuf::from(env!("CARGO_BIN_EXE_prober")),
    );
    config.rbac = true;
    let s = StandIn::start(config).unwrap();
    s.seed(cluster_with_base_rbac());
    s
}

fn spec(run: &str, expires: &str) -> AgentSpec {
    AgentSpec {
        run: Some(run.into()),
        ttl: Some("2h".into()),
        expires: Some(expires.into()),
        ..AgentSpec::default()
    }
}

#[test]
fn a_run_creates_its_allow_policy_and_removes_it_with_its_agents() {
    let dir = tempfile::tempdir().unwrap();
    let s = standin(&dir);
    let kubeconfig = s.kubeconfig.clone();
    let spec = spec("r1", "2999-01-01T00:00:00Z");
    let (created, made, deleted) = s.block_on(async {
        let (client, _, _) = prober::runtime::kube::client(Some(&kubeconfig), None)
            .await
            .unwrap();
        let mut made = Created::default();
        let mut notes = Vec::new();
        deploy::apply(&client, &spec, &mut made, &mut |n| notes.push(n))
            .await
            .unwrap();
        assert!(notes.is_empty(), "{notes:?}");
        let created = s.get("networkpolicies", "prober-system", "prober-agents-r1");
        let deleted = deploy::cleanup(&client, &spec, &made).await.unwrap();
        (created, made, deleted)
    });
    let np = created.expect("the run created its allow policy");
    assert_eq!(np["kind"], "NetworkPolicy");
    assert_eq!(
        np["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"],
        "pod-agent"
    );
    assert_eq!(np["metadata"]["labels"]["prober.io/run"], "r1");
    assert_eq!(np["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    assert_eq!(
        made.network_policy.as_ref().map(|o| o.name.as_str()),
        Some("prober-agents-r1")
    );
    assert!(
        deleted.contains(&"networkpolicy/prober-agents-r1".to_string()),
        "{deleted:?}"
    );
    assert_eq!(
        s.get("networkpolicies", "prober-system", "prober-agents-r1"),
        None,
        "removed with the agents"
    );
    let refused: Vec<String> = s
        .seen()
        .iter()
        .filter(|r| r.code == 403)
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(refused.is_empty(), "deploy/base refused: {refused:?}");
    // The policy's create and delete were authorised by deploy/base (RBAC is enforced).
    let policy_requests: Vec<(String, u16)> = s
        .seen()
        .iter()
        .filter(|r| r.path.contains("/networkpolicies"))
        .filter(|r| r.method != "GET")
        .map(|r| (r.method.clone(), r.code))
        .collect();
    assert_eq!(
        policy_requests,
        [("POST".to_string(), 201), ("DELETE".to_string(), 200)]
    );
}

#[test]
fn prober_cleanup_removes_the_allow_policy_a_crashed_run_left() {
    let dir = tempfile::tempdir().unwrap();
    let s = standin(&dir);
    let kubeconfig = s.kubeconfig.clone();
    let (before, deleted) = s.block_on(async {
        let (client, _, _) = prober::runtime::kube::client(Some(&kubeconfig), None)
            .await
            .unwrap();
        // A run that expired long ago and never cleaned up (its coordinator crashed).
        let mut made = Created::default();
        deploy::apply(
            &client,
            &spec("r9", "2020-01-01T00:00:00Z"),
            &mut made,
            &mut |_| {},
        )
        .await
        .unwrap();
        let before = s.get("networkpolicies", "prober-system", "prober-agents-r9");
        let (deleted, kept) = deploy::cleanup_leftovers(&client, "prober-system", false)
            .await
            .unwrap();
        assert!(kept.is_empty(), "{kept:?}");
        (before, deleted)
    });
    assert!(before.is_some());
    assert!(
        deleted.contains(&"networkpolicy/prober-agents-r9".to_string()),
        "{deleted:?}"
    );
    assert_eq!(
        s.get("networkpolicies", "prober-system", "prober-agents-r9"),
        None
    );
}
