//! The requests discovery makes on each distribution, exactly as kube-rs writes them, and its
//! edges: pagination, a forbidden namespace, refusals in words, IPv6, Windows nodes.

use prober::inventory::{Family, Inventory};
use prober::runtime::kube::discover::{WORKLOAD_NAMESPACES, build, read};
use serde_json::json;
use test_kit::mock::{discovery_answer, fixture_json, respond, serve, split, status};

pub(crate) const PAGE: &str = "limit=500";

pub(crate) fn enc(s: &str) -> String {
    s.replace('/', "%2F")
        .replace('=', "%3D")
        .replace(',', "%2C")
        .replace('!', "%21")
}

pub(crate) fn list_uri(path: &str, selector: Option<&str>) -> String {
    match selector {
        Some(sel) => format!("{path}?&labelSelector={}&{PAGE}", enc(sel)),
        None => format!("{path}?&{PAGE}"),
    }
}

/// The requests every discovery makes, up to the workloads; then the Corefile and the
/// CNI-specific ones given.
pub(crate) fn requests(dns: Option<&str>, corefile: Option<&str>, cni: &[String]) -> Vec<String> {
    let mut v = vec![
        list_uri("/api/v1/nodes", None),
        "/api/v1/namespaces/default/services/kubernetes".to_string(),
        list_uri(
            "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
            Some("kubernetes.io/service-name=kubernetes"),
        ),
        list_uri("/apis/networking.k8s.io/v1/servicecidrs", None),
        list_uri(
            "/api/v1/namespaces/kube-system/services",
            Some("k8s-app=kube-dns"),
        ),
    ];
    if let Some(dns) = dns {
        v.push(list_uri(
            "/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices",
            Some(&format!("kubernetes.io/service-name={dns}")),
        ));
    }
    for ns in WORKLOAD_NAMESPACES {
        v.push(list_uri(
            &format!("/apis/apps/v1/namespaces/{ns}/daemonsets"),
            None,
        ));
        v.push(list_uri(
            &format!("/apis/apps/v1/namespaces/{ns}/deployments"),
            None,
        ));
    }
    if let Some(cm) = corefile {
        v.push(format!("/api/v1/namespaces/kube-system/configmaps/{cm}"));
    }
    v.extend(cni.iter().cloned());
    v
}

pub(crate) fn calico_crds() -> Vec<String> {
    [
        "ippools",
        "bgpconfigurations",
        "felixconfigurations",
        "blockaffinities",
    ]
    .iter()
    .map(|p| list_uri(&format!("/apis/crd.projectcalico.org/v1/{p}"), None))
    .collect()
}

/// The policies that can select the pod agents, read last on every cluster: Kubernetes'
/// `NetworkPolicy` in the agents' namespace, `AdminNetworkPolicy` and its baseline, Calico's
/// (its API server's, then the CRDs', none served by these fixtures) and Cilium's.
pub(crate) fn policy_requests() -> Vec<String> {
    let ns = |g: &str, plural: &str| {
        list_uri(
            &format!("/apis/{g}/namespaces/prober-system/{plural}"),
            None,
        )
    };
    let all = |g: &str, plural: &str| list_uri(&format!("/apis/{g}/{plural}"), None);
    vec![
        ns("networking.k8s.io/v1", "networkpolicies"),
        all("policy.networking.k8s.io/v1alpha1", "adminnetworkpolicies"),
        all(
            "policy.networking.k8s.io/v1alpha1",
            "baselineadminnetworkpolicies",
        ),
        all("projectcalico.org/v3", "globalnetworkpolicies"),
        all("crd.projectcalico.org/v1", "globalnetworkpolicies"),
        ns("projectcalico.org/v3", "networkpolicies"),
        ns("crd.projectcalico.org/v1", "networkpolicies"),
        all("projectcalico.org/v3", "stagedglobalnetworkpolicies"),
        all("crd.projectcalico.org/v1", "stagedglobalnetworkpolicies"),
        all("cilium.io/v2", "ciliumclusterwidenetworkpolicies"),
        ns("cilium.io/v2", "ciliumnetworkpolicies"),
    ]
}

/// The exact requests discovery must make on each fixture cluster.
pub(crate) fn expected(flavour: &str) -> Vec<String> {
    let mut v = expected_before_policies(flavour);
    v.extend(policy_requests());
    v
}

