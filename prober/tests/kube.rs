//! Kubernetes API calls against a `tower_test` mock API server: the exact requests discovery
//! makes, and the topology it builds from realistic `kubectl get -o json` objects.

use std::path::PathBuf;

use http::{Request, Response};
use kube::client::Body;
use prober::inventory::{ApiAccess, Cni};
use prober::runtime::kube::discover::{WORKLOAD_NAMESPACES, build, read};

fn fixture(flavour: &str, file: &str) -> Option<Vec<u8>> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/kube")
        .join(flavour)
        .join(file);
    std::fs::read(p).ok()
}

fn empty_list(kind: &str) -> Vec<u8> {
    serde_json::json!({"apiVersion": "apps/v1", "kind": kind, "metadata": {}, "items": []})
        .to_string()
        .into_bytes()
}

/// The requests discovery must make, in order, and the fixture that answers each.
fn expected(flavour: &str) -> Vec<(String, Vec<u8>)> {
    let mut v = vec![
        ("/api/v1/nodes?".to_string(), fixture(flavour, "nodes.json").unwrap()),
        ("/api/v1/namespaces/default/services/kubernetes".to_string(), fixture(flavour, "svc-kubernetes.json").unwrap()),
        (
            "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?&labelSelector=kubernetes.io%2Fservice-name%3Dkubernetes".to_string(),
            fixture(flavour, "slices-kubernetes.json").unwrap(),
        ),
        ("/api/v1/namespaces/kube-system/services/kube-dns".to_string(), fixture(flavour, "svc-kube-dns.json").unwrap()),
        (
            "/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices?&labelSelector=kubernetes.io%2Fservice-name%3Dkube-dns".to_string(),
            fixture(flavour, "slices-kube-dns.json").unwrap(),
        ),
        ("/api/v1/namespaces/kube-system/configmaps/coredns".to_string(), fixture(flavour, "cm-coredns.json").unwrap()),
    ];
    for ns in WORKLOAD_NAMESPACES {
        v.push((
            format!("/apis/apps/v1/namespaces/{ns}/daemonsets?"),
            fixture(flavour, &format!("ds-{ns}.json"))
                .unwrap_or_else(|| empty_list("DaemonSetList")),
        ));
        v.push((
            format!("/apis/apps/v1/namespaces/{ns}/deployments?"),
            fixture(flavour, &format!("deploy-{ns}.json"))
                .unwrap_or_else(|| empty_list("DeploymentList")),
        ));
    }
    v
}

/// Runs discovery against the mock, checking every request; returns the inventory.
async fn discover(flavour: &str) -> prober::inventory::Inventory {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(service, "default");
    let want = expected(flavour);
    let server = tokio::spawn(async move {
        for (path, body) in want {
            let (request, send) = handle
                .next_request()
                .await
                .expect("discovery made fewer requests than expected");
            assert_eq!(request.method(), http::Method::GET, "discovery only reads");
            let uri = request.uri().to_string();
            assert_eq!(uri, path, "unexpected request");
            send.send_response(
                Response::builder()
                    .status(200)
                    .body(Body::from(body))
                    .unwrap(),
            );
        }
        // No request beyond the expected ones: the next thing the mock sees is the client going away.
        assert!(
            handle.next_request().await.is_none(),
            "discovery made more requests than expected"
        );
    });
    let raw = read(&client).await.expect("discovery");
    drop(client);
    server.await.expect("mock server");
    build(&raw).expect("inventory")
}

