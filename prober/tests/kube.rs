//! Kubernetes API calls against a `tower_test` mock API server: the exact requests discovery
//! makes on each distribution and the inventory it builds from `kubectl get -o json`-shaped
//! fixtures; the agents' lifecycle (create, watch, fail fast, clean up exactly what a run
//! created); and the RBAC of deploy/base checked against every request each mode makes.

#![allow(clippy::needless_pass_by_value, clippy::too_many_lines)] // test fixtures built inline

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use common::mock::{
    Seen, created, discovery_answer, fixture_json, list_of, respond, serve, split, status,
};
use http::Response;
use kube::client::Body;
use prober::inventory::{ApiAccess, Cni, Inventory};
use prober::runtime::kube::discover::{WORKLOAD_NAMESPACES, build, read};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// The requests discovery makes, exactly as kube-rs writes them

const PAGE: &str = "limit=500";

fn enc(s: &str) -> String {
    s.replace('/', "%2F")
        .replace('=', "%3D")
        .replace(',', "%2C")
        .replace('!', "%21")
}

fn list_uri(path: &str, selector: Option<&str>) -> String {
    match selector {
        Some(sel) => format!("{path}?&labelSelector={}&{PAGE}", enc(sel)),
        None => format!("{path}?&{PAGE}"),
    }
}

