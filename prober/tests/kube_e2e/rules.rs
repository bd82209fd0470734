//! The stand-in keeps the API server's rules, checked through the real kube client and the
//! project's own RBAC.

use std::time::Duration;

use crate::common::text;
use crate::kit::*;
use serde_json::json;

#[test]
#[allow(clippy::many_single_char_names, clippy::too_many_lines)] // one stand-in, rule after rule
fn the_standin_keeps_the_api_servers_rules() {
    use futures_util::StreamExt;
    use k8s_openapi::api::apps::v1::DaemonSet;
    use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace};
    use kube::api::{
        Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions, WatchEvent, WatchParams,
    };
    let (s, _dir) = bare_standin(false);
    let c = client(&s, &s.admin_kubeconfig);
    let pp = PostParams::default();
    s.block_on(async {
        let namespaces: Api<Namespace> = Api::all(c.clone());
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "t1"}})).unwrap();
        let made = namespaces.create(&pp, &ns).await.unwrap();
        // 409 AlreadyExists.
        assert_eq!(api_code(namespaces.create(&pp, &ns).await).0, 409);

        // pkg/apis/core/validation/events.go: an Event about a cluster-scoped object only in
        // "" or "default"; about a namespaced one, in its namespace.
        let event = |ns: &str, involved_ns: Option<&str>| -> Event {
            serde_json::from_value(json!({"metadata": {"name": format!("e-{ns}"), "namespace": ns},
                "involvedObject": {"kind": "Namespace", "name": "t1", "namespace": involved_ns},
                "reason": "Test", "message": "m", "type": "Normal"}))
            .unwrap()
        };
        let (code, msg) = api_code(Api::<Event>::namespaced(c.clone(), "t1").create(&pp, &event("t1", None)).await);
        assert_eq!(code, 422, "{msg}");
        assert!(msg.contains("does not match event.namespace"), "{msg}");
        Api::<Event>::namespaced(c.clone(), "default").create(&pp, &event("default", None)).await.unwrap();
        Api::<Event>::namespaced(c.clone(), "t1").create(&pp, &event("t1", Some("t1"))).await.unwrap();

        // pkg/apis/apps/validation/validation.go: a DaemonSet restarts always.
        let ds = |policy: Option<&str>| -> DaemonSet {
            serde_json::from_value(json!({"metadata": {"name": format!("d{}", policy.unwrap_or("x").to_lowercase())},
                "spec": {"selector": {"matchLabels": {"a": "b"}},
                  "template": {"metadata": {"labels": {"a": "b"}},
                    "spec": {"restartPolicy": policy, "nodeSelector": {"none": "none"},
                             "containers": [{"name": "c", "image": "i"}]}}}}))
            .unwrap()
        };
        let dss: Api<DaemonSet> = Api::namespaced(c.clone(), "t1");
        let (code, msg) = api_code(dss.create(&pp, &ds(Some("Never"))).await);
        assert_eq!(code, 422, "{msg}");
        assert!(msg.contains("spec.template.spec.restartPolicy"), "{msg}");
        let d = dss.create(&pp, &ds(None)).await.unwrap();
        assert_eq!(d.spec.unwrap().template.spec.unwrap().restart_policy.as_deref(), Some("Always"));

        // Delete preconditions: another uid is a 409; a missing object a 404.
        let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "t1");
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "m"}, "data": {"k": "v"}})).unwrap();
        cms.create(&pp, &cm).await.unwrap();
        let wrong = DeleteParams { preconditions: Some(Preconditions { uid: Some("other".into()), resource_version: None }), ..DeleteParams::default() };
        let (code, msg) = api_code(cms.delete("m", &wrong).await);
        assert_eq!(code, 409, "{msg}");
        assert!(msg.contains("Precondition failed"), "{msg}");
        assert_eq!(api_code(cms.delete("nothing", &DeleteParams::default()).await).0, 404);

        // Server-side apply: another manager's field is a conflict unless forced.
        let patch = |v: &str| Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": v}}));
        cms.patch("a", &PatchParams::apply("one"), &patch("1")).await.unwrap();
        let (code, msg) = api_code(cms.patch("a", &PatchParams::apply("two"), &patch("2")).await);
        assert_eq!(code, 409, "{msg}");
        let forced = cms.patch("a", &PatchParams::apply("two").force(), &patch("2")).await.unwrap();
        assert_eq!(forced.data.unwrap()["k"], "2");

        // Selectors.
        let labelled: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "l", "labels": {"x": "y"}}})).unwrap();
        cms.create(&pp, &labelled).await.unwrap();
        let list = cms.list(&kube::api::ListParams::default().labels("x=y")).await.unwrap();
        assert_eq!(list.items.len(), 1);
        let list = cms.list(&kube::api::ListParams::default().fields("metadata.name=m")).await.unwrap();
        assert_eq!(list.items.len(), 1);

        // A watch from a compacted version: 410 Gone in the stream.
        let version = list.metadata.resource_version.unwrap();
        let later: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "later"}})).unwrap();
        cms.create(&pp, &later).await.unwrap();
        s.compact();
        let mut w = Box::pin(cms.watch(&WatchParams::default().timeout(5), &version).await.unwrap());
        match w.next().await {
            Some(Ok(WatchEvent::Error(e))) => assert_eq!(e.code, 410),
            other => panic!("expected 410 Gone, got {other:?}"),
        }
        // From now: sees a new object.
        let now = cms.list(&kube::api::ListParams::default()).await.unwrap().metadata.resource_version.unwrap();
        let mut w = Box::pin(cms.watch(&WatchParams::default().timeout(5), &now).await.unwrap());
        let n: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "new"}})).unwrap();
        cms.create(&pp, &n).await.unwrap();
        match w.next().await {
            Some(Ok(WatchEvent::Added(o))) => assert_eq!(o.metadata.name.as_deref(), Some("new")),
            other => panic!("expected the new object, got {other:?}"),
        }

        // 429 with Retry-After: kube's client waits and asks again.
        s.faults(|f| f.throttle = 1);
        cms.get("m").await.unwrap();
        let codes: Vec<u16> = s
            .seen()
            .iter()
            .filter(|r| r.path.ends_with("/configmaps/m"))
            .map(|r| r.code)
            .collect();
        assert!(codes.ends_with(&[429, 200]), "{codes:?}");

        // plugin/pkg/admission/namespace/lifecycle: a deleted namespace is Terminating for a
        // while, creates in it are 403, then it is gone (404).
        namespaces.delete("t1", &DeleteParams { preconditions: Some(Preconditions { uid: made.metadata.uid.clone(), resource_version: None }), ..DeleteParams::default() }).await.unwrap();
        let other: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "late"}})).unwrap();
        let (code, msg) = api_code(cms.create(&pp, &other).await);
        assert_eq!(code, 403, "{msg}");
        assert!(msg.contains("because it is being terminated"), "{msg}");
        tokio::time::sleep(Duration::from_secs(3)).await;
        let (code, msg) = api_code(cms.create(&pp, &other).await);
        assert_eq!(code, 404, "{msg}");
        assert!(namespaces.get_opt("t1").await.unwrap().is_none());
    });
}