#[tokio::test]
async fn discovers_a_three_node_flannel_cluster() {
    let inv = discover("flannel").await;
    inv.validate().unwrap();
    assert_eq!(inv.cluster.cni, Cni::Flannel);
    let names: Vec<&str> = inv.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["cp1", "w1", "w2"]);
    assert_eq!(inv.nodes[0].roles, ["control-plane"]);
    assert_eq!(inv.nodes[1].address.to_string(), "192.168.56.11");
    assert_eq!(inv.nodes[1].pod_cidr.unwrap().to_string(), "10.244.1.0/24");
    let vtep = inv.nodes[2]
        .vtep
        .as_ref()
        .expect("flannel's VtepMAC annotation");
    assert_eq!(
        (vtep.address.to_string(), vtep.mac.to_string()),
        ("10.244.2.0".to_string(), "02:00:0a:f4:02:01".to_string())
    );
    let overlay = inv.cluster.overlay.as_ref().unwrap();
    assert_eq!((overlay.mode.as_str(), overlay.port), ("vxlan", 8472));
    assert_eq!(inv.cluster.api.service.to_string(), "10.96.0.1:443");
    assert_eq!(
        inv.cluster.api.endpoints,
        ["192.168.56.10:6443".parse().unwrap()]
    );
    let dns = inv.cluster.dns.as_ref().unwrap();
    assert_eq!(dns.service.to_string(), "10.96.0.10:53");
    assert_eq!(dns.endpoints.len(), 2);
    assert!(
        dns.corefile
            .as_deref()
            .unwrap()
            .contains("forward . /etc/resolv.conf")
    );
    let flannel = inv
        .components
        .iter()
        .find(|c| c.name == "kube-flannel-ds")
        .unwrap();
    assert_eq!(
        (
            flannel.role.as_str(),
            flannel.api_access,
            flannel.host_network
        ),
        ("cni", ApiAccess::Service, true)
    );
    assert_eq!(
        flannel.containers,
        ["install-cni-plugin", "install-cni", "kube-flannel"]
    );
    let coredns = inv.components.iter().find(|c| c.name == "coredns").unwrap();
    assert_eq!(
        (coredns.role.as_str(), coredns.kind.as_str()),
        ("dns", "Deployment")
    );
    assert_eq!(coredns.nodes, ["cp1", "w1"], "where the DNS endpoints run");
    assert!(inv.nodes.iter().all(|n| n.agents.host.is_none()
        && n.host_root.as_deref() == Some(std::path::Path::new("/host"))));
}

#[tokio::test]
async fn discovers_a_three_node_calico_cluster() {
    let inv = discover("calico").await;
    assert_eq!(inv.cluster.cni, Cni::Calico);
    assert!(
        inv.cluster.overlay.is_none(),
        "calico's data path is not assumed"
    );
    let calico = inv
        .components
        .iter()
        .find(|c| c.name == "calico-node")
        .unwrap();
    assert_eq!(
        (calico.role.as_str(), calico.api_access),
        ("cni", ApiAccess::Service)
    );
    assert_eq!(
        calico.containers,
        ["upgrade-ipam", "install-cni", "calico-node"],
        "init containers first"
    );
    let controllers = inv
        .components
        .iter()
        .find(|c| c.name == "calico-kube-controllers")
        .unwrap();
    assert_eq!(
        controllers.api_access,
        ApiAccess::Direct,
        "it sets KUBERNETES_SERVICE_HOST"
    );
    let ingress = inv
        .components
        .iter()
        .find(|c| c.name == "ingress-nginx-controller")
        .unwrap();
    assert_eq!(
        (ingress.role.as_str(), ingress.namespace.as_str()),
        ("ingress", "ingress-nginx")
    );
    assert_eq!(
        inv.components
            .iter()
            .find(|c| c.name == "kube-proxy")
            .unwrap()
            .role,
        "proxy"
    );
    // The inventory round-trips through YAML, as `prober discover -o yaml` prints it.
    let back: prober::inventory::Inventory = serde_saphyr::from_str(&inv.to_yaml()).unwrap();
    assert_eq!(back, inv);
}

mod deploy {
    use super::*;

    /// How the mock API server answers one request, given its body.
    type Responder = Box<dyn Fn(&serde_json::Value) -> Response<Body> + Send>;
    use http_body_util::BodyExt;
    use prober::model::{AgentKind, AgentRef};
    use prober::runtime::kube::deploy::{agents_from_pods, apply, cleanup};
    use prober::runtime::kube::manifests::AgentSpec;

    fn status(code: u16, reason: &str) -> Response<Body> {
        let body = serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": if code < 300 { "Success" } else { "Failure" }, "reason": reason, "code": code, "metadata": {}});
        Response::builder()
            .status(code)
            .body(Body::from(body.to_string().into_bytes()))
            .unwrap()
    }

