//! What discovery finds on each distribution.

use crate::common::mock::fixture_json;
use crate::discover::*;
use prober::inventory::{ApiAccess, Cni, Inventory};

pub(crate) type NodeRow<'a> = (
    &'a str,
    &'a str,
    Option<&'a str>,
    Option<(&'a str, &'a str)>,
);

/// (name, address, pod CIDR, VTEP (address, MAC)) of every node, in order.
/// A node as the tests compare it.
pub(crate) type Row = (String, String, Option<String>, Option<(String, String)>);

pub(crate) fn nodes(inv: &Inventory) -> Vec<Row> {
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

pub(crate) fn expect_nodes(inv: &Inventory, want: &[NodeRow<'_>]) {
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

pub(crate) fn overlay(inv: &Inventory) -> Option<(String, u16, u32, Option<u16>)> {
    inv.cluster
        .overlay
        .as_ref()
        .map(|o| (o.mode.clone(), o.port, o.vni, o.mtu))
}

pub(crate) fn addrs(v: &[std::net::SocketAddr]) -> Vec<String> {
    v.iter().map(ToString::to_string).collect()
}

pub(crate) fn serves(inv: &Inventory) -> Vec<(String, Option<Vec<u16>>)> {
    inv.nodes
        .iter()
        .map(|n| (n.name.clone(), n.serves.clone()))
        .collect()
}

pub(crate) fn component<'a>(inv: &'a Inventory, name: &str) -> &'a prober::inventory::Component {
    inv.components
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no component {name}"))
}

pub(crate) fn files(inv: &Inventory) -> (String, String, String, Option<String>) {
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