fn expected_before_policies(flavour: &str) -> Vec<String> {
    let cm = |ns: &str, name: &str| format!("/api/v1/namespaces/{ns}/configmaps/{name}");
    let cilium_nodes = list_uri("/apis/cilium.io/v2/ciliumnodes", None);
    match flavour {
        "flannel" | "flannel-dualstack" | "flannel-ipv6" => requests(
            Some("kube-dns"),
            Some("coredns"),
            &[cm("kube-flannel", "kube-flannel-cfg")],
        ),
        // flannel inside k3s: its facts are on the nodes, no CNI request.
        "k3s" | "eks" => requests(Some("kube-dns"), Some("coredns"), &[]),
        "rke2-canal" => requests(
            Some("rke2-coredns-rke2-coredns"),
            Some("rke2-coredns-rke2-coredns"),
            &[cm("kube-system", "rke2-canal-config")],
        ),
        // kube-dns, not CoreDNS: no Corefile; ipam kubernetes: no CiliumNodes.
        "gke-dpv2" => requests(
            Some("kube-dns"),
            None,
            &[cm("kube-system", "cilium-config")],
        ),
        "cilium-native" => requests(
            Some("kube-dns"),
            Some("coredns"),
            &[cm("kube-system", "cilium-config")],
        ),
        "cilium-vxlan" | "cilium-geneve" => requests(
            Some("kube-dns"),
            Some("coredns"),
            &[cm("kube-system", "cilium-config"), cilium_nodes],
        ),
        "calico" | "calico-ipip" | "calico-vxlan" => {
            let mut cni = vec![cm("kube-system", "calico-config")];
            cni.extend(calico_crds());
            requests(Some("kube-dns"), Some("coredns"), &cni)
        }
        "calico-bgp-typha" => {
            let mut cni = vec![list_uri("/apis/operator.tigera.io/v1/installations", None)];
            cni.extend(calico_crds());
            cni.push(list_uri(
                "/api/v1/namespaces/calico-system/pods",
                Some("k8s-app=calico-typha"),
            ));
            requests(Some("kube-dns"), Some("coredns"), &cni)
        }
        other => panic!("no expectations for {other}"),
    }
}

pub(crate) const FLAVOURS: [&str; 12] = [
    "flannel",
    "calico",
    "k3s",
    "rke2-canal",
    "eks",
    "gke-dpv2",
    "cilium-vxlan",
    "cilium-geneve",
    "cilium-native",
    "calico-ipip",
    "calico-vxlan",
    "calico-bgp-typha",
];

/// Runs discovery against the fixture cluster, checking every request; returns the inventory.
pub(crate) async fn discover(flavour: &'static str) -> Inventory {
    let (client, server) = serve(Box::new(move |s| discovery_answer(flavour, s)));
    let raw = read(&client).await.expect("discovery");
    drop(client);
    let seen = server.await.unwrap();
    assert!(
        seen.iter().all(|s| s.method == "GET"),
        "discovery only reads"
    );
    let uris: Vec<&str> = seen.iter().map(|s| s.uri.as_str()).collect();
    assert_eq!(
        uris,
        expected(flavour),
        "{flavour}: the requests discovery made"
    );
    assert!(raw.forbidden.is_empty(), "{:?}", raw.forbidden);
    let inv = build(&raw).expect("inventory");
    inv.validate().unwrap();
    // It round-trips through YAML, as `prober discover -o yaml` prints it.
    let back: Inventory = serde_saphyr::from_str(&inv.to_yaml()).unwrap();
    assert_eq!(back, inv, "{flavour}");
    inv
}

// Scale, absence, refusal, IPv6

#[tokio::test]
async fn node_lists_are_paginated_and_the_budget_grows_with_the_cluster() {
    use prober::runtime::kube::discover::{BASE_BUDGET, budget};
    let nodes = fixture_json("flannel", "nodes.json");
    let items = nodes["items"].as_array().unwrap().clone();
    let (client, server) = serve(Box::new(move |s| {
        let (path, q) = split(&s.uri);
        if path == "/api/v1/nodes" {
            return match q.get("continue").map(String::as_str) {
                None => respond(
                    200,
                    &json!({"apiVersion": "v1", "kind": "NodeList",
                    "metadata": {"continue": "page2"}, "items": items[..2]}),
                ),
                Some("page2") => respond(
                    200,
                    &json!({"apiVersion": "v1", "kind": "NodeList",
                    "metadata": {}, "items": items[2..]}),
                ),
                Some(other) => panic!("unexpected continue token {other}"),
            };
        }
        discovery_answer("flannel", s)
    }));
    let raw = read(&client).await.unwrap();
    drop(client);
    let seen = server.await.unwrap();
    assert_eq!(seen[0].uri, "/api/v1/nodes?&limit=500");
    assert_eq!(seen[1].uri, "/api/v1/nodes?&limit=500&continue=page2");
    assert_eq!(raw.nodes.len(), 3);
    assert_eq!(budget(0), BASE_BUDGET);
    assert_eq!(budget(5000).as_secs(), 115, "15 s + 20 ms per node");
    assert!(budget(100) < budget(1000));
}