    /// Serves `steps` in order: each is (method, uri, response); returns the request bodies.
    fn serve(
        mut handle: tower_test::mock::Handle<Request<Body>, Response<Body>>,
        steps: Vec<(&'static str, String, Responder)>,
    ) -> tokio::task::JoinHandle<Vec<serde_json::Value>> {
        tokio::spawn(async move {
            let mut bodies = Vec::new();
            for (method, uri, respond) in steps {
                let (request, send) = handle
                    .next_request()
                    .await
                    .expect("fewer requests than expected");
                assert_eq!(
                    (request.method().as_str(), request.uri().to_string()),
                    (method, uri.clone()),
                    "unexpected request"
                );
                if method == "PATCH" {
                    assert_eq!(
                        request.headers()["content-type"],
                        "application/apply-patch+yaml",
                        "server-side apply"
                    );
                }
                let bytes = request
                    .into_body()
                    .collect()
                    .await
                    .map(http_body_util::Collected::to_bytes)
                    .unwrap_or_default();
                let body: serde_json::Value = if bytes.is_empty() {
                    serde_json::Value::Null
                } else {
                    serde_json::from_slice(&bytes).unwrap()
                };
                send.send_response(respond(&body));
                bodies.push(body);
            }
            assert!(
                handle.next_request().await.is_none(),
                "more requests than expected"
            );
            bodies
        })
    }

    fn echo() -> Responder {
        Box::new(|b: &serde_json::Value| {
            Response::builder()
                .status(200)
                .body(Body::from(b.to_string().into_bytes()))
                .unwrap()
        })
    }

    #[tokio::test]
    async fn apply_is_server_side_with_a_field_manager() {
        let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = kube::Client::new(service, "default");
        let q = "?&force=true&fieldManager=prober";
        let server = serve(
            handle,
            vec![
                (
                    "GET",
                    "/api/v1/namespaces/prober-system".into(),
                    Box::new(|_: &serde_json::Value| status(404, "NotFound")),
                ),
                (
                    "PATCH",
                    format!("/api/v1/namespaces/prober-system{q}"),
                    echo(),
                ),
                (
                    "PATCH",
                    format!("/api/v1/namespaces/prober-system/serviceaccounts/prober-agent{q}"),
                    echo(),
                ),
                (
                    "PATCH",
                    format!("/apis/apps/v1/namespaces/prober-system/daemonsets/probe-host{q}"),
                    echo(),
                ),
                (
                    "PATCH",
                    format!("/apis/apps/v1/namespaces/prober-system/daemonsets/probe-pod{q}"),
                    echo(),
                ),
            ],
        );
        let spec = AgentSpec {
            run: Some("r1".into()),
            ttl: Some("2h".into()),
            ..AgentSpec::default()
        };
        let created = apply(&client, &spec).await.unwrap();
        drop(client);
        let bodies = server.await.unwrap();
        assert!(created, "the namespace did not exist: cleanup removes it");
        assert_eq!(bodies[1]["kind"], "Namespace");
        assert_eq!(bodies[2]["automountServiceAccountToken"], false);
        let host = &bodies[3];
        assert_eq!(host["kind"], "DaemonSet");
        assert_eq!(host["metadata"]["labels"]["prober.io/run"], "r1");
        assert_eq!(host["spec"]["template"]["spec"]["hostNetwork"], true);
        assert_eq!(
            host["spec"]["template"]["spec"]["tolerations"][0]["operator"],
            "Exists"
        );
        assert_eq!(
            host["spec"]["template"]["spec"]["containers"][0]["securityContext"]["capabilities"]["add"],
            serde_json::json!(["NET_RAW"])
        );
        assert_eq!(
            host["spec"]["template"]["spec"]["containers"][0]["args"],
            serde_json::json!(["serve", "--ttl", "2h"])
        );
        assert!(
            bodies[4]["spec"]["template"]["spec"]
                .get("hostNetwork")
                .is_none()
        );
    }

    #[tokio::test]
    async fn cleanup_deletes_exactly_what_the_run_created() {
        let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = kube::Client::new(service, "default");
        let ok = || -> Responder { Box::new(|_: &serde_json::Value| status(200, "")) };
        let server = serve(
            handle,
            vec![
                (
                    "DELETE",
                    "/apis/apps/v1/namespaces/prober-system/daemonsets/probe-host?".into(),
                    ok(),
                ),
                (
                    "DELETE",
                    "/apis/apps/v1/namespaces/prober-system/daemonsets/probe-pod?".into(),
                    Box::new(|_: &serde_json::Value| status(404, "NotFound")),
                ),
                (
                    "DELETE",
                    "/api/v1/namespaces/prober-system/serviceaccounts/prober-agent?".into(),
                    ok(),
                ),
                ("DELETE", "/api/v1/namespaces/prober-system?".into(), ok()),
            ],
        );
        let deleted = cleanup(&client, &AgentSpec::default(), true).await.unwrap();
        drop(client);
        server.await.unwrap();
        assert_eq!(
            deleted,
            [
                "daemonset/probe-host",
                "serviceaccount/prober-agent",
                "namespace/prober-system"
            ],
            "an already-gone object is not claimed"
        );
    }

    fn pod(
        name: &str,
        node: &str,
        component: &str,
        ready: bool,
        ip: Option<&str>,
        waiting: Option<&str>,
    ) -> k8s_openapi::api::core::v1::Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {"app.kubernetes.io/component": component}},
            "spec": {"nodeName": node, "containers": [{"name": "probe-pod"}]},
            "status": {
                "phase": if ready { "Running" } else { "Pending" },
                "podIP": ip,
                "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
                "containerStatuses": waiting.map(|w| vec![serde_json::json!({"name": "probe-pod", "ready": false, "restartCount": 0, "image": "x", "imageID": "", "state": {"waiting": {"reason": w, "message": "back-off pulling image"}}})]).unwrap_or_default()
            }
        }))
        .unwrap()
    }

    #[test]
    fn agents_that_never_became_ready_are_reported_with_the_reason() {
        let pods = [
            pod("h1", "cp1", "host-agent", true, Some("192.168.56.10"), None),
            pod("p1", "cp1", "pod-agent", true, Some("10.244.0.5"), None),
            pod("h2", "w1", "host-agent", true, Some("192.168.56.11"), None),
            pod(
                "p2",
                "w1",
                "pod-agent",
                false,
                None,
                Some("ImagePullBackOff"),
            ),
        ];
        let nodes = ["cp1".to_string(), "w1".to_string(), "w2".to_string()];
        let (ready, missing) = agents_from_pods(&pods, &nodes);
        assert_eq!(ready.len(), 3);
        assert_eq!(
            ready[&AgentRef {
                node: "w1".into(),
                agent: AgentKind::Host
            }]
                .pod,
            "h2"
        );
        let why: Vec<(String, AgentKind, String)> = missing
            .iter()
            .map(|m| (m.node.clone(), m.agent, m.detail.clone()))
            .collect();
        assert_eq!(why.len(), 3, "{why:?}");
        assert!(
            why[0].0 == "w1"
                && why[0].1 == AgentKind::Pod
                && why[0].2.starts_with("ImagePullBackOff"),
            "{why:?}"
        );
        assert!(
            why[1..]
                .iter()
                .all(|(n, _, d)| n == "w2" && d.contains("no agent pod was scheduled")),
            "{why:?}"
        );
    }

    #[tokio::test]
    async fn exec_goes_through_the_api_server_with_the_plan_command() {
        use probe_proto::Plan;
        use prober::runtime::Runtime;
        use prober::runtime::kube::deploy::AgentPod;
        use prober::runtime::kube::exec::KubeExec;
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = kube::Client::new(service, "default");
        let agent = AgentRef {
            node: "w1".into(),
            agent: AgentKind::Pod,
        };
        let agents = std::collections::BTreeMap::from([(
            agent.clone(),
            AgentPod {
                pod: "probe-pod-x7k2p".into(),
                address: "10.244.1.5".parse().unwrap(),
            },
        )]);
        let exec = KubeExec::new(client, "prober-system", agents);
        let server = tokio::spawn(async move {
            let (request, send) = handle.next_request().await.unwrap();
            send.send_response(status(403, "Forbidden"));
            request
        });
        let plan: Plan = probe_proto::parse_plan(
            r#"{"deadlineMs":1000,"probes":[{"id":"a","kind":"icmp","address":"10.244.2.5"}]}"#,
        )
        .unwrap();
        let (tx, _rx) = tokio::sync::mpsc::channel(4);
        let err = exec
            .run(&agent, &plan, tx)
            .await
            .expect_err("the mock refuses the upgrade");
        let request = server.await.unwrap();
        assert_eq!(request.method(), http::Method::GET);
        assert_eq!(
            request.uri().to_string(),
            "/api/v1/namespaces/prober-system/pods/probe-pod-x7k2p/exec?&stdin=true&stdout=true&stderr=true&container=probe-pod&command=probe-pod&command=probe&command=--plan&command=-"
        );
        assert!(
            request
                .headers()
                .get("sec-websocket-protocol")
                .is_some_and(|p| p.to_str().unwrap().contains("channel.k8s.io")),
            "{:?}",
            request.headers()
        );
        assert!(err.to_string().contains("probe-pod-x7k2p"), "{err}");
        let missing = exec
            .run(
                &AgentRef {
                    node: "w9".into(),
                    agent: AgentKind::Host,
                },
                &plan,
                tokio::sync::mpsc::channel(1).0,
            )
            .await
            .unwrap_err();
        assert!(missing.to_string().contains("w9/host"), "{missing}");
    }
}