#[test]
fn the_standin_authorises_every_request_against_deploy_base_rbac() {
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    use kube::api::{Api, ListParams};
    let (s, _dir) = bare_standin(true);
    s.create_all(deploy_base(|d| !is_agent_daemonset(d)))
        .unwrap();
    let c = client(&s, &s.kubeconfig);
    s.block_on(async {
        // Allowed by deploy/base: the nodes; the CoreDNS ConfigMap by name.
        Api::<k8s_openapi::api::core::v1::Node>::all(c.clone())
            .list(&ListParams::default())
            .await
            .unwrap();
        Api::<ConfigMap>::namespaced(c.clone(), "kube-system")
            .get("coredns")
            .await
            .unwrap();
        // Not allowed: secrets anywhere, another ConfigMap.
        let (code, msg) = api_code(
            Api::<Secret>::namespaced(c.clone(), "kube-system")
                .list(&ListParams::default())
                .await,
        );
        assert_eq!(code, 403, "{msg}");
        assert!(msg.contains("cannot list resource \"secrets\""), "{msg}");
        let (code, _) = api_code(
            Api::<ConfigMap>::namespaced(c.clone(), "kube-system")
                .get("kubeadm-config")
                .await,
        );
        assert_eq!(code, 403);
    });
    // The discovery the CLI makes passes under that RBAC (with the optional file for the CNI
    // namespace this cluster has): refused only in namespaces the cluster does not have.
    s.create_all(deploy_file("deploy/base/optional/kube-flannel.yaml"))
        .unwrap();
    let before = s.seen().len();
    let out = run(&["discover", "-o", "json"], &s.kubeconfig);
    assert!(out.status.success(), "{}", text(&out));
    let refused = refused(&s, before);
    assert!(refused.is_empty(), "discovery was refused: {refused:?}");
}

#[test]
fn pod_security_baseline_refuses_the_host_agent_with_a_failed_create_event() {
    let (s, _dir) = bare_standin(false);
    let mut objects = deploy_base(|d| {
        d["kind"] == "Namespace" || d["kind"] == "DaemonSet" || d["kind"] == "ServiceAccount"
    });
    for o in &mut objects {
        if o["kind"] == "Namespace" {
            o["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = json!("baseline");
        }
    }
    s.create_all(objects).unwrap();
    eventually(10, "no FailedCreate event", || {
        let events = s.list("events");
        let refused = events.iter().any(|e| {
            e["reason"] == "FailedCreate"
                && e["involvedObject"]["name"] == "probe-host"
                && e["message"].as_str().unwrap_or_default().contains(
                    "violates PodSecurity \"baseline:latest\": host namespaces (hostNetwork=true)",
                )
        });
        (!refused).then(|| format!("{events:?}"))
    });
    assert!(
        s.list("pods")
            .iter()
            .all(|p| p["metadata"]["labels"]["app.kubernetes.io/component"] != "host-agent"),
        "a host agent pod was admitted"
    );
}

#[test]
fn https_proxy_with_no_proxy_covering_the_api_server_reaches_it() {
    let (s, _dir) = bare_standin(false);
    let out = prober_cmd(&["discover", "-o", "json"], &s.kubeconfig)
        // Nothing listens there: a request through the proxy would fail.
        .env("HTTPS_PROXY", "http://127.0.0.1:9")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
}

/// The Events prober wrote (labelled as its own), by reason.
/// Flannel in kube-system (its older manifests): discovery reads its `ConfigMap` there, and
/// deploy/base's RBAC must allow it.
#[test]
fn deploy_base_rbac_allows_discovery_of_flannel_in_kube_system() {
    let (s, _dir) = bare_standin_with(true, "kube-system");
    s.create_all(deploy_base(|d| !is_agent_daemonset(d)))
        .unwrap();
    let before = s.seen().len();
    let out = run(&["discover", "-o", "json"], &s.kubeconfig);
    assert!(out.status.success(), "{}", text(&out));
    let refused = refused(&s, before);
    assert!(refused.is_empty(), "discovery was refused: {refused:?}");
}