#[tokio::test]
async fn a_forbidden_namespace_is_said_and_skipped() {
    // The base RBAC only: calico-system and the other optional namespaces are not granted.
    let rules = crate::rbac::Rbac::load(false);
    let (client, server) = serve(Box::new(move |s| {
        if rules.allows(s).is_empty() {
            return status(403, "Forbidden");
        }
        // The namespaces discovery asks about exist on this cluster.
        if let Some(ns) = s.uri.strip_prefix("/api/v1/namespaces/")
            && !ns.contains('/')
        {
            return respond(200, &json!({"metadata": {"name": ns}}));
        }
        discovery_answer("calico-bgp-typha", s)
    }));
    let raw = read(&client)
        .await
        .expect("a 403 on an optional namespace is not fatal");
    drop(client);
    server.await.unwrap();
    assert!(
        raw.forbidden
            .contains(&"list daemonsets in calico-system".to_string()),
        "{:?}",
        raw.forbidden
    );
    let inv = build(&raw).unwrap();
    assert_eq!(inv.nodes.len(), 3);
}

#[tokio::test]
async fn a_policy_kind_not_readable_is_said_and_the_others_are_read() {
    let (client, server) = serve(Box::new(move |s| {
        let (path, _) = split(&s.uri);
        if path == "/apis/policy.networking.k8s.io/v1alpha1/adminnetworkpolicies" {
            return status(403, "Forbidden");
        }
        discovery_answer("flannel", s)
    }));
    let raw = read(&client)
        .await
        .expect("a 403 on a policy kind is not fatal");
    drop(client);
    let seen = server.await.unwrap();
    assert_eq!(
        raw.forbidden,
        ["list adminnetworkpolicies.policy.networking.k8s.io"]
    );
    let uris: Vec<String> = seen.iter().map(|s| s.uri.clone()).collect();
    assert!(
        uris.ends_with(&policy_requests()),
        "every other policy kind is still read: {uris:?}"
    );
}

#[tokio::test]
async fn calico_policies_served_by_its_api_server_are_not_read_twice_from_the_crds() {
    let (client, server) = serve(Box::new(move |s| {
        let (path, _) = split(&s.uri);
        if path == "/apis/projectcalico.org/v3/globalnetworkpolicies" {
            return respond(
                200,
                &json!({"apiVersion": "projectcalico.org/v3", "kind": "GlobalNetworkPolicyList",
                        "metadata": {}, "items": [{"metadata": {"name": "default-deny"},
                        "spec": {"selector": "all()", "types": ["Ingress"]}}]}),
            );
        }
        discovery_answer("flannel", s)
    }));
    let raw = read(&client).await.unwrap();
    drop(client);
    let seen = server.await.unwrap();
    assert!(
        !seen.iter().any(|s| s
            .uri
            .starts_with("/apis/crd.projectcalico.org/v1/globalnetworkpolicies")),
        "the CRDs hold the same objects"
    );
    assert!(
        seen.iter().any(|s| s
            .uri
            .starts_with("/apis/crd.projectcalico.org/v1/networkpolicies")
            || s.uri.starts_with(
                "/apis/crd.projectcalico.org/v1/namespaces/prober-system/networkpolicies"
            )),
        "a kind the API server does not serve is read from its CRD"
    );
    let names: Vec<(&str, &str)> = raw
        .policies
        .iter()
        .map(|p| (p.api_version.as_str(), p.metadata.name.as_str()))
        .collect();
    assert_eq!(names, [("projectcalico.org/v3", "default-deny")]);
    assert_eq!(raw.policies[0].kind, "GlobalNetworkPolicy");
    assert_eq!(raw.policies[0].spec["selector"], "all()");
}

/// A 401 is "reached but not accepted", in words, never the library's `Status { … }` dump; a 403
/// on what discovery cannot do without says which grant is missing.
#[tokio::test]
async fn unauthorised_and_forbidden_are_said_in_words() {
    for (code, reason, want) in [
        (
            401,
            "Unauthorized",
            "the API server answered but did not accept the credentials",
        ),
        (403, "Forbidden", "may not do this (403 Forbidden"),
    ] {
        let (client, server) = serve(Box::new(move |_| status(code, reason)));
        let err = read(&client)
            .await
            .expect_err("nothing is readable")
            .to_string();
        drop(client);
        let seen = server.await.unwrap();
        assert_eq!(
            seen.iter().map(|s| s.uri.as_str()).collect::<Vec<_>>(),
            ["/api/v1/nodes?&limit=500"],
            "discovery stops at the first refusal"
        );
        assert!(err.starts_with("cannot list nodes: "), "{err}");
        assert!(err.contains(want), "{err}");
        assert!(
            !err.contains("Status {") && !err.contains("ApiError"),
            "{err}"
        );
    }
}