/// The requests every discovery makes, up to the workloads; then the Corefile and the
/// CNI-specific ones given.
fn requests(dns: Option<&str>, corefile: Option<&str>, cni: &[String]) -> Vec<String> {
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

fn calico_crds() -> Vec<String> {
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

/// The exact requests discovery must make on each fixture cluster.
fn expected(flavour: &str) -> Vec<String> {
    let cm = |ns: &str, name: &str| format!("/api/v1/namespaces/{ns}/configmaps/{name}");
    let cilium_nodes = list_uri("/apis/cilium.io/v2/ciliumnodes", None);
    match flavour {
        "flannel" => requests(
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

const FLAVOURS: [&str; 12] = [
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
async fn discover(flavour: &'static str) -> Inventory {
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

// ---------------------------------------------------------------------------------------------
// What discovery finds on each distribution

type NodeRow<'a> = (
    &'a str,
    &'a str,
    Option<&'a str>,
    Option<(&'a str, &'a str)>,
);

/// (name, address, pod CIDR, VTEP (address, MAC)) of every node, in order.
/// A node as the tests compare it.
type Row = (String, String, Option<String>, Option<(String, String)>);

fn nodes(inv: &Inventory) -> Vec<Row> {
    inv.nodes
        .iter()
        .map(|n| {
            (
                n.name.clone(),
                n.address.to_string(),
                n.pod_cidr.map(|c| c.to_string()),
                n.vtep
                    .as_ref()
                    // No MAC (IP-in-IP, Cilium): "".
                    .map(|v| {
                        (
                            v.address.to_string(),
                            v.mac.map(|m| m.to_string()).unwrap_or_default(),
                        )
                    }),
            )
        })
        .collect()
}

fn expect_nodes(inv: &Inventory, want: &[NodeRow<'_>]) {
    let want: Vec<_> = want
        .iter()
        .map(|(n, a, c, v)| {
            (
                (*n).to_string(),
                (*a).to_string(),
                c.map(String::from),
                v.map(|(x, y)| (x.to_string(), y.to_string())),
            )
        })
        .collect();
    assert_eq!(nodes(inv), want);
}

fn overlay(inv: &Inventory) -> Option<(String, u16, u32, Option<u16>)> {
    inv.cluster.overlay.as_ref().map(|o| {
        (
            o.mode().to_string(),
            o.port().map_or(0, probe_proto::Port::get),
            o.vni().map_or(0, probe_proto::Vni::get),
            o.mtu(),
        )
    })
}

fn addrs(v: &[std::net::SocketAddr]) -> Vec<String> {
    v.iter().map(ToString::to_string).collect()
}

fn serves(inv: &Inventory) -> Vec<(String, Option<Vec<u16>>)> {
    inv.nodes
        .iter()
        .map(|n| (n.name.clone(), n.serves.clone()))
        .collect()
}

fn component<'a>(inv: &'a Inventory, name: &str) -> &'a prober::inventory::Component {
    inv.components
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no component {name}"))
}

fn files(inv: &Inventory) -> (String, String, String, Option<String>) {
    let f = inv.cluster.node_files.as_ref().unwrap();
    (
        f.distribution.clone(),
        f.cni_conf_dir.display().to_string(),
        f.kubelet_kubeconfig.display().to_string(),
        f.cni_kubeconfig.as_ref().map(|p| p.display().to_string()),
    )
}

#[tokio::test]
async fn kubeadm_flannel() {
    let inv = discover("flannel").await;
    assert_eq!(inv.cluster.cni, Cni::Flannel);
    assert_eq!(
        overlay(&inv),
        Some(("vxlan".into(), 8472, 1, Some(1450))),
        "net-conf.json: vxlan with flannel's defaults"
    );
    assert_eq!(inv.cluster.pod_cidr.to_string(), "10.244.0.0/16");
    assert_eq!(inv.cluster.service_cidr.to_string(), "10.96.0.0/12");
    assert_eq!(inv.nodes[0].roles, ["control-plane"]);
    assert_eq!(inv.nodes[1].address.to_string(), "192.168.56.11");
    assert_eq!(inv.nodes[1].pod_cidr.unwrap().to_string(), "10.244.1.0/24");
    let vtep = inv.nodes[2].vtep.as_ref().unwrap();
    assert_eq!(
        (vtep.address.to_string(), vtep.mac.unwrap().to_string()),
        ("10.244.2.0".to_string(), "02:00:0a:f4:02:01".to_string())
    );
    assert_eq!(inv.cluster.api.service.to_string(), "10.96.0.1:443");
    assert_eq!(addrs(&inv.cluster.api.endpoints), ["192.168.56.10:6443"]);
    let dns = inv.cluster.dns.as_ref().unwrap();
    assert_eq!(dns.service.to_string(), "10.96.0.10:53");
    assert_eq!(dns.endpoints.len(), 2);
    assert!(
        dns.corefile
            .as_deref()
            .unwrap()
            .contains("forward . /etc/resolv.conf")
    );
    let flannel = component(&inv, "kube-flannel-ds");
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
    let coredns = component(&inv, "coredns");
    assert_eq!(
        (coredns.role.as_str(), coredns.kind.as_str()),
        ("dns", "Deployment")
    );
    assert_eq!(coredns.nodes, ["cp1", "w1"], "where the DNS endpoints run");
    assert!(
        serves(&inv)
            .iter()
            .all(|(_, s)| s.as_deref() == Some(&[][..]))
    );
    assert_eq!(
        files(&inv),
        (
            "kubeadm".into(),
            "/etc/cni/net.d".into(),
            "/etc/kubernetes/kubelet.conf".into(),
            None
        )
    );
    assert!(inv.cluster.bgp.is_none());
    assert!(inv.nodes.iter().all(|n| n.agents.host.is_none()
        && n.host_root.as_deref() == Some(std::path::Path::new("/host"))));
}

#[tokio::test]
async fn kubeadm_calico_without_its_crds() {
    // An older fixture: calico-node in kube-system, but no calico-config nor CRDs (all 404).
    let inv = discover("calico").await;
    assert_eq!(inv.cluster.cni, Cni::Calico);
    assert!(
        inv.cluster.overlay.is_none(),
        "no IPPool says so: not assumed"
    );
    let calico = component(&inv, "calico-node");
    assert_eq!(
        (calico.role.as_str(), calico.api_access),
        ("cni", ApiAccess::Service)
    );
    assert_eq!(
        calico.containers,
        ["upgrade-ipam", "install-cni", "calico-node"]
    );
    assert_eq!(
        component(&inv, "calico-kube-controllers").api_access,
        ApiAccess::Direct,
        "it sets KUBERNETES_SERVICE_HOST"
    );
    let ingress = component(&inv, "ingress-nginx-controller");
    assert_eq!(
        (ingress.role.as_str(), ingress.namespace.as_str()),
        ("ingress", "ingress-nginx")
    );
    assert_eq!(component(&inv, "kube-proxy").role, "proxy");
    // calico-node's own default backend is bird.
    assert_eq!(
        inv.cluster.bgp,
        Some(prober::inventory::Bgp {
            mesh: true,
            as_number: None
        })
    );
}

#[tokio::test]
async fn k3s_embedded_flannel() {
    let inv = discover("k3s").await;
    assert_eq!(
        inv.cluster.cni,
        Cni::Flannel,
        "flannel runs inside k3s: no DaemonSet"
    );
    assert_eq!(overlay(&inv), Some(("vxlan".into(), 8472, 1, Some(1450))));
    assert_eq!(inv.cluster.pod_cidr.to_string(), "10.42.0.0/16");
    assert_eq!(
        inv.cluster.service_cidr.to_string(),
        "10.43.0.0/16",
        "the ServiceCIDR object"
    );
    expect_nodes(
        &inv,
        &[
            (
                "k3s-server-1",
                "192.168.122.10",
                Some("10.42.0.0/24"),
                Some(("10.42.0.0", "ce:3a:4f:51:8a:01")),
            ),
            (
                "k3s-agent-1",
                "192.168.122.11",
                Some("10.42.1.0/24"),
                Some(("10.42.1.0", "5e:9d:22:0b:17:c4")),
            ),
            (
                "k3s-agent-2",
                "192.168.122.12",
                Some("10.42.2.0/24"),
                Some(("10.42.2.0", "a2:61:7e:c9:3d:58")),
            ),
        ],
    );
    assert_eq!(inv.nodes[0].roles, ["control-plane", "master"]);
    assert_eq!(inv.cluster.api.service.to_string(), "10.43.0.1:443");
    assert_eq!(addrs(&inv.cluster.api.endpoints), ["192.168.122.10:6443"]);
    let dns = inv.cluster.dns.as_ref().unwrap();
    assert_eq!(dns.service.to_string(), "10.43.0.10:53");
    assert_eq!(addrs(&dns.endpoints), ["10.42.0.3:53"]);
    assert!(
        dns.corefile
            .as_deref()
            .unwrap()
            .contains("hosts /etc/coredns/NodeHosts")
    );
    assert_eq!(component(&inv, "coredns").nodes, ["k3s-server-1"]);
    assert!(
        !inv.components
            .iter()
            .any(|c| c.role == "cni" || c.role == "proxy")
    );
    assert_eq!(
        files(&inv),
        (
            "k3s".into(),
            "/var/lib/rancher/k3s/agent/etc/cni/net.d".into(),
            "/var/lib/rancher/k3s/agent/kubelet.kubeconfig".into(),
            None
        )
    );
}

#[tokio::test]
async fn rke2_canal() {
    let inv = discover("rke2-canal").await;
    assert_eq!(inv.cluster.cni, Cni::Canal);
    assert_eq!(overlay(&inv), Some(("vxlan".into(), 8472, 1, Some(1450))));
    assert!(inv.cluster.bgp.is_none(), "Canal runs no BIRD");
    assert_eq!(inv.cluster.pod_cidr.to_string(), "10.42.0.0/16");
    assert_eq!(inv.cluster.service_cidr.to_string(), "10.43.0.0/16");
    expect_nodes(
        &inv,
        &[
            (
                "rke2-server-1",
                "192.168.123.10",
                Some("10.42.0.0/24"),
                Some(("10.42.0.0", "8e:21:4d:6a:0f:3b")),
            ),
            (
                "rke2-agent-1",
                "192.168.123.11",
                Some("10.42.1.0/24"),
                Some(("10.42.1.0", "b6:0c:93:e8:51:7a")),
            ),
            (
                "rke2-agent-2",
                "192.168.123.12",
                Some("10.42.2.0/24"),
                Some(("10.42.2.0", "32:f7:58:1d:c2:96")),
            ),
        ],
    );
    assert_eq!(inv.nodes[0].roles, ["control-plane", "etcd", "master"]);
    assert_eq!(addrs(&inv.cluster.api.endpoints), ["192.168.123.10:6443"]);
    let dns = inv.cluster.dns.as_ref().unwrap();
    assert_eq!(dns.service.to_string(), "10.43.0.10:53");
    assert_eq!(addrs(&dns.endpoints), ["10.42.0.5:53", "10.42.1.3:53"]);
    assert!(
        dns.corefile
            .as_deref()
            .unwrap()
            .contains("forward  . /etc/resolv.conf")
    );
    let canal = component(&inv, "rke2-canal");
    assert_eq!(
        (canal.role.as_str(), canal.host_network, canal.api_access),
        ("cni", true, ApiAccess::Service)
    );
    assert_eq!(
        canal.containers,
        [
            "install-cni",
            "flexvol-driver",
            "calico-node",
            "kube-flannel"
        ]
    );
    let coredns = component(&inv, "rke2-coredns-rke2-coredns");
    assert_eq!(
        (coredns.role.as_str(), coredns.nodes.clone()),
        (
            "dns",
            vec!["rke2-agent-1".to_string(), "rke2-server-1".to_string()]
        )
    );
    assert_eq!(
        component(&inv, "rke2-coredns-rke2-coredns-autoscaler").role,
        "other"
    );
    assert_eq!(
        component(&inv, "rke2-ingress-nginx-controller").role,
        "ingress"
    );
    assert_eq!(
        files(&inv),
        (
            "rke2".into(),
            "/etc/cni/net.d".into(),
            "/var/lib/rancher/rke2/agent/kubelet.kubeconfig".into(),
            Some("/etc/cni/net.d/calico-kubeconfig".into())
        )
    );
}

#[tokio::test]
async fn eks_vpc_cni() {
    let inv = discover("eks").await;
    assert_eq!(inv.cluster.cni, Cni::AwsVpc);
    assert!(inv.cluster.overlay.is_none());
    assert_eq!(
        inv.cluster.pod_cidr.to_string(),
        "10.0.0.0/22",
        "from the pods' addresses (the DNS endpoints) and the node subnets they share, never 0.0.0.0/0"
    );
    assert!(
        inv.nodes.iter().all(|n| n.pod_cidr.is_none()),
        "no per-node range on EKS"
    );
    assert_eq!(inv.cluster.service_cidr.to_string(), "172.20.0.0/16");
    let rows: Vec<(String, String, Vec<String>, Option<String>)> = inv
        .nodes
        .iter()
        .map(|n| {
            (
                n.name.clone(),
                n.address.to_string(),
                n.roles.clone(),
                n.zone.clone(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (
                "ip-10-0-1-23.us-west-2.compute.internal".to_string(),
                "10.0.1.23".to_string(),
                vec![],
                Some("us-west-2a".to_string())
            ),
            (
                "ip-10-0-2-45.us-west-2.compute.internal".to_string(),
                "10.0.2.45".to_string(),
                vec![],
                Some("us-west-2b".to_string())
            ),
            (
                "ip-10-0-3-67.us-west-2.compute.internal".to_string(),
                "10.0.3.67".to_string(),
                vec![],
                Some("us-west-2c".to_string())
            ),
        ]
    );
    assert_eq!(inv.cluster.api.service.to_string(), "172.20.0.1:443");
    assert_eq!(
        addrs(&inv.cluster.api.endpoints),
        ["10.0.1.200:443", "10.0.2.201:443"]
    );
    let dns = inv.cluster.dns.as_ref().unwrap();
    assert_eq!(dns.service.to_string(), "172.20.0.10:53");
    assert_eq!(addrs(&dns.endpoints), ["10.0.1.87:53", "10.0.2.140:53"]);
    let aws = component(&inv, "aws-node");
    assert_eq!(
        (aws.role.as_str(), aws.host_network, aws.containers.clone()),
        (
            "cni",
            true,
            vec![
                "aws-vpc-cni-init".to_string(),
                "aws-node".to_string(),
                "aws-eks-nodeagent".to_string()
            ]
        )
    );
    let proxy = component(&inv, "kube-proxy");
    assert_eq!(
        (proxy.role.as_str(), proxy.api_access),
        ("proxy", ApiAccess::Kubeconfig),
        "kube-proxy uses its own kubeconfig: no bootstrap cycle through the Service"
    );
    assert_eq!(
        files(&inv),
        (
            "eks".into(),
            "/etc/cni/net.d".into(),
            "/var/lib/kubelet/kubeconfig".into(),
            None
        )
    );
}

#[tokio::test]
async fn gke_dataplane_v2() {
    let inv = discover("gke-dpv2").await;
    assert_eq!(inv.cluster.cni, Cni::Cilium);
    assert!(
        inv.cluster.overlay.is_none(),
        "Dataplane V2 routes natively"
    );
    assert_eq!(inv.cluster.pod_cidr.to_string(), "10.52.0.0/14");
    assert_eq!(
        inv.cluster.service_cidr.to_string(),
        "10.56.0.0/16",
        "not a /12 over the pods"
    );
    expect_nodes(
        &inv,
        &[
            (
                "gke-prod-default-pool-3f9c2a1b-0k2m",
                "10.128.0.12",
                Some("10.52.0.0/24"),
                None,
            ),
            (
                "gke-prod-default-pool-3f9c2a1b-7h4q",
                "10.128.0.13",
                Some("10.52.1.0/24"),
                None,
            ),
            (
                "gke-prod-default-pool-8d1e4b7c-x9zt",
                "10.128.0.14",
                Some("10.52.2.0/24"),
                None,
            ),
        ],
    );
    assert_eq!(addrs(&inv.cluster.api.endpoints), ["203.0.113.10:443"]);
    let dns = inv.cluster.dns.as_ref().unwrap();
    assert_eq!(addrs(&dns.endpoints), ["10.52.0.5:53", "10.52.2.4:53"]);
    assert!(dns.corefile.is_none(), "kube-dns, not CoreDNS");
    assert_eq!(component(&inv, "anetd").role, "cni");
    let kube_dns = component(&inv, "kube-dns");
    assert_eq!(kube_dns.role, "dns");
    assert_eq!(
        kube_dns.containers,
        ["kubedns", "dnsmasq", "sidecar", "prometheus-to-sd"]
    );
    assert_eq!(component(&inv, "kube-dns-autoscaler").role, "other");
    assert!(
        serves(&inv)
            .iter()
            .all(|(_, s)| s.as_deref() == Some(&[][..]))
    );
    assert_eq!(files(&inv).0, "gke");
}

#[tokio::test]
async fn cilium_vxlan_cluster_pool() {
    let inv = discover("cilium-vxlan").await;
    assert_eq!(inv.cluster.cni, Cni::Cilium);
    assert_eq!(
        overlay(&inv),
        Some(("vxlan".into(), 8472, 0, None)),
        "VNI: identity, no constant"
    );
    assert_eq!(inv.cluster.pod_cidr.to_string(), "10.0.0.0/8");
    assert_eq!(inv.cluster.service_cidr.to_string(), "10.96.0.0/12");
    // CiliumNodes, not the (unused) kubeadm spec.podCIDR 10.244.x.0/24; the tunnel endpoints
    // are the CiliumNodes' CiliumInternalIPs (no MAC: a flow-based device).
    expect_nodes(
        &inv,
        &[
            (
                "cp1",
                "192.168.56.10",
                Some("10.0.0.0/24"),
                Some(("10.0.0.73", "")),
            ),
            (
                "w1",
                "192.168.56.11",
                Some("10.0.1.0/24"),
                Some(("10.0.1.18", "")),
            ),
            (
                "w2",
                "192.168.56.12",
                Some("10.0.2.0/24"),
                Some(("10.0.2.151", "")),
            ),
        ],
    );
    let dns = inv.cluster.dns.as_ref().unwrap();
    assert_eq!(addrs(&dns.endpoints), ["10.0.0.112:53", "10.0.1.45:53"]);
    assert_eq!(component(&inv, "coredns").nodes, ["cp1", "w1"]);
    let cilium = component(&inv, "cilium");
    assert_eq!((cilium.role.as_str(), cilium.host_network), ("cni", true));
    assert_eq!(
        component(&inv, "cilium-envoy").role,
        "other",
        "the L7 proxy is not the CNI"
    );
    assert_eq!(component(&inv, "cilium-operator").role, "other");
    assert_eq!(
        component(&inv, "kube-proxy").api_access,
        ApiAccess::Kubeconfig
    );
    assert!(
        serves(&inv)
            .iter()
            .all(|(_, s)| s.as_deref() == Some(&[4240][..])),
        "cilium-health"
    );
}

#[tokio::test]
async fn cilium_geneve_without_kube_proxy() {
    let inv = discover("cilium-geneve").await;
    assert_eq!(overlay(&inv), Some(("geneve".into(), 6082, 0, None)));
    assert_eq!(inv.cluster.pod_cidr.to_string(), "10.200.0.0/16");
    expect_nodes(
        &inv,
        &[
            (
                "master-0",
                "192.168.57.10",
                Some("10.200.0.0/24"),
                Some(("10.200.0.214", "")),
            ),
            (
                "worker-0",
                "192.168.57.11",
                Some("10.200.1.0/24"),
                Some(("10.200.1.96", "")),
            ),
            (
                "worker-1",
                "192.168.57.12",
                Some("10.200.2.0/24"),
                Some(("10.200.2.33", "")),
            ),
        ],
    );
    assert_eq!(addrs(&inv.cluster.api.endpoints), ["192.168.57.10:6443"]);
    assert_eq!(
        addrs(&inv.cluster.dns.as_ref().unwrap().endpoints),
        ["10.200.1.17:53", "10.200.2.9:53"]
    );
    assert!(!inv.components.iter().any(|c| c.name == "kube-proxy"));
    assert_eq!(
        component(&inv, "cilium").api_access,
        ApiAccess::Direct,
        "its agent sets KUBERNETES_SERVICE_HOST; init containers that never call the API do not count"
    );
    assert_eq!(
        component(&inv, "cilium-operator").api_access,
        ApiAccess::Direct
    );
}

#[tokio::test]
async fn cilium_native_routing() {
    let inv = discover("cilium-native").await;
    assert!(
        inv.cluster.overlay.is_none(),
        "routing-mode native, whatever tunnel-protocol says"
    );
    assert_eq!(inv.cluster.pod_cidr.to_string(), "10.244.0.0/16");
    expect_nodes(
        &inv,
        &[
            ("cp-01", "192.168.58.10", Some("10.244.0.0/24"), None),
            ("wk-01", "192.168.58.11", Some("10.244.1.0/24"), None),
            ("wk-02", "192.168.58.12", Some("10.244.2.0/24"), None),
        ],
    );
    // The CiliumNodes (not requested: ipam kubernetes) agree with spec.podCIDR.
    let cn = fixture_json("cilium-native", "ciliumnodes.json");
    for (n, item) in inv.nodes.iter().zip(cn["items"].as_array().unwrap()) {
        assert_eq!(
            item["spec"]["ipam"]["podCIDRs"][0].as_str(),
            Some(n.pod_cidr.unwrap().to_string().as_str())
        );
    }
    assert_eq!(
        addrs(&inv.cluster.dns.as_ref().unwrap().endpoints),
        ["10.244.0.5:53", "10.244.2.23:53"]
    );
    assert_eq!(component(&inv, "coredns").nodes, ["cp-01", "wk-02"]);
    assert_eq!(component(&inv, "cilium").api_access, ApiAccess::Direct);
}

#[tokio::test]
async fn calico_ipip_with_bgp() {
    let inv = discover("calico-ipip").await;
    assert_eq!(inv.cluster.cni, Cni::Calico);
    assert_eq!(
        overlay(&inv),
        Some(("ipip".into(), 0, 0, Some(1480))),
        "IP protocol 4, no port"
    );
    assert_eq!(
        inv.cluster.bgp,
        Some(prober::inventory::Bgp {
            mesh: true,
            as_number: Some(64512)
        })
    );
    assert_eq!(inv.cluster.pod_cidr.to_string(), "192.168.0.0/16");
    expect_nodes(
        &inv,
        &[
            // The IP-in-IP tunnel addresses calico-node annotates (no MAC).
            (
                "cp1",
                "10.10.0.11",
                Some("192.168.89.128/26"),
                Some(("192.168.89.128", "")),
            ),
            (
                "w1",
                "10.10.0.12",
                Some("192.168.45.0/26"),
                Some(("192.168.45.0", "")),
            ),
            (
                "w2",
                "10.10.0.13",
                Some("192.168.171.64/26"),
                Some(("192.168.171.64", "")),
            ),
        ],
    );
    assert!(
        serves(&inv)
            .iter()
            .all(|(_, s)| s.as_deref() == Some(&[179][..])),
        "BGP everywhere, Typha nowhere: {:?}",
        serves(&inv)
    );
    assert_eq!(addrs(&inv.cluster.api.endpoints), ["10.10.0.11:6443"]);
    assert_eq!(
        addrs(&inv.cluster.dns.as_ref().unwrap().endpoints),
        ["192.168.45.3:53", "192.168.171.66:53"]
    );
    assert_eq!(component(&inv, "coredns").nodes, ["w1", "w2"]);
    assert_eq!(
        component(&inv, "calico-node").containers,
        ["upgrade-ipam", "install-cni", "mount-bpffs", "calico-node"]
    );
    assert_eq!(
        files(&inv).3.as_deref(),
        Some("/etc/cni/net.d/calico-kubeconfig")
    );
}

#[tokio::test]
async fn calico_vxlan_without_bgp() {
    let inv = discover("calico-vxlan").await;
    assert_eq!(
        overlay(&inv),
        Some(("vxlan".into(), 4789, 4096, Some(1450)))
    );
    assert!(
        inv.cluster.bgp.is_none(),
        "calico_backend vxlan: no BIRD, whatever BGPConfiguration says"
    );
    assert!(
        serves(&inv)
            .iter()
            .all(|(_, s)| s.as_deref() == Some(&[][..])),
        "no 179, no 5473"
    );
    assert_eq!(inv.cluster.pod_cidr.to_string(), "10.244.0.0/16");
    expect_nodes(
        &inv,
        &[
            (
                "cp1",
                "10.30.0.11",
                Some("10.244.219.64/26"),
                Some(("10.244.219.64", "66:d2:0e:7a:13:4b")),
            ),
            (
                "w1",
                "10.30.0.12",
                Some("10.244.33.192/26"),
                Some(("10.244.33.192", "66:a0:5c:91:e4:07")),
            ),
            (
                "w2",
                "10.30.0.13",
                Some("10.244.148.0/26"),
                Some(("10.244.148.0", "66:3f:b8:22:7d:c1")),
            ),
        ],
    );
    assert_eq!(addrs(&inv.cluster.api.endpoints), ["10.30.0.11:6443"]);
    assert_eq!(
        addrs(&inv.cluster.dns.as_ref().unwrap().endpoints),
        ["10.244.33.194:53", "10.244.148.3:53"]
    );
    assert_eq!(component(&inv, "coredns").nodes, ["w1", "w2"]);
}

#[tokio::test]
async fn calico_operator_bgp_and_typha_on_some_nodes() {
    let inv = discover("calico-bgp-typha").await;
    assert_eq!(inv.cluster.cni, Cni::Calico);
    assert!(inv.cluster.overlay.is_none(), "encapsulation None");
    assert_eq!(
        inv.cluster.bgp,
        Some(prober::inventory::Bgp {
            mesh: true,
            as_number: Some(64512)
        })
    );
    assert_eq!(
        serves(&inv),
        [
            ("cp1".to_string(), Some(vec![179, 5473])),
            ("w1".to_string(), Some(vec![179])),
            ("w2".to_string(), Some(vec![179, 5473])),
        ],
        "Typha only where its pods run"
    );
    assert_eq!(inv.cluster.pod_cidr.to_string(), "10.48.0.0/16");
    expect_nodes(
        &inv,
        &[
            ("cp1", "10.40.0.11", Some("10.48.112.0/26"), None),
            ("w1", "10.40.0.12", Some("10.48.27.128/26"), None),
            ("w2", "10.40.0.13", Some("10.48.201.64/26"), None),
        ],
    );
    assert_eq!(addrs(&inv.cluster.api.endpoints), ["10.40.0.11:6443"]);
    assert_eq!(
        addrs(&inv.cluster.dns.as_ref().unwrap().endpoints),
        ["10.48.27.131:53", "10.48.201.66:53"]
    );
    let node = component(&inv, "calico-node");
    assert_eq!(
        (
            node.namespace.as_str(),
            node.role.as_str(),
            node.containers.clone()
        ),
        (
            "calico-system",
            "cni",
            vec![
                "flexvol-driver".to_string(),
                "install-cni".to_string(),
                "calico-node".to_string()
            ]
        )
    );
    let typha = component(&inv, "calico-typha");
    assert_eq!(
        (typha.role.as_str(), typha.nodes.clone()),
        ("typha", vec!["cp1".to_string(), "w2".to_string()])
    );
    assert_eq!(component(&inv, "csi-node-driver").role, "other");
    assert_eq!(
        component(&inv, "tigera-operator").namespace,
        "tigera-operator"
    );
}

// ---------------------------------------------------------------------------------------------
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
    let rules = Rbac::load(false);
    let (client, server) = serve(Box::new(move |s| {
        if rules.allows(s).is_empty() {
            return status(403, "Forbidden");
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

fn raw_of(flavour: &str) -> prober::runtime::kube::discover::Raw {
    let nodes: k8s_openapi::List<k8s_openapi::api::core::v1::Node> =
        serde_json::from_value(fixture_json(flavour, "nodes.json")).unwrap();
    prober::runtime::kube::discover::Raw {
        nodes: nodes.items,
        api_service: serde_json::from_value(fixture_json(flavour, "svc-kubernetes.json")).unwrap(),
        ..Default::default()
    }
}

#[test]
fn ipv6_first_and_ipv6_only_clusters_are_refused_dual_stack_uses_ipv4() {
    // IPv6 primary: the kubernetes Service is IPv6.
    let mut raw = raw_of("flannel");
    let svc = raw.api_service.as_mut().unwrap().spec.as_mut().unwrap();
    svc.cluster_ip = Some("fd00:10:96::1".into());
    svc.cluster_ips = Some(vec!["fd00:10:96::1".into(), "10.96.0.1".into()]);
    let err = build(&raw).unwrap_err().to_string();
    assert!(
        err.contains("primary IP family is IPv6") && err.contains("not supported"),
        "{err}"
    );
    // An IPv6-only node.
    let mut raw = raw_of("flannel");
    raw.nodes[1].status.as_mut().unwrap().addresses =
        Some(vec![k8s_openapi::api::core::v1::NodeAddress {
            type_: "InternalIP".into(),
            address: "fd00::11".into(),
        }]);
    let err = build(&raw).unwrap_err().to_string();
    assert!(
        err.contains("node w1 has only IPv6 addresses") && err.contains("IPv4 only"),
        "{err}"
    );
    // Dual-stack, IPv6 listed first: the IPv4 address is used.
    let mut raw = raw_of("flannel");
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
    assert_eq!(inv.nodes[2].address.to_string(), "192.168.56.12");
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

// ---------------------------------------------------------------------------------------------
// The agents: create, wait, fail fast, clean up

mod agents {
    use super::*;
    use prober::model::{AgentKind, AgentRef};
    use prober::runtime::kube::deploy::{
        self, AgentPod, Created, DeployError, Owned, agents_from_pods,
    };
    use prober::runtime::kube::manifests::AgentSpec;

    pub fn run_spec() -> AgentSpec {
        AgentSpec {
            run: Some("r1".into()),
            ttl: Some("2h".into()),
            expires: Some("2026-12-01T14:00:00Z".into()),
            ..AgentSpec::default()
        }
    }

    #[tokio::test]
    async fn apply_creates_this_runs_objects_and_records_them() {
        let (client, server) = serve(Box::new(|s| match (s.method.as_str(), s.uri.as_str()) {
            ("POST", _) => created(s),
            ("GET", u) if u.contains("/daemonsets?") => {
                respond(200, &list_of("DaemonSetList", Vec::new(), "1"))
            }
            _ => status(404, "NotFound"),
        }));
        let mut made = Created::default();
        deploy::apply(&client, &run_spec(), &mut made, &mut |_| {})
            .await
            .unwrap();
        drop(client);
        let seen = server.await.unwrap();
        let reqs: Vec<(String, String)> = seen
            .iter()
            .map(|s| (s.method.clone(), s.uri.clone()))
            .collect();
        let q = "?&fieldManager=prober";
        assert_eq!(
            reqs,
            [
                (
                    "GET".to_string(),
                    "/api/v1/namespaces/prober-system".to_string()
                ),
                ("POST".to_string(), format!("/api/v1/namespaces{q}")),
                (
                    "POST".to_string(),
                    format!("/api/v1/namespaces/prober-system/serviceaccounts{q}")
                ),
                (
                    "POST".to_string(),
                    format!("/apis/apps/v1/namespaces/prober-system/daemonsets{q}")
                ),
                (
                    "POST".to_string(),
                    format!("/apis/apps/v1/namespaces/prober-system/daemonsets{q}")
                ),
                (
                    "GET".to_string(),
                    "/apis/apps/v1/namespaces/prober-system/daemonsets?&labelSelector=prober.io%2Frun"
                        .to_string()
                ),
            ]
        );
        let seen = &seen[1..];
        let ns = &seen[0].body;
        assert_eq!(
            ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
            "privileged"
        );
        assert_eq!(ns["metadata"]["labels"]["prober.io/run"], "r1");
        assert_eq!(seen[1].body["metadata"]["name"], "prober-agent-r1");
        assert_eq!(seen[1].body["automountServiceAccountToken"], false);
        let host = &seen[2].body;
        assert_eq!(host["metadata"]["name"], "probe-host-r1");
        assert_eq!(host["metadata"]["labels"]["prober.io/run"], "r1");
        assert_eq!(
            host["spec"]["selector"]["matchLabels"]["prober.io/run"],
            "r1"
        );
        let pod = &host["spec"]["template"]["spec"];
        assert_eq!(pod["hostNetwork"], true);
        assert_eq!(pod["serviceAccountName"], "prober-agent-r1");
        assert_eq!(pod["nodeSelector"]["kubernetes.io/os"], "linux");
        assert_eq!(pod["tolerations"][0]["operator"], "Exists");
        assert!(
            pod.get("priorityClassName").is_none(),
            "not outside kube-system"
        );
        let c = &pod["containers"][0];
        assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/healthz");
        assert_eq!(c["readinessProbe"]["httpGet"]["port"], 9917);
        assert_eq!(
            c["securityContext"]["capabilities"]["add"],
            json!(["NET_RAW"])
        );
        // Idle at its TTL: a DaemonSet restarts an agent that exits.
        assert_eq!(
            c["args"],
            json!(["serve", "--ttl", "2h", "--on-ttl", "idle"])
        );
        // No container port on the host network: it would become a host port, and a leftover
        // or concurrent run's host agents would keep this run's Pending on every node.
        assert!(c.get("ports").is_none(), "{c}");
        assert_eq!(c["terminationMessagePolicy"], "FallbackToLogsOnError");
        assert_eq!(
            host["metadata"]["annotations"]["prober.io/expires"],
            "2026-12-01T14:00:00Z"
        );
        assert_eq!(seen[3].body["metadata"]["name"], "probe-pod-r1");
        assert!(
            seen[3].body["spec"]["template"]["spec"]
                .get("hostNetwork")
                .is_none()
        );
        let names: Vec<&str> = made.daemonsets.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["probe-host-r1", "probe-pod-r1"]);
        assert_eq!(
            made.namespace.unwrap().uid.as_deref(),
            Some("uid-prober-system")
        );
    }

    #[tokio::test]
    async fn a_failed_apply_is_cleaned_up_exactly_and_an_existing_namespace_is_kept() {
        // The namespace exists (someone else's), the pod DaemonSet is refused.
        let (client, server) = serve(Box::new(|s| match (s.method.as_str(), s.uri.as_str()) {
            ("GET", "/api/v1/namespaces/prober-system") => respond(
                200,
                &json!({"metadata": {"name": "prober-system", "uid": "someone-elses"}}),
            ),
            ("GET", u) if u.contains("/daemonsets?") => {
                respond(200, &list_of("DaemonSetList", Vec::new(), "1"))
            }
            ("GET", u) if u.contains("/serviceaccounts?") => {
                respond(200, &list_of("ServiceAccountList", Vec::new(), "1"))
            }
            ("POST", "/api/v1/namespaces?&fieldManager=prober") => {
                panic!("an existing namespace is used, never created (no cluster-wide create)")
            }
            ("POST", _) if s.body["metadata"]["name"] == "probe-pod-r1" => status(422, "Invalid"),
            ("POST", _) => created(s),
            ("DELETE", _) => status(200, "Success"),
            _ => status(404, "NotFound"),
        }));
        let spec = run_spec();
        let mut made = Created::default();
        let err = deploy::apply(&client, &spec, &mut made, &mut |_| {})
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("create daemonset prober-system/probe-pod-r1"),
            "{err}"
        );
        let deleted = deploy::cleanup(&client, &spec, &made).await.unwrap();
        drop(client);
        let seen = server.await.unwrap();
        assert_eq!(
            deleted,
            ["daemonset/probe-host-r1", "serviceaccount/prober-agent-r1"]
        );
        let removals: Vec<(&str, &Value)> = seen
            .iter()
            .filter(|s| s.method == "DELETE")
            .map(|s| (s.uri.as_str(), &s.body["preconditions"]["uid"]))
            .collect();
        assert_eq!(
            removals,
            [
                (
                    "/apis/apps/v1/namespaces/prober-system/daemonsets/probe-host-r1?",
                    &json!("uid-probe-host-r1")
                ),
                (
                    "/api/v1/namespaces/prober-system/serviceaccounts/prober-agent-r1?",
                    &json!("uid-prober-agent-r1")
                ),
            ],
            "only what the run created, and only while it is the same object; never the namespace it did not create"
        );
    }

    #[tokio::test]
    async fn a_rerun_waits_for_the_namespace_still_being_deleted() {
        // The last run's cleanup deleted the namespace a moment ago: it is Terminating (and
        // the NamespaceLifecycle admission plugin refuses new objects in it) for a few seconds.
        let gets = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen_gets = gets.clone();
        let (client, server) = serve(Box::new(move |s| {
            let (path, _) = split(&s.uri);
            match (s.method.as_str(), path.as_str()) {
                ("GET", "/api/v1/namespaces/prober-system") => {
                    if seen_gets.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < 2 {
                        respond(
                            200,
                            &json!({"metadata": {"name": "prober-system", "uid": "old",
                            "deletionTimestamp": "2026-12-01T12:00:00Z"}, "status": {"phase": "Terminating"}}),
                        )
                    } else {
                        status(404, "NotFound")
                    }
                }
                ("GET", p) if p.ends_with("/daemonsets") => {
                    respond(200, &list_of("DaemonSetList", Vec::new(), "1"))
                }
                ("POST", _) => created(s),
                _ => status(404, "NotFound"),
            }
        }));
        let mut made = Created::default();
        let mut notes = Vec::new();
        deploy::apply(&client, &run_spec(), &mut made, &mut |n| notes.push(n))
            .await
            .unwrap();
        drop(client);
        server.await.unwrap();
        assert_eq!(gets.load(std::sync::atomic::Ordering::SeqCst), 3);
        assert!(
            made.namespace.is_some(),
            "created anew once the old one was gone"
        );
        assert!(
            notes.iter().any(|n| n.contains("still being deleted")),
            "{notes:?}"
        );
    }

    #[tokio::test]
    async fn a_create_refused_in_a_terminating_namespace_is_said_in_words() {
        // `NamespaceLifecycle` (kubernetes/kubernetes
        // staging/src/k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle/admission.go).
        let (client, server) = serve(Box::new(|s| {
            let (path, _) = split(&s.uri);
            match (s.method.as_str(), path.as_str()) {
                ("GET", "/api/v1/namespaces/prober-system") => status(403, "Forbidden"),
                ("POST", "/api/v1/namespaces") => status(409, "AlreadyExists"),
                ("GET", p) if p.ends_with("/daemonsets") => {
                    respond(200, &list_of("DaemonSetList", Vec::new(), "1"))
                }
                ("POST", _) => respond(
                    403,
                    &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "message": "serviceaccounts \"prober-agent-r1\" is forbidden: unable to create new content in namespace prober-system because it is being terminated",
                    "reason": "Forbidden", "code": 403}),
                ),
                _ => status(404, "NotFound"),
            }
        }));
        let mut made = Created::default();
        let err = deploy::apply(&client, &run_spec(), &mut made, &mut |_| {})
            .await
            .unwrap_err();
        drop(client);
        server.await.unwrap();
        let e = err.to_string();
        assert!(
            matches!(err, DeployError::Terminating { .. }) && e.contains("run again in a minute"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_run_never_takes_over_or_wipes_another_runs_live_agents() {
        // Run r0 is going in prober-system (its namespace, its agents, expiring in the future).
        let live = expiring(
            ds("probe-host-r0", "host-agent", Some("r0")),
            "2999-01-01T00:00:00Z",
        );
        let list = list_of("DaemonSetList", vec![live], "3");
        let (client, server) = serve(Box::new(move |s| {
            let (path, _) = split(&s.uri);
            match (s.method.as_str(), path.as_str()) {
                ("GET", "/api/v1/namespaces/prober-system") => respond(
                    200,
                    &json!({"metadata": {"name": "prober-system", "uid": "ns-r0", "labels": {"prober.io/run": "r0"}}}),
                ),
                ("GET", p) if p.ends_with("/daemonsets") => respond(200, &list),
                ("GET", p) if p.ends_with("/serviceaccounts") => {
                    respond(200, &list_of("ServiceAccountList", Vec::new(), "1"))
                }
                ("DELETE", _) => status(200, "Success"),
                (m, p) => panic!("run r1 must not {m} {p}"),
            }
        }));
        let spec = run_spec();
        let mut made = Created::default();
        let err = deploy::apply(&client, &spec, &mut made, &mut |_| {})
            .await
            .unwrap_err();
        assert!(
            matches!(&err, DeployError::OtherRun { run, .. } if run == "r0"),
            "{err}"
        );
        assert_eq!(made, Created::default(), "nothing created");
        // A run that did create the namespace leaves it while another run's agents are in it.
        let mine = Created {
            namespace: Some(Owned {
                name: "prober-system".into(),
                uid: Some("ns-r1".into()),
            }),
            ..Created::default()
        };
        let deleted = deploy::cleanup(&client, &spec, &mine).await.unwrap();
        drop(client);
        let seen = server.await.unwrap();
        assert!(deleted.is_empty(), "{deleted:?}");
        assert!(!seen.iter().any(|s| s.method == "DELETE"));
    }

    #[tokio::test]
    async fn an_interruption_while_creating_removes_what_was_created_in_flight_too() {
        // Ctrl-C arrives while the host DaemonSet's create is on its way: the run stops at once
        // and cleans up, the object whose answer it never read included (found by run label).
        let inv = discover("flannel").await;
        let made: std::sync::Arc<std::sync::Mutex<Vec<Value>>> = std::sync::Arc::default();
        let interrupt = std::sync::Arc::new(tokio::sync::Notify::new());
        let (log, fire) = (made.clone(), interrupt.clone());
        let (client, server) = serve(Box::new(move |s| {
            let (path, _) = split(&s.uri);
            let listed = |kind: &str| {
                let items: Vec<Value> = log
                    .lock()
                    .unwrap()
                    .iter()
                    .filter(|o| o["kind"] == kind)
                    .cloned()
                    .collect();
                respond(200, &list_of("List", items, "1"))
            };
            match (s.method.as_str(), path.as_str()) {
                ("GET", p) if p.ends_with("/daemonsets") && s.uri.contains("%21prober.io") => {
                    respond(200, &list_of("DaemonSetList", Vec::new(), "1"))
                }
                ("GET", p) if p.ends_with("/daemonsets") => listed("DaemonSet"),
                ("GET", p) if p.ends_with("/serviceaccounts") => listed("ServiceAccount"),
                // No namespace yet (GET it: 404, the fall-through): the run creates it.
                ("POST", p) => {
                    let mut o = s.body.clone();
                    o["kind"] = json!(if p.ends_with("/daemonsets") {
                        "DaemonSet"
                    } else if p.ends_with("/serviceaccounts") {
                        "ServiceAccount"
                    } else {
                        "Namespace"
                    });
                    log.lock().unwrap().push(o);
                    if p.ends_with("/daemonsets") {
                        fire.notify_one();
                    }
                    created(s)
                }
                ("DELETE", _) => status(200, "Success"),
                _ => status(404, "NotFound"),
            }
        }));
        let session = deploy::Session {
            namespace: "prober-system".into(),
            image: "example/prober:test".into(),
            use_existing: false,
            keep_agents: false,
            wait: std::time::Duration::from_secs(30),
            run_id: "r1".into(),
            ttl: "2h".into(),
            cleanup_deadline: std::time::Duration::from_secs(10),
            image_pull_secrets: Vec::new(),
        };
        let mut inv = inv;
        let mut notes = Vec::new();
        let out: Result<(), deploy::SessionError<()>> = deploy::with_agents(
            &client,
            &session,
            &mut inv,
            &mut |n| notes.push(n),
            &|_, _| {},
            || {
                let i = interrupt.clone();
                async move { i.notified().await }
            },
            async |_: &Inventory, _| panic!("no probing after an interruption"),
        )
        .await;
        drop(client);
        let seen = server.await.unwrap();
        assert!(matches!(out, Err(deploy::SessionError::Interrupted)));
        // It stopped creating at once: the pod agents' DaemonSet was never asked for.
        assert!(
            !seen
                .iter()
                .any(|s| s.method == "POST" && s.body["metadata"]["name"] == "probe-pod-r1"),
            "created after the interruption"
        );
        let deleted: Vec<&str> = seen
            .iter()
            .filter(|s| s.method == "DELETE")
            .map(|s| s.uri.as_str())
            .collect();
        assert!(
            deleted.contains(&"/apis/apps/v1/namespaces/prober-system/daemonsets/probe-host-r1?")
                && deleted
                    .contains(&"/api/v1/namespaces/prober-system/serviceaccounts/prober-agent-r1?")
                && deleted.contains(&"/api/v1/namespaces/prober-system?"),
            "{deleted:?} {notes:?}"
        );
    }

    fn expiring(mut v: Value, at: &str) -> Value {
        v["metadata"]["annotations"] = json!({"prober.io/expires": at});
        v
    }

    fn ds(name: &str, component: &str, run: Option<&str>) -> Value {
        let mut labels =
            json!({"app.kubernetes.io/name": "prober", "app.kubernetes.io/component": component});
        if let Some(r) = run {
            labels["prober.io/run"] = json!(r);
        }
        json!({"metadata": {"name": name, "namespace": "prober-system", "uid": format!("uid-{name}"), "labels": labels},
               "spec": {"selector": {}, "template": {}}})
    }

    #[tokio::test]
    async fn a_permanent_install_is_found_by_label() {
        let (client, server) = serve(Box::new(|_| {
            respond(
                200,
                &list_of(
                    "DaemonSetList",
                    vec![
                        ds("probe-host", "host-agent", None),
                        ds("probe-pod", "pod-agent", None),
                    ],
                    "7",
                ),
            )
        }));
        assert!(deploy::permanent(&client, "prober-system").await.unwrap());
        drop(client);
        let seen = server.await.unwrap();
        assert_eq!(
            seen[0].uri,
            "/apis/apps/v1/namespaces/prober-system/daemonsets?&labelSelector=app.kubernetes.io%2Fname%3Dprober%2C%21prober.io%2Frun"
        );
    }

    #[tokio::test]
    async fn prober_cleanup_removes_run_leftovers_and_never_a_permanent_install() {
        let (client, server) = serve(Box::new(|s| {
            let (path, _) = split(&s.uri);
            match (s.method.as_str(), path.as_str()) {
                // r9 expired (its coordinator crashed); r8 is a run still going elsewhere.
                ("GET", "/apis/apps/v1/namespaces/prober-system/daemonsets") => respond(
                    200,
                    &list_of(
                        "DaemonSetList",
                        vec![
                            expiring(
                                ds("probe-host-r9", "host-agent", Some("r9")),
                                "2020-01-01T00:00:00Z",
                            ),
                            expiring(
                                ds("probe-host-r8", "host-agent", Some("r8")),
                                "2999-01-01T00:00:00Z",
                            ),
                        ],
                        "3",
                    ),
                ),
                ("GET", "/api/v1/namespaces/prober-system/serviceaccounts") => {
                    respond(200, &list_of("ServiceAccountList", Vec::new(), "3"))
                }
                // The namespace of a permanent install: no run label.
                ("GET", "/api/v1/namespaces/prober-system") => respond(
                    200,
                    &json!({"metadata": {"name": "prober-system", "uid": "u-ns", "labels": {"app.kubernetes.io/name": "prober"}}}),
                ),
                ("DELETE", _) => status(200, "Success"),
                _ => status(404, "NotFound"),
            }
        }));
        let (deleted, kept) = deploy::cleanup_leftovers(&client, "prober-system", false)
            .await
            .unwrap();
        drop(client);
        let seen = server.await.unwrap();
        assert_eq!(
            deleted,
            ["daemonset/probe-host-r9"],
            "never a live run's agents"
        );
        assert_eq!(kept, ["r8"]);
        assert_eq!(
            seen[0].uri,
            "/apis/apps/v1/namespaces/prober-system/daemonsets?&labelSelector=prober.io%2Frun"
        );
        assert!(
            !seen
                .iter()
                .any(|s| s.method == "DELETE" && s.uri.contains("/namespaces/prober-system?"))
        );
    }

    /// An agent pod on `node`; `state` is "ready", "pending", or a kubelet waiting reason.
    pub fn pod(name: &str, node: &str, component: &str, run: &str, state: &str, ip: &str) -> Value {
        let ready = state == "ready";
        let waiting = (!ready && state != "pending").then(|| json!([{"name": "probe-pod", "ready": false, "restartCount": 0, "image": "x", "imageID": "",
            "state": {"waiting": {"reason": state, "message": if state == "ErrImagePull" {
                "failed to pull and unpack image \"ghcr.io/prober-dev/prober:0.1.0\": not found"
            } else { "Back-off pulling image \"ghcr.io/prober-dev/prober:0.1.0\"" }}}}]));
        json!({
            "metadata": {"name": name, "namespace": "prober-system", "resourceVersion": "11",
                         "labels": {"app.kubernetes.io/name": "prober", "app.kubernetes.io/component": component, "prober.io/run": run}},
            "spec": {"nodeName": node, "containers": [{"name": "probe-pod"}]},
            "status": {
                "phase": if ready { "Running" } else { "Pending" },
                "podIP": if ready { json!(ip) } else { Value::Null },
                "podIPs": if ready { json!([{"ip": "fd00::1"}, {"ip": ip}]) } else { Value::Null },
                "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
                "containerStatuses": waiting.unwrap_or(json!([]))
            }
        })
    }

    fn watch_body(events: &[(&str, Value)]) -> Response<Body> {
        let mut text = String::new();
        for (kind, obj) in events {
            text.push_str(&json!({"type": kind, "object": obj}).to_string());
            text.push('\n');
        }
        Response::builder()
            .status(200)
            .body(Body::from(text.into_bytes()))
            .unwrap()
    }

    pub fn nodes() -> Vec<String> {
        vec!["cp1".into(), "w1".into()]
    }

    /// Agent pods listed pending, then made ready by the watch.
    pub fn agents_router(s: &Seen, run: &str) -> Option<Response<Body>> {
        let (path, q) = split(&s.uri);
        let watch = q.contains_key("watch");
        let all = |state: &str| {
            vec![
                pod("h1", "cp1", "host-agent", run, state, "192.168.56.10"),
                pod("p1", "cp1", "pod-agent", run, state, "10.244.0.5"),
                pod("h2", "w1", "host-agent", run, state, "192.168.56.11"),
                pod("p2", "w1", "pod-agent", run, state, "10.244.1.5"),
            ]
        };
        match path.as_str() {
            "/api/v1/namespaces/prober-system/pods" if watch => Some(watch_body(
                &all("ready")
                    .into_iter()
                    .map(|p| ("MODIFIED", p))
                    .collect::<Vec<_>>(),
            )),
            "/api/v1/namespaces/prober-system/pods" => {
                Some(respond(200, &list_of("PodList", all("pending"), "10")))
            }
            "/api/v1/namespaces/prober-system/events" if watch => Some(watch_body(&[])),
            "/api/v1/namespaces/prober-system/events" => {
                Some(respond(200, &list_of("EventList", Vec::new(), "5")))
            }
            _ => None,
        }
    }

    /// A permanent install whose agents were moved off 9917, each container saying so its own
    /// way: the inventory's agents get the port their pod says, never the default.
    #[tokio::test]
    async fn an_existing_install_on_another_port_is_reached_on_that_port() {
        let with = |mut p: Value, container: Value| {
            p["spec"]["containers"] = json!([container]);
            p
        };
        let all = move |state: &str| {
            vec![
                with(
                    pod("h1", "cp1", "host-agent", "", state, "192.168.56.10"),
                    json!({"name": "probe-pod", "args": ["serve", "--port", "9920"],
                           "ports": [{"containerPort": 9920, "name": "probe"}]}),
                ),
                with(
                    pod("p1", "cp1", "pod-agent", "", state, "10.244.0.5"),
                    json!({"name": "probe-pod", "args": ["serve", "--port=9921"]}),
                ),
                with(
                    pod("h2", "w1", "host-agent", "", state, "192.168.56.11"),
                    json!({"name": "probe-pod", "args": ["serve"],
                           "env": [{"name": "PROBE_POD_PORT", "value": "9922"}]}),
                ),
                with(
                    pod("p2", "w1", "pod-agent", "", state, "10.244.1.5"),
                    json!({"name": "probe-pod", "args": ["serve"],
                           "ports": [{"containerPort": 9923, "name": "probe"}]}),
                ),
            ]
        };
        let (client, server) = serve(Box::new(move |s| {
            let (path, q) = split(&s.uri);
            match path.as_str() {
                "/api/v1/namespaces/prober-system/pods" if q.contains_key("watch") => watch_body(
                    &all("ready")
                        .into_iter()
                        .map(|p| ("MODIFIED", p))
                        .collect::<Vec<_>>(),
                ),
                "/api/v1/namespaces/prober-system/pods" => {
                    respond(200, &list_of("PodList", all("pending"), "10"))
                }
                _ => agents_router(s, "").unwrap_or_else(|| status(404, "NotFound")),
            }
        }));
        let (ready, missing) = deploy::wait(
            &client,
            &AgentSpec::default(),
            &nodes(),
            std::time::Duration::from_secs(30),
            &|_, _| {},
        )
        .await
        .unwrap();
        drop(client);
        server.await.unwrap();
        assert!(missing.is_empty(), "{missing:?}");
        let mut inv = discover("flannel").await;
        deploy::attach_agents(&mut inv, &ready, "prober-system");
        let ports: Vec<(String, Option<u16>, Option<u16>)> = inv
            .nodes
            .iter()
            .map(|n| {
                (
                    n.name.clone(),
                    n.agents.host.as_ref().map(|a| a.port),
                    n.agents.pod.as_ref().map(|a| a.port),
                )
            })
            .collect();
        assert_eq!(
            ports,
            [
                ("cp1".to_string(), Some(9920), Some(9921)),
                ("w1".to_string(), Some(9922), Some(9923)),
                ("w2".to_string(), None, None),
            ],
            "w2 has no agent pod: no agent, not one on 9917"
        );
    }

    #[tokio::test]
    async fn the_wait_lists_once_then_watches() {
        let (client, server) = serve(Box::new(|s| {
            agents_router(s, "r1").unwrap_or_else(|| status(404, "NotFound"))
        }));
        let (ready, missing) = deploy::wait(
            &client,
            &run_spec(),
            &nodes(),
            std::time::Duration::from_secs(30),
            &|_, _| {},
        )
        .await
        .unwrap();
        drop(client);
        let seen = server.await.unwrap();
        assert!(missing.is_empty(), "{missing:?}");
        assert_eq!(
            ready[&AgentRef {
                node: "w1".into(),
                agent: AgentKind::Pod
            }],
            AgentPod {
                pod: "p2".into(),
                address: "10.244.1.5".parse().unwrap(),
                port: 9917,
            },
            "the IPv4 pod IP, wherever podIPs lists it"
        );
        let sel = "labelSelector=app.kubernetes.io%2Fname%3Dprober%2Cprober.io%2Frun%3Dr1";
        let fs = "fieldSelector=type%3DWarning";
        let uris: Vec<&str> = seen.iter().map(|s| s.uri.as_str()).collect();
        assert_eq!(
            uris,
            [
                format!("/api/v1/namespaces/prober-system/pods?&{sel}&limit=500"),
                format!("/api/v1/namespaces/prober-system/events?&{fs}&limit=500"),
                format!(
                    "/api/v1/namespaces/prober-system/pods?&watch=true&timeoutSeconds=31&{sel}&allowWatchBookmarks=true&resourceVersion=10"
                ),
                format!(
                    "/api/v1/namespaces/prober-system/events?&watch=true&timeoutSeconds=31&{fs}&allowWatchBookmarks=true&resourceVersion=5"
                ),
            ],
            "no list every second"
        );
    }

    #[tokio::test]
    async fn every_agent_stuck_pulling_fails_within_seconds_naming_the_image() {
        let (client, server) = serve(Box::new(|s| {
            let (path, q) = split(&s.uri);
            let stuck = |p: &str, n: &str, c: &str, st: &str| pod(p, n, c, "r1", st, "");
            match path.as_str() {
                "/api/v1/namespaces/prober-system/pods" if q.contains_key("watch") => {
                    watch_body(&[
                        ("MODIFIED", stuck("h1", "cp1", "host-agent", "ErrImagePull")),
                        (
                            "MODIFIED",
                            stuck("p1", "cp1", "pod-agent", "ImagePullBackOff"),
                        ),
                        (
                            "MODIFIED",
                            stuck("h2", "w1", "host-agent", "ImagePullBackOff"),
                        ),
                        (
                            "MODIFIED",
                            stuck("p2", "w1", "pod-agent", "ImagePullBackOff"),
                        ),
                    ])
                }
                "/api/v1/namespaces/prober-system/pods" => respond(
                    200,
                    &list_of(
                        "PodList",
                        vec![stuck("h1", "cp1", "host-agent", "pending")],
                        "10",
                    ),
                ),
                _ => agents_router(s, "r1").unwrap_or_else(|| status(404, "NotFound")),
            }
        }));
        let started = std::time::Instant::now();
        let err = deploy::wait(
            &client,
            &run_spec(),
            &nodes(),
            std::time::Duration::from_secs(90),
            &|_, _| {},
        )
        .await
        .unwrap_err();
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "not the whole 90 s"
        );
        drop(client);
        server.await.unwrap();
        assert!(matches!(err, DeployError::ImagePull { .. }));
        let text = err.to_string();
        assert!(
            text.contains("ghcr.io/prober-dev/prober:0.1.0")
                && text.contains("ErrImagePull: failed to pull and unpack image")
                && text.contains("--image"),
            "one error naming the image and the kubelet's message: {text}"
        );
    }

    #[tokio::test]
    async fn a_refused_daemonset_says_why_from_its_failed_create_event() {
        let message = "pods \"probe-host-r1-x\" is forbidden: violates PodSecurity \"baseline:latest\": host namespaces (hostNetwork=true)";
        let (client, server) = serve(Box::new(move |s| {
            let (path, q) = split(&s.uri);
            match path.as_str() {
                // The pod agents run; the host DaemonSet could create no pod at all.
                "/api/v1/namespaces/prober-system/pods" if !q.contains_key("watch") => respond(
                    200,
                    &list_of(
                        "PodList",
                        vec![
                            pod("p1", "cp1", "pod-agent", "r1", "ready", "10.244.0.5"),
                            pod("p2", "w1", "pod-agent", "r1", "ready", "10.244.1.5"),
                        ],
                        "10",
                    ),
                ),
                "/api/v1/namespaces/prober-system/events" if !q.contains_key("watch") => respond(
                    200,
                    &list_of(
                        "EventList",
                        vec![json!({
                            "metadata": {"name": "probe-host-r1.17a", "namespace": "prober-system"},
                            "involvedObject": {"kind": "DaemonSet", "name": "probe-host-r1", "namespace": "prober-system"},
                            "reason": "FailedCreate", "type": "Warning", "message": message
                        })],
                        "5",
                    ),
                ),
                _ => status(404, "NotFound"),
            }
        }));
        let started = std::time::Instant::now();
        let (ready, missing) = deploy::wait(
            &client,
            &run_spec(),
            &nodes(),
            std::time::Duration::from_secs(90),
            &|_, _| {},
        )
        .await
        .unwrap();
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "a refusal does not lift by waiting"
        );
        drop(client);
        let seen = server.await.unwrap();
        assert_eq!(seen.len(), 2, "decided from the lists, no watch needed");
        assert_eq!(ready.len(), 2);
        assert_eq!(missing.len(), 2);
        assert!(
            missing.iter().all(|m| m.agent == AgentKind::Host
                && m.detail
                    == format!("the DaemonSet probe-host-r1 could not create its pod: {message}")),
            "{missing:?}"
        );
    }

    #[test]
    fn agents_that_never_became_ready_are_reported_with_the_reason() {
        let p =
            |n: &str, node: &str, c: &str, st: &str, ip: &str| -> k8s_openapi::api::core::v1::Pod {
                serde_json::from_value(pod(n, node, c, "r1", st, ip)).unwrap()
            };
        let mut crashing = pod("h3", "w3", "host-agent", "r1", "CrashLoopBackOff", "");
        crashing["status"]["containerStatuses"][0]["lastState"] = json!({"terminated": {
            "exitCode": 2, "reason": "Error",
            "message": "probe-pod serve: cannot listen on tcp 0.0.0.0:9917: Address in use (os error 98)"}});
        let pods = [
            p("h1", "cp1", "host-agent", "ready", "192.168.56.10"),
            p("p1", "cp1", "pod-agent", "ready", "10.244.0.5"),
            p("h2", "w1", "host-agent", "ready", "192.168.56.11"),
            p("p2", "w1", "pod-agent", "ImagePullBackOff", ""),
            // Pending with no container status yet: only its events say why.
            p("p3", "w3", "pod-agent", "ContainerCreating", ""),
            serde_json::from_value(crashing).unwrap(),
        ];
        let nodes = ["cp1", "w1", "w2", "w3"].map(String::from);
        let w2: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
            "metadata": {"name": "w2"},
            "status": {"conditions": [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                                       "message": "Kubelet stopped posting node status."}]}}))
        .unwrap();
        let why = deploy::agents::Why {
            pod_events: BTreeMap::from([(
                "p3".to_string(),
                "FailedCreatePodSandBox: failed to setup network for sandbox: plugin type=\"flannel\" failed (add): open /run/flannel/subnet.env: no such file or directory".to_string(),
            )]),
            nodes: BTreeMap::from([("w2".to_string(), deploy::agents::node_down(&w2).unwrap())]),
            ..deploy::agents::Why::default()
        };
        let (ready, missing) = agents_from_pods(&pods, &nodes, &why);
        assert_eq!(ready.len(), 3);
        let why: Vec<(String, AgentKind, String)> = missing
            .iter()
            .map(|m| (m.node.clone(), m.agent, m.detail.clone()))
            .collect();
        assert_eq!(why.len(), 5, "{why:?}");
        assert!(
            why[0].0 == "w1"
                && why[0].1 == AgentKind::Pod
                && why[0].2.starts_with("ImagePullBackOff"),
            "{why:?}"
        );
        // The node's own condition, never "a taint" (the agents tolerate every taint).
        assert!(
            why[1..3].iter().all(|(n, _, d)| n == "w2"
                && d.contains("NotReady")
                && d.contains("Kubelet stopped posting")
                && !d.contains("taint")),
            "{why:?}"
        );
        // The crash's own words (FallbackToLogsOnError), and the sandbox failure by name.
        assert_eq!(why[3].0, "w3");
        assert!(
            why[3].2.starts_with("CrashLoopBackOff: it exited with 2")
                && why[3].2.contains("Address in use"),
            "{why:?}"
        );
        assert!(why[4].2.starts_with("FailedCreatePodSandBox: "), "{why:?}");
        // One node's pull failure is not "every agent": the others run.
        assert!(deploy::agents::all_stuck_pulling(&pods, 6).is_none());
    }

    #[tokio::test]
    async fn exec_goes_through_the_api_server_with_the_plan_command() {
        use probe_proto::Plan;
        use prober::runtime::Runtime;
        use prober::runtime::kube::exec::KubeExec;
        let (client, server) = serve(Box::new(|_| status(403, "Forbidden")));
        let agent = AgentRef {
            node: "w1".into(),
            agent: AgentKind::Pod,
        };
        let agents = BTreeMap::from([(
            agent.clone(),
            AgentPod {
                pod: "probe-pod-x7k2p".into(),
                address: "10.244.1.5".parse().unwrap(),
                port: 9917,
            },
        )]);
        let exec = KubeExec::new(client, "prober-system", agents);
        let plan: Plan = probe_proto::parse_plan(
            r#"{"deadlineMs":1000,"probes":[{"id":"a","kind":"icmp","address":"10.244.2.5"}]}"#,
        )
        .unwrap();
        let (tx, _rx) = tokio::sync::mpsc::channel(4);
        let err = exec
            .run(&agent, plan.clone(), tx)
            .await
            .expect_err("the mock refuses the upgrade");
        assert!(err.to_string().contains("probe-pod-x7k2p"), "{err}");
        let missing = exec
            .run(
                &AgentRef {
                    node: "w9".into(),
                    agent: AgentKind::Host,
                },
                plan,
                tokio::sync::mpsc::channel(1).0,
            )
            .await
            .unwrap_err();
        assert!(missing.to_string().contains("w9/host"), "{missing}");
        drop(exec);
        let seen = server.await.unwrap();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].method, "GET", "a WebSocket upgrade");
        assert_eq!(
            seen[0].uri,
            "/api/v1/namespaces/prober-system/pods/probe-pod-x7k2p/exec?&stdin=true&stdout=true&stderr=true&container=probe-pod&command=probe-pod&command=probe&command=--plan&command=-"
        );
    }

    #[test]
    fn owned_objects_are_named_with_their_uid() {
        let o = Owned {
            name: "x".into(),
            uid: Some("u".into()),
        };
        assert_eq!(o.clone(), o);
    }
}

// ---------------------------------------------------------------------------------------------
// RBAC: every request of every mode is allowed by deploy/base, and every grant is used

/// One granted (verb, group, resource, name) in one scope (a namespace, or everywhere).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Grant {
    scope: Option<String>,
    group: String,
    resource: String,
    verb: String,
    /// `None`: any name.
    name: Option<String>,
    /// Where it comes from, for the message.
    from: String,
}

struct Rbac {
    grants: Vec<Grant>,
}

/// What one request asks, as the API server's authoriser sees it.
#[derive(Debug)]
struct Attributes {
    verbs: Vec<&'static str>,
    group: String,
    resource: String,
    namespace: Option<String>,
    name: Option<String>,
}

fn attributes(s: &Seen) -> Attributes {
    let (path, q) = split(&s.uri);
    let seg: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (group, rest) = match seg.as_slice() {
        ["api", _v, rest @ ..] => (String::new(), rest.to_vec()),
        ["apis", g, _v, rest @ ..] => ((*g).to_string(), rest.to_vec()),
        _ => panic!("not an API path: {path}"),
    };
    let (namespace, rest) = match rest.as_slice() {
        ["namespaces", ns, r, tail @ ..] => (Some((*ns).to_string()), {
            let mut v = vec![*r];
            v.extend(tail);
            v
        }),
        other => (None, other.to_vec()),
    };
    let resource = match rest.get(2) {
        Some(sub) => format!("{}/{sub}", rest[0]),
        None => rest[0].to_string(),
    };
    let name = rest.get(1).map(|n| (*n).to_string());
    let verbs = match (s.method.as_str(), name.is_some()) {
        // A WebSocket exec is authorised as get, and from 1.35 also as create.
        ("GET", true) if resource == "pods/exec" => vec!["get", "create"],
        ("GET", true) => vec!["get"],
        ("GET", false) if q.contains_key("watch") => vec!["watch"],
        ("GET", false) => vec!["list"],
        ("POST", _) => vec!["create"],
        ("PUT", true) => vec!["update"],
        ("DELETE", true) => vec!["delete"],
        ("PATCH", _) => vec!["patch"],
        (m, _) => panic!("unexpected method {m} {path}"),
    };
    Attributes {
        verbs,
        group,
        resource,
        namespace,
        name,
    }
}

impl Rbac {
    /// The rules of deploy/base/rbac.yaml bound to the coordinator, and with `optional` those
    /// under deploy/base/optional/ too.
    fn load(optional: bool) -> Self {
        let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/base");
        let mut files = vec![base.join("rbac.yaml")];
        if optional {
            let mut extra: Vec<PathBuf> = std::fs::read_dir(base.join("optional"))
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            extra.sort();
            files.extend(extra);
        }
        let text: Vec<String> = files
            .iter()
            .map(|f| std::fs::read_to_string(f).unwrap())
            .collect();
        Self::of(&text.join("\n---\n"), "prober")
    }

    /// The rules bound to the `ServiceAccount` `subject` in prober-system by the objects of the
    /// multi-document YAML `text`.
    fn of(text: &str, subject: &str) -> Self {
        let docs: Vec<Value> = text
            .split("\n---")
            .map(|d| d.trim_start_matches("---").to_string())
            .filter(|d| {
                d.lines()
                    .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
            })
            .map(|d| serde_saphyr::from_str::<Value>(&d).unwrap())
            .collect();
        let role = |kind: &str, name: &str, ns: Option<&str>| {
            docs.iter()
                .find(|d| {
                    d["kind"] == kind
                        && d["metadata"]["name"] == name
                        && (kind == "ClusterRole" || d["metadata"]["namespace"].as_str() == ns)
                })
                .unwrap_or_else(|| panic!("no {kind} {name} in {ns:?}"))
        };
        let mut grants = Vec::new();
        let names_subject = |b: &Value| {
            b["subjects"].as_array().is_some_and(|subjects| {
                subjects.iter().any(|x| {
                    x["kind"] == "ServiceAccount"
                        && x["name"] == subject
                        && x["namespace"] == "prober-system"
                })
            })
        };
        for b in docs.iter().filter(|d| {
            (d["kind"] == "RoleBinding" || d["kind"] == "ClusterRoleBinding") && names_subject(d)
        }) {
            let scope = b["metadata"]["namespace"].as_str().map(String::from);
            let r = role(
                b["roleRef"]["kind"].as_str().unwrap(),
                b["roleRef"]["name"].as_str().unwrap(),
                scope.as_deref(),
            );
            for (i, rule) in r["rules"].as_array().unwrap().iter().enumerate() {
                let strs = |k: &str| -> Vec<String> {
                    rule[k]
                        .as_array()
                        .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect())
                        .unwrap_or_default()
                };
                let names: Vec<Option<String>> = match strs("resourceNames") {
                    n if n.is_empty() => vec![None],
                    n => n.into_iter().map(Some).collect(),
                };
                for group in strs("apiGroups") {
                    for resource in strs("resources") {
                        for verb in strs("verbs") {
                            for name in &names {
                                grants.push(Grant {
                                    scope: scope.clone(),
                                    group: group.clone(),
                                    resource: resource.clone(),
                                    verb: verb.clone(),
                                    name: name.clone(),
                                    from: format!(
                                        "{} {} rule {i} (bound in {})",
                                        r["kind"].as_str().unwrap(),
                                        r["metadata"]["name"].as_str().unwrap(),
                                        scope.as_deref().unwrap_or("the cluster")
                                    ),
                                });
                            }
                        }
                    }
                }
            }
        }
        Self { grants }
    }

    /// The grants that allow the request: one per verb it needs, or none if any is missing.
    fn allows(&self, s: &Seen) -> Vec<Grant> {
        let a = attributes(s);
        let mut used = Vec::new();
        for verb in &a.verbs {
            let found = self.grants.iter().find(|g| {
                g.verb == *verb
                    && g.group == a.group
                    && g.resource == a.resource
                    && (g.scope.is_none() || g.scope == a.namespace)
                    // resourceNames cannot limit list, watch or create.
                    && (g.name.is_none() || (g.name == a.name && matches!(*verb, "get" | "update" | "delete" | "patch")))
            });
            match found {
                Some(g) => used.push(g.clone()),
                None => return Vec::new(),
            }
        }
        used
    }
}

/// Every request one full run of `prober matrix` in deploy mode makes against `flavour`:
/// discovery, the permanent-install check, apply, wait, one exec, cleanup.
/// The grants that allow the requests `seen`; fails naming every request `rbac` (from `what`)
/// does not allow.
fn grants_used(rbac: &Rbac, seen: &[Seen], what: &str) -> BTreeSet<Grant> {
    let mut used = BTreeSet::new();
    let mut denied = BTreeSet::new();
    for s in seen {
        let grants = rbac.allows(s);
        if grants.is_empty() {
            denied.insert(format!("{} {} ({:?})", s.method, s.uri, attributes(s)));
        }
        used.extend(grants);
    }
    assert!(
        denied.is_empty(),
        "requests {what} does not allow:\n{}",
        denied.into_iter().collect::<Vec<_>>().join("\n")
    );
    used
}

async fn deploy_mode(flavour: &'static str) -> Vec<Seen> {
    use prober::runtime::kube::deploy::{self, Created};
    let spec = agents::run_spec();
    let (client, server) = serve(Box::new(move |s| {
        let (path, _) = split(&s.uri);
        if path.contains("/namespaces/prober-system/")
            || path == "/api/v1/namespaces"
            || path == "/api/v1/namespaces/prober-system"
        {
            if let Some(r) = agents::agents_router(s, "r1") {
                return r;
            }
            return match s.method.as_str() {
                "POST" => created(s),
                "DELETE" => status(200, "Success"),
                "GET" if path.ends_with("/daemonsets") => {
                    respond(200, &list_of("DaemonSetList", Vec::new(), "1"))
                }
                "GET" if path.ends_with("/serviceaccounts") => {
                    respond(200, &list_of("ServiceAccountList", Vec::new(), "1"))
                }
                _ => status(403, "Forbidden"),
            };
        }
        discovery_answer(flavour, s)
    }));
    let raw = read(&client).await.unwrap();
    let inv = build(&raw).unwrap();
    assert!(!deploy::permanent(&client, "prober-system").await.unwrap());
    let mut made = Created::default();
    deploy::apply(&client, &spec, &mut made, &mut |_| {})
        .await
        .unwrap();
    let (ready, _) = deploy::wait(
        &client,
        &spec,
        &agents::nodes(),
        std::time::Duration::from_secs(30),
        &|_, _| {},
    )
    .await
    .unwrap();
    exec_once(&client, ready).await;
    deploy::cleanup(&client, &spec, &made).await.unwrap();
    drop((client, inv));
    server.await.unwrap()
}

async fn exec_once(
    client: &kube::Client,
    ready: BTreeMap<prober::model::AgentRef, prober::runtime::kube::deploy::AgentPod>,
) {
    use prober::runtime::Runtime;
    let agent = ready.keys().next().unwrap().clone();
    let exec = prober::runtime::kube::exec::KubeExec::new(client.clone(), "prober-system", ready);
    let plan = probe_proto::parse_plan(
        r#"{"deadlineMs":1000,"probes":[{"id":"a","kind":"icmp","address":"10.244.2.5"}]}"#,
    )
    .unwrap();
    let _ = exec
        .run(&agent, plan, tokio::sync::mpsc::channel(1).0)
        .await;
}

/// `--use-existing` (or a permanent install found): discovery, the check, wait, exec; nothing
/// created or deleted.
async fn existing_mode(flavour: &'static str) -> Vec<Seen> {
    use prober::runtime::kube::deploy;
    use prober::runtime::kube::manifests::AgentSpec;
    let (client, server) = serve(Box::new(move |s| {
        let (path, _) = split(&s.uri);
        if path.contains("/namespaces/prober-system/") {
            if path.ends_with("/daemonsets") {
                let d = |n: &str, c: &str| json!({"metadata": {"name": n, "labels": {"app.kubernetes.io/name": "prober", "app.kubernetes.io/component": c}}});
                return respond(
                    200,
                    &list_of(
                        "DaemonSetList",
                        vec![d("probe-host", "host-agent"), d("probe-pod", "pod-agent")],
                        "2",
                    ),
                );
            }
            return agents::agents_router(s, "").unwrap_or_else(|| status(403, "Forbidden"));
        }
        discovery_answer(flavour, s)
    }));
    let raw = read(&client).await.unwrap();
    build(&raw).unwrap();
    assert!(deploy::permanent(&client, "prober-system").await.unwrap());
    let spec = AgentSpec::default();
    let (ready, _) = deploy::wait(
        &client,
        &spec,
        &agents::nodes(),
        std::time::Duration::from_secs(30),
        &|_, _| {},
    )
    .await
    .unwrap();
    exec_once(&client, ready).await;
    drop(client);
    let seen = server.await.unwrap();
    assert!(
        seen.iter().all(|s| s.method == "GET"),
        "a run on permanent agents changes nothing"
    );
    seen
}

/// `prober cleanup`.
async fn cleanup_mode() -> Vec<Seen> {
    let (client, server) = serve(Box::new(|s| {
        let (path, _) = split(&s.uri);
        match (s.method.as_str(), path.as_str()) {
            ("GET", "/api/v1/namespaces/prober-system") => respond(
                200,
                &json!({"metadata": {"name": "prober-system", "uid": "u", "labels": {"prober.io/run": "r9"}}}),
            ),
            ("GET", p) if p.ends_with("/daemonsets") => respond(
                200,
                &list_of(
                    "List",
                    vec![json!({"metadata": {"name": "probe-host-r9", "uid": "u1"}})],
                    "1",
                ),
            ),
            ("GET", p) if p.ends_with("/serviceaccounts") => respond(
                200,
                &list_of(
                    "List",
                    vec![json!({"metadata": {"name": "prober-agent-r9", "uid": "u2"}})],
                    "1",
                ),
            ),
            ("DELETE", _) => status(200, "Success"),
            _ => status(404, "NotFound"),
        }
    }));
    let (deleted, _) =
        prober::runtime::kube::deploy::cleanup_leftovers(&client, "prober-system", true)
            .await
            .unwrap();
    assert_eq!(deleted.len(), 3, "{deleted:?}");
    drop(client);
    server.await.unwrap()
}

#[tokio::test]
async fn rbac_allows_every_request_of_every_mode_and_grants_nothing_unused() {
    let rbac = Rbac::load(true);
    let mut seen = Vec::new();
    for flavour in FLAVOURS {
        seen.extend(Box::pin(deploy_mode(flavour)).await);
    }
    // A manifest Calico with Typha in kube-system: its pods are read there.
    seen.extend(typha_in_kube_system().await);
    // Flannel's manifest before its own namespace, and Canal's: their net-conf.json in
    // kube-system.
    seen.extend(flannel_in_kube_system("kube-flannel-cfg").await);
    seen.extend(flannel_in_kube_system("canal-config").await);
    seen.extend(existing_mode("k3s").await);
    seen.extend(cleanup_mode().await);
    let used = grants_used(&rbac, &seen, "deploy/base");
    let unused: Vec<String> = rbac
        .grants
        .iter()
        .filter(|g| !used.contains(*g))
        .map(|g| {
            format!(
                "{} {}/{} {:?} in {:?} ({})",
                g.verb, g.group, g.resource, g.name, g.scope, g.from
            )
        })
        .collect();
    assert!(
        unused.is_empty(),
        "granted but never used:\n{}",
        unused.join("\n")
    );
    // What the review asked for, said directly.
    let has = |verb: &str, resource: &str| {
        rbac.grants
            .iter()
            .any(|g| g.verb == verb && g.resource == resource)
    };
    assert!(has("get", "pods/exec") && has("create", "pods/exec"));
    assert!(
        !rbac
            .grants
            .iter()
            .any(|g| g.scope.is_none() && g.resource == "pods"),
        "no cluster-wide pods"
    );
    assert!(
        !rbac
            .grants
            .iter()
            .any(|g| g.scope.is_none()
                && (g.resource == "daemonsets" || g.resource == "deployments")),
        "workloads per namespace only"
    );
}

/// calico-vxlan with a manifest-installed Typha in kube-system.
async fn typha_in_kube_system() -> Vec<Seen> {
    let mut deploys = fixture_json("calico-vxlan", "deploy-kube-system.json");
    let mut typha = fixture_json("calico-bgp-typha", "deploy-calico-system.json")["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["metadata"]["name"] == "calico-typha")
        .unwrap()
        .clone();
    typha["metadata"]["namespace"] = json!("kube-system");
    deploys["items"].as_array_mut().unwrap().push(typha);
    let mut pods = fixture_json("calico-bgp-typha", "pods-calico-typha.json");
    for p in pods["items"].as_array_mut().unwrap() {
        p["metadata"]["namespace"] = json!("kube-system");
    }
    let (client, server) = serve(Box::new(move |s| {
        let (path, _) = split(&s.uri);
        match path.as_str() {
            "/apis/apps/v1/namespaces/kube-system/deployments" => respond(200, &deploys),
            "/api/v1/namespaces/kube-system/pods" => respond(200, &pods),
            _ => discovery_answer("calico-vxlan", s),
        }
    }));
    let raw = read(&client).await.unwrap();
    let inv = build(&raw).unwrap();
    drop(client);
    let seen = server.await.unwrap();
    assert!(seen.iter().any(|s| s.uri
        == list_uri(
            "/api/v1/namespaces/kube-system/pods",
            Some("k8s-app=calico-typha")
        )));
    let typha_nodes: Vec<&str> = inv
        .nodes
        .iter()
        .filter(|n| n.serves.as_ref().is_some_and(|s| s.contains(&5473)))
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(typha_nodes, ["cp1", "w2"]);
    seen
}

/// The flannel cluster with flannel's `DaemonSet` in kube-system, its configuration in the
/// `ConfigMap` `cm` there (older flannel manifests: kube-flannel-cfg; Canal's: canal-config).
async fn flannel_in_kube_system(cm: &'static str) -> Vec<Seen> {
    let mut ds = fixture_json("flannel", "ds-kube-system.json");
    let mut flannel = fixture_json("flannel", "ds-kube-flannel.json")["items"][0].clone();
    flannel["metadata"]["namespace"] = json!("kube-system");
    for v in flannel["spec"]["template"]["spec"]["volumes"]
        .as_array_mut()
        .unwrap()
    {
        if v["name"] == "flannel-cfg" {
            v["configMap"]["name"] = json!(cm);
        }
    }
    ds["items"].as_array_mut().unwrap().push(flannel);
    let mut config = fixture_json("flannel", "cm-kube-flannel-cfg.json");
    config["metadata"]["namespace"] = json!("kube-system");
    config["metadata"]["name"] = json!(cm);
    let (client, server) = serve(Box::new(move |s| {
        let (path, _) = split(&s.uri);
        match path.as_str() {
            "/apis/apps/v1/namespaces/kube-system/daemonsets" => respond(200, &ds),
            "/apis/apps/v1/namespaces/kube-flannel/daemonsets" => {
                respond(200, &list_of("DaemonSetList", Vec::new(), "1"))
            }
            p if p == format!("/api/v1/namespaces/kube-system/configmaps/{cm}") => {
                respond(200, &config)
            }
            _ => discovery_answer("flannel", s),
        }
    }));
    let raw = read(&client).await.unwrap();
    build(&raw).unwrap();
    drop(client);
    let seen = server.await.unwrap();
    assert!(
        seen.iter()
            .any(|s| s.uri == format!("/api/v1/namespaces/kube-system/configmaps/{cm}")),
        "{:?}",
        seen.iter().map(|s| &s.uri).collect::<Vec<_>>()
    );
    seen
}

// ---------------------------------------------------------------------------------------------
// The scheduled mode's RBAC: every request of `matrix --use-existing --remember` is allowed to
// the CronJob's ServiceAccount by what `prober manifests --scheduled` renders

/// A report with one error finding: a scheduled run that has something to announce.
fn report_with_a_gap() -> prober::report::Report {
    prober::report::Report::from_json(
        &json!({
            "schema": "prober.report/v1", "results": [], "agents": [],
            "findings": [{"kind": "firewall-gap", "severity": "error",
                          "summary": "udp/8472 is blocked between w1 and every other node",
                          "evidence": [], "consequences": [], "protocol": "udp", "port": 8472,
                          "from": ["w1"], "to": ["cp1"], "direction": "both", "where": "network"}],
            "summary": {"total": 0, "ok": 0, "failed": 0, "unknown": 0, "nodes": 2, "agents": 4,
                        "agentsMissing": 0, "durationMillis": 10, "interrupted": false,
                        "byPath": {}, "exitCode": 1}
        })
        .to_string(),
    )
    .unwrap()
}

/// One scheduled run against `flavour`, in the order `prober matrix --use-existing --remember`
/// makes its calls: discovery, the permanent-agents check, recall the remembered report, wait
/// for the agents, exec, then the Events and the remembered report (`first`: none yet, so the
/// replace fails and it is created; else it is replaced).
async fn scheduled_mode(flavour: &'static str, first: bool) -> Vec<Seen> {
    use base64::Engine as _;
    use prober::report::remembered;
    use prober::runtime::kube::deploy;
    use prober::runtime::kube::manifests::AgentSpec;
    const CM: &str = "/api/v1/namespaces/prober-system/configmaps/prober-last-report";
    let remembered_cm = {
        let (gz, _) = remembered::Remembered::of(&report_with_a_gap(), 1)
            .encode(remembered::BUDGET)
            .unwrap();
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "prober-last-report", "namespace": "prober-system"},
               "binaryData": {"report.json.gz": base64::engine::general_purpose::STANDARD.encode(&gz)}})
    };
    let (client, server) = serve(Box::new(move |s| {
        let (path, _) = split(&s.uri);
        match (s.method.as_str(), path.as_str()) {
            ("GET" | "PUT", CM) if first => return status(404, "NotFound"),
            ("GET", CM) => return respond(200, &remembered_cm),
            ("PUT", CM) => return respond(200, &s.body),
            (
                "POST",
                "/api/v1/namespaces/prober-system/configmaps"
                | "/api/v1/namespaces/prober-system/events",
            ) => return respond(201, &s.body),
            _ => {}
        }
        if path.contains("/namespaces/prober-system/") {
            if path.ends_with("/daemonsets") {
                let d = |n: &str, c: &str| json!({"metadata": {"name": n, "labels": {"app.kubernetes.io/name": "prober", "app.kubernetes.io/component": c}}});
                return respond(
                    200,
                    &list_of(
                        "DaemonSetList",
                        vec![d("probe-host", "host-agent"), d("probe-pod", "pod-agent")],
                        "2",
                    ),
                );
            }
            return agents::agents_router(s, "").unwrap_or_else(|| status(403, "Forbidden"));
        }
        discovery_answer(flavour, s)
    }));
    let raw = read(&client).await.unwrap();
    build(&raw).unwrap();
    assert!(deploy::permanent(&client, "prober-system").await.unwrap());
    let previous = remembered::recall(&client, "prober-system").await.unwrap();
    assert_eq!(previous.is_none(), first);
    let spec = AgentSpec::default();
    let (ready, _) = deploy::wait(
        &client,
        &spec,
        &agents::nodes(),
        std::time::Duration::from_secs(30),
        &|_, _| {},
    )
    .await
    .unwrap();
    exec_once(&client, ready).await;
    // First run: the gap is new (an Event); next run: it is resolved (an Event).
    let report = if first {
        report_with_a_gap()
    } else {
        let mut r = report_with_a_gap();
        r.findings.clear();
        r
    };
    let changes = remembered::remember(&client, "prober-system", previous.as_ref(), &report, 2)
        .await
        .unwrap();
    assert_eq!(changes.events, 1);
    drop(client);
    server.await.unwrap()
}

