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