pub(crate) fn raw_of(flavour: &str) -> prober::runtime::kube::discover::Raw {
    let nodes: k8s_openapi::List<k8s_openapi::api::core::v1::Node> =
        serde_json::from_value(fixture_json(flavour, "nodes.json")).unwrap();
    prober::runtime::kube::discover::Raw {
        nodes: nodes.items,
        api_service: serde_json::from_value(fixture_json(flavour, "svc-kubernetes.json")).unwrap(),
        ..Default::default()
    }
}

/// An IPv6-first cluster is probed, not refused: the `kubernetes` Service's family is the
/// primary one, the nodes' addresses of each family are kept whatever their order, and a node
/// with only IPv6 addresses is a node (it used to be refused).
#[test]
fn ipv6_first_clusters_and_ipv6_only_nodes_are_taken() {
    let mut raw = raw_of("flannel");
    let svc = raw.api_service.as_mut().unwrap().spec.as_mut().unwrap();
    svc.cluster_ip = Some("fd00:10:96::1".into());
    svc.cluster_ips = Some(vec!["fd00:10:96::1".into(), "10.96.0.1".into()]);
    raw.nodes[1].status.as_mut().unwrap().addresses =
        Some(vec![k8s_openapi::api::core::v1::NodeAddress {
            type_: "InternalIP".into(),
            address: "fd00::11".into(),
        }]);
    let a = raw.nodes[2]
        .status
        .as_mut()
        .unwrap()
        .addresses
        .as_mut()
        .unwrap();
    a.insert(
        0,
        k8s_openapi::api::core::v1::NodeAddress {
            type_: "InternalIP".into(),
            address: "fd00::12".into(),
        },
    );
    let inv = build(&raw).unwrap();
    inv.validate().unwrap();
    assert_eq!(inv.cluster.api.service.to_string(), "[fd00:10:96::1]:443");
    assert_eq!(
        inv.cluster
            .api
            .cluster_ips()
            .map(|a| a.to_string())
            .collect::<Vec<_>>(),
        ["[fd00:10:96::1]:443", "10.96.0.1:443"]
    );
    assert_eq!(inv.cluster.service_cidr.to_string(), "fd00:10:96::/112");
    let w1 = &inv.nodes[1];
    assert_eq!(
        (w1.ipv4(), w1.address6),
        (None, Some("fd00::11".parse().unwrap()))
    );
    let w2 = &inv.nodes[2];
    assert_eq!(w2.ipv4(), Some("192.168.56.12".parse().unwrap()));
    assert_eq!(w2.address6, Some("fd00::12".parse().unwrap()));
    assert_eq!(inv.families(), [Family::Ipv4, Family::Ipv6]);
}

#[test]
fn windows_nodes_are_left_out() {
    let mut raw = raw_of("flannel");
    raw.nodes[2]
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("kubernetes.io/os".into(), "windows".into());
    let inv = build(&raw).unwrap();
    assert_eq!(inv.nodes.len(), 2, "the agents' node selector is Linux");
}

/// RBAC refuses a list in a namespace the cluster does not have (403) before the API server
/// could say 404: discovery asks whether the namespace exists, and an absent one is no warning.
#[tokio::test]
async fn a_refused_namespace_that_does_not_exist_is_no_warning() {
    let rules = crate::rbac::Rbac::load(false);
    let (client, server) = serve(Box::new(move |s| {
        if rules.allows(s).is_empty() {
            return status(403, "Forbidden");
        }
        if s.uri.starts_with("/api/v1/namespaces/")
            && !s.uri["/api/v1/namespaces/".len()..].contains('/')
        {
            return status(404, "NotFound");
        }
        discovery_answer("flannel", s)
    }));
    let raw = read(&client).await.unwrap();
    drop(client);
    let seen = server.await.unwrap();
    assert!(raw.forbidden.is_empty(), "{:?}", raw.forbidden);
    assert!(
        seen.iter()
            .any(|r| r.uri == "/api/v1/namespaces/calico-system"),
        "{seen:?}"
    );
}