#[tokio::test]
async fn scheduled_rbac_allows_every_request_of_a_scheduled_run() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_prober"))
        .args(["manifests", "--scheduled"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut rendered = String::from_utf8(out.stdout).unwrap();
    // With the optional bindings for the namespaces some clusters have (they name the
    // scheduled ServiceAccount too).
    let optional = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/base/optional");
    let mut extra: Vec<PathBuf> = std::fs::read_dir(optional)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    extra.sort();
    for f in extra {
        rendered.push_str("\n---\n");
        rendered.push_str(&std::fs::read_to_string(f).unwrap());
    }
    let rbac = Rbac::of(&rendered, "prober-scheduled");
    let mut seen = Vec::new();
    for flavour in FLAVOURS {
        seen.extend(scheduled_mode(flavour, true).await);
    }
    seen.extend(scheduled_mode("flannel", false).await);
    seen.extend(typha_in_kube_system().await);
    let used = grants_used(&rbac, &seen, "deploy/scheduled");
    // The scheduled Role is its own: every grant in it is used. (The base's read-only roles it
    // is bound to are checked for use by the test above.)
    let unused: Vec<String> = rbac
        .grants
        .iter()
        .filter(|g| g.from.contains("prober-scheduled") && !used.contains(*g))
        .map(|g| {
            format!(
                "{} {}/{} {:?} ({})",
                g.verb, g.group, g.resource, g.name, g.from
            )
        })
        .collect();
    assert!(
        unused.is_empty(),
        "granted but never used:\n{}",
        unused.join("\n")
    );
    // It never creates, changes or deletes an agent.
    assert!(
        !rbac.grants.iter().any(|g| matches!(
            g.resource.as_str(),
            "daemonsets" | "serviceaccounts" | "namespaces"
        ) && g.verb != "list"),
        "the scheduled run changes no agent"
    );
}

// ---------------------------------------------------------------------------------------------
// A healthy cluster of each distribution: the matrix planned from what discovery found, every
// probe answered, and the diagnosis finds nothing

/// `inv` with agents on every node: the host agent at the node's address, the pod agent inside
/// the node's pod range (beside the node on EKS, where pods take addresses of its subnet).
fn with_agents(mut inv: Inventory) -> Inventory {
    use prober::inventory::Agent;
    use std::net::Ipv4Addr;
    for n in &mut inv.nodes {
        let agent = |address: Ipv4Addr| Agent {
            exec: vec!["true".into()],
            address,
            port: 9917,
        };
        let pod = n.pod_cidr.map_or_else(
            || Ipv4Addr::from(u32::from(n.address) + 100),
            |c| Ipv4Addr::from(u32::from(c.addr) + 10),
        );
        n.agents.host = Some(agent(n.address));
        n.agents.pod = Some(agent(pod));
    }
    inv
}

/// The findings of a run over `inv` in which every planned probe succeeded.
fn healthy_findings(inv: &Inventory) -> Vec<prober::diagnose::Finding> {
    use probe_proto::{Outcome, ProbeResult};
    use prober::model::{AgentKind, AgentStatus, ResultRecord};
    let planned = prober::plan::plan(inv, &prober::plan::Filter::default());
    assert!(!planned.is_empty());
    let results: Vec<ResultRecord> = planned
        .iter()
        .map(|p| {
            let mut result = ProbeResult::new(p.id.to_string(), Outcome::Ok, "ok");
            result.rtt_micros = Some(300);
            p.record(None, result)
        })
        .collect();
    let agents: Vec<AgentStatus> = inv
        .nodes
        .iter()
        .flat_map(|n| {
            [AgentKind::Host, AgentKind::Pod].map(|agent| AgentStatus {
                node: n.name.clone(),
                agent,
                ran: true,
                detail: String::new(),
            })
        })
        .collect();
    prober::diagnose::diagnose(inv, &prober::model::Results::of(&results), &agents)
}

#[tokio::test]
async fn a_healthy_cluster_of_each_distribution_gives_no_finding() {
    use prober::model::PathClass;
    for flavour in FLAVOURS {
        let inv = with_agents(discover(flavour).await);
        let findings = healthy_findings(&inv);
        // Expected and informational: the latent bootstrap cycle of a CNI agent that reaches
        // the API server through the kubernetes Service (a warning about the design, true of
        // a healthy cluster) — never naming kube-proxy, which uses its own kubeconfig.
        let latent = |f: &&prober::diagnose::Finding| {
            f.kind == prober::diagnose::Kind::BootstrapCycle
                && f.severity == prober::diagnose::Severity::Warning
                && f.summary.starts_with("latent bootstrap cycle")
                && !f.summary.contains("kube-proxy")
        };
        let unexpected: Vec<String> = findings
            .iter()
            .filter(|f| !latent(f))
            .map(|f| format!("{:?} {:?}: {}", f.kind, f.severity, f.summary))
            .collect();
        assert!(
            unexpected.is_empty(),
            "{flavour}: a healthy cluster gave findings:\n{}",
            unexpected.join("\n")
        );
        // Where the overlay has a crafted probe, every node's tunnel was probed.
        if inv
            .cluster
            .overlay
            .as_ref()
            .is_some_and(|o| o.mode() != prober::inventory::OverlayMode::None)
        {
            let planned = prober::plan::plan(&inv, &prober::plan::Filter::default());
            for n in &inv.nodes {
                assert!(
                    planned.iter().any(|p| p.path == PathClass::Overlay
                        && p.to.node.as_deref() == Some(n.name.as_str())
                        && p.to.service.as_deref() == Some("vtep")),
                    "{flavour}: the overlay to {} is not probed",
                    n.name
                );
            }
        }
    }
}

#[tokio::test]
async fn an_overlay_without_tunnel_endpoints_is_said_not_probed() {
    use prober::diagnose::{Kind, Severity};
    // Cilium VXLAN whose CiliumNodes list no CiliumInternalIP and whose nodes carry no
    // cilium-host annotation: nothing to aim the crafted packets at.
    let mut inv = with_agents(discover("cilium-vxlan").await);
    for n in &mut inv.nodes {
        n.vtep = None;
    }
    let findings = healthy_findings(&inv);
    let f = findings
        .iter()
        .find(|f| f.kind == Kind::Overlay)
        .unwrap_or_else(|| panic!("no overlay notice in {findings:#?}"));
    assert_eq!(f.severity, Severity::Warning);
    assert!(
        f.summary
            .starts_with("overlay not probed on cp1, w1, w2: no tunnel endpoint known"),
        "{}",
        f.summary
    );
    assert_eq!(f.nodes, ["cp1", "w1", "w2"]);
}

#[tokio::test]
async fn cilium_tunnel_endpoints_come_from_the_node_annotation_too() {
    // No CiliumNode address: the annotation the agent writes on the Node.
    let (client, server) = serve(Box::new(|s| {
        let (path, _) = split(&s.uri);
        match path.as_str() {
            "/apis/cilium.io/v2/ciliumnodes" => {
                let mut cn = fixture_json("cilium-vxlan", "ciliumnodes.json");
                for i in cn["items"].as_array_mut().unwrap() {
                    i["spec"]["addresses"] = json!([]);
                }
                respond(200, &cn)
            }
            "/api/v1/nodes" => {
                let mut nodes = fixture_json("cilium-vxlan", "nodes.json");
                for (i, n) in nodes["items"]
                    .as_array_mut()
                    .unwrap()
                    .iter_mut()
                    .enumerate()
                {
                    n["metadata"]["annotations"]["network.cilium.io/ipv4-cilium-host"] =
                        json!(format!("10.0.{i}.99"));
                }
                respond(200, &nodes)
            }
            _ => discovery_answer("cilium-vxlan", s),
        }
    }));
    let raw = read(&client).await.unwrap();
    let inv = build(&raw).unwrap();
    drop(client);
    server.await.unwrap();
    let vteps: Vec<String> = inv
        .nodes
        .iter()
        .map(|n| n.vtep.as_ref().unwrap().address.to_string())
        .collect();
    assert_eq!(vteps, ["10.0.0.99", "10.0.1.99", "10.0.2.99"]);
}

#[tokio::test]
async fn a_calico_node_keeps_every_ipam_block() {
    // w1 owns a second block: a DNS pod in it is still placed on w1.
    let (client, server) = serve(Box::new(|s| {
        let (path, _) = split(&s.uri);
        if path == "/apis/crd.projectcalico.org/v1/blockaffinities" {
            let mut b = fixture_json("calico-vxlan", "blockaffinities.json");
            let items = b["items"].as_array_mut().unwrap();
            let mut second = items
                .iter()
                .find(|i| i["spec"]["node"] == "w1")
                .unwrap()
                .clone();
            second["metadata"]["name"] = json!("w1-10-244-77-0-26");
            second["spec"]["cidr"] = json!("10.244.77.0/26");
            items.push(second);
            return respond(200, &b);
        }
        discovery_answer("calico-vxlan", s)
    }));
    let raw = read(&client).await.unwrap();
    let inv = build(&raw).unwrap();
    drop(client);
    server.await.unwrap();
    let w1 = inv.nodes.iter().find(|n| n.name == "w1").unwrap();
    let ranges: Vec<String> = w1.pod_ranges().map(|c| c.to_string()).collect();
    assert_eq!(ranges, ["10.244.33.192/26", "10.244.77.0/26"]);
    assert!(w1.holds_pod_ip("10.244.77.5".parse().unwrap()));
    // It round-trips through the inventory file.
    let back: Inventory = serde_saphyr::from_str(&inv.to_yaml()).unwrap();
    assert_eq!(back, inv);
    let cp1 = inv.nodes.iter().find(|n| n.name == "cp1").unwrap();
    assert!(cp1.pod_cidrs.is_empty(), "one block: podCIDR alone");
}

/// An HTTP/1 request's head (up to its blank line), byte by byte so nothing after it is taken.
async fn read_head(s: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte).await.unwrap();
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap()
}

/// A CONNECT proxy on loopback for one tunnel: answers `answer` to the CONNECT, then (on 200)
/// relays; returns the CONNECT line it was asked.
async fn proxy_once(listener: tokio::net::TcpListener, answer: &'static str) -> String {
    use tokio::io::AsyncWriteExt;
    let (mut down, _) = listener.accept().await.unwrap();
    let head = read_head(&mut down).await;
    let line = head.lines().next().unwrap_or_default().to_string();
    down.write_all(answer.as_bytes()).await.unwrap();
    if answer.starts_with("HTTP/1.1 200") {
        let target = line.split_whitespace().nth(1).unwrap().to_string();
        let mut up = tokio::net::TcpStream::connect(target).await.unwrap();
        let _ = tokio::io::copy_bidirectional(&mut down, &mut up).await;
    }
    line
}

/// A plain HTTP API server on loopback answering one request with `body`.
async fn api_once(listener: tokio::net::TcpListener, body: &'static str) {
    use tokio::io::AsyncWriteExt;
    let (mut s, _) = listener.accept().await.unwrap();
    read_head(&mut s).await;
    let reply = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(reply.as_bytes()).await.unwrap();
}

#[tokio::test]
async fn https_proxy_is_used_for_real_and_a_refusing_proxy_is_said() {
    use kube::config::Config;
    let bind = || tokio::net::TcpListener::bind("127.0.0.1:0");
    let (api, proxy) = (bind().await.unwrap(), bind().await.unwrap());
    let (api_at, proxy_at) = (api.local_addr().unwrap(), proxy.local_addr().unwrap());
    let server = tokio::spawn(api_once(api, r#"{"major":"1","minor":"33"}"#));
    let relay = tokio::spawn(proxy_once(
        proxy,
        "HTTP/1.1 200 Connection established\r\n\r\n",
    ));
    let client = |proxy: std::net::SocketAddr| {
        let mut config = Config::new(format!("http://{api_at}").parse().unwrap());
        config.proxy_url = Some(format!("http://{proxy}").parse().unwrap());
        prober::runtime::kube::configure(&mut config);
        // kube's `http-proxy` feature off: ProxyProtocolDisabled here, for every command.
        kube::Client::try_from(config).unwrap()
    };
    let get = || http::Request::get("/version").body(Vec::new()).unwrap();
    let text = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        client(proxy_at).request_text(get()),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(text.contains("\"minor\":\"33\""), "{text}");
    assert_eq!(relay.await.unwrap(), format!("CONNECT {api_at} HTTP/1.1"));
    server.await.unwrap();
    // A proxy that refuses the tunnel: an error, within the deadline, not a hang.
    let refusing = bind().await.unwrap();
    let refusing_at = refusing.local_addr().unwrap();
    let relay = tokio::spawn(proxy_once(refusing, "HTTP/1.1 403 Forbidden\r\n\r\n"));
    let err = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        client(refusing_at).request_text(get()),
    )
    .await
    .unwrap()
    .unwrap_err();
    relay.await.unwrap();
    let words = prober::runtime::kube::words::words(&err);
    assert!(
        words.contains("not reached: the proxy") && words.contains("NO_PROXY"),
        "{words}"
    );
}
