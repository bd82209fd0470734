//! What discovery finds on each distribution: the inventory `prober discover -o yaml` prints,
//! compared field by field with a golden file per flavour under `tests/fixtures/discover/`
//! (`PROBER_BLESS=1` rewrites them from the output; review the diff). Each test's comment says
//! what its golden file shows and why.

// The comments name the distributions' objects and fields (net-conf.json, CiliumNodes,
// KUBERNETES_SERVICE_HOST) as their docs do, in prose.
#![allow(clippy::doc_markdown)]

use std::path::PathBuf;

use crate::discover::discover;

/// The golden file of `flavour`.
fn golden_path(flavour: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/discover")
        .join(format!("{flavour}.yaml"))
}

/// Discovers the fixture cluster of `flavour` (checking every request it makes) and compares the
/// inventory with its golden file.
async fn golden(flavour: &'static str) {
    let inv = discover(flavour).await;
    if let Err(e) = test_kit::golden::check(&golden_path(flavour), &inv.to_yaml()) {
        panic!("{flavour}: {e}");
    }
}

/// kubeadm and flannel: net-conf.json's vxlan with flannel's defaults (8472, VNI 1, MTU 1450);
/// flannel reaches the API through the Service; every node serves no CNI port (`serves: []`);
/// CoreDNS on the nodes its endpoints run on, with its Corefile; kubeadm's node files.
#[tokio::test]
async fn kubeadm_flannel() {
    golden("flannel").await;
}

/// An older fixture: calico-node in kube-system, but no calico-config nor CRDs (all 404): no
/// IPPool says so, nothing is assumed; calico-node sets `KUBERNETES_SERVICE_HOST` (direct API
/// access); its own default backend is bird (BGP).
#[tokio::test]
async fn kubeadm_calico_without_its_crds() {
    golden("calico").await;
}

/// k3s: flannel runs inside k3s (no DaemonSet), its facts read from the nodes' annotations; the
/// Service range 10.43.0.0/16 from the ServiceCIDR object; k3s's own node file paths.
#[tokio::test]
async fn k3s_embedded_flannel() {
    golden("k3s").await;
}

/// RKE2 with canal: rke2-canal-config's flannel backend; RKE2's CoreDNS Service and Corefile;
/// the ingress controller and other workloads get their own roles, not "cni".
#[tokio::test]
async fn rke2_canal() {
    golden("rke2-canal").await;
}

/// EKS and the VPC CNI: no overlay and no per-node range; the pod range 10.0.0.0/22 from the
/// pods' addresses (the DNS endpoints) and the node subnets they share, never 0.0.0.0/0;
/// kube-proxy uses its own kubeconfig, so no bootstrap cycle through the Service.
#[tokio::test]
async fn eks_vpc_cni() {
    golden("eks").await;
}

/// GKE Dataplane V2 (Cilium): routes natively, no overlay; the Service range 10.56.0.0/16, not a
/// /12 over the pods; kube-dns, not CoreDNS, so no Corefile.
#[tokio::test]
async fn gke_dataplane_v2() {
    golden("gke-dpv2").await;
}

/// Cilium, VXLAN, cluster-pool IPAM: the VNI is the identity (no constant); the pod ranges from
/// the CiliumNodes, not the (unused) kubeadm spec.podCIDR; the tunnel endpoints are the
/// CiliumNodes' CiliumInternalIPs (no MAC: a flow-based device); the L7 proxy is not the CNI;
/// cilium-health's port is served. Its policy: the Cilium docs' CiliumClusterwideNetworkPolicy
/// example.
#[tokio::test]
async fn cilium_vxlan_cluster_pool() {
    golden("cilium-vxlan").await;
}

/// Cilium with Geneve and without kube-proxy: its agent sets `KUBERNETES_SERVICE_HOST`; init
/// containers that never call the API do not count.
#[tokio::test]
async fn cilium_geneve_without_kube_proxy() {
    golden("cilium-geneve").await;
}

/// Cilium, native routing: routing-mode native, whatever tunnel-protocol says; the CiliumNodes
/// (not requested: ipam kubernetes) agree with spec.podCIDR.
#[tokio::test]
async fn cilium_native_routing() {
    golden("cilium-native").await;
}

/// Calico IP-in-IP with BGP: IP protocol 4, no port; the tunnel addresses calico-node annotates
/// (no MAC); BGP everywhere, Typha nowhere.
#[tokio::test]
async fn calico_ipip_with_bgp() {
    golden("calico-ipip").await;
}

/// Calico VXLAN without BGP: calico_backend vxlan means no BIRD, whatever BGPConfiguration says
/// (no 179, no 5473). Its policies, as `cluster.policies` (kind, name, namespace, labels and
/// spec only): the Kubernetes docs' default-deny-all stamped into the agents' namespace, the
/// network-policy-api docs' AdminNetworkPolicy example and the Calico docs' global default deny
/// (as its CRD stores it).
#[tokio::test]
async fn calico_vxlan_without_bgp() {
    golden("calico-vxlan").await;
}

/// Calico by the tigera-operator, BGP and Typha on some nodes: Typha only where its pods run;
/// the operator's Installation, not a ConfigMap.
#[tokio::test]
async fn calico_operator_bgp_and_typha_on_some_nodes() {
    golden("calico-bgp-typha").await;
}

/// A field discovery gets wrong fails the comparison and is named by its path.
#[tokio::test]
async fn a_changed_field_fails_the_golden_comparison_naming_it() {
    let mut inv = discover("flannel").await;
    inv.nodes[1].address = "192.168.56.99".parse().unwrap();
    // `compare`, never `check`: under PROBER_BLESS=1 this must not write the changed field.
    let err = test_kit::golden::compare(&golden_path("flannel"), &inv.to_yaml()).unwrap_err();
    assert!(
        err.contains("nodes[1].address: want \"192.168.56.11\", got \"192.168.56.99\""),
        "{err}"
    );
    assert!(err.contains("1 field(s)"), "{err}");
}

/// The policies discovery read from the upstream projects' own examples are ones diagnosis can
/// evaluate: none is left as "not evaluated", and those that select the pod agents are the
/// namespace default-deny and Calico's global deny, not the ANP of another namespace.
#[tokio::test]
async fn the_policies_read_are_evaluated_for_the_pod_agents() {
    use prober::diagnose::policy::{Agents, Policies};
    let inv = discover("calico-vxlan").await;
    assert_eq!(inv.cluster.policies.len(), 3);
    let p = Policies::new(&inv.cluster.policies, Agents::deployed());
    assert!(p.notes.is_empty(), "{:?}", p.notes);
    let mut selecting: Vec<String> = p
        .selecting()
        .into_iter()
        .map(|(r, _)| format!("{}/{}", r.kind, r.name))
        .collect();
    selecting.sort();
    assert_eq!(
        selecting,
        [
            "GlobalNetworkPolicy/default.default-deny",
            "NetworkPolicy/default-deny-all"
        ]
    );
    let inv = discover("cilium-vxlan").await;
    let p = Policies::new(&inv.cluster.policies, Agents::deployed());
    assert!(p.notes.is_empty(), "{:?}", p.notes);
    assert!(p.selecting().is_empty(), "it selects name=leia only");
}

/// kubeadm and flannel, dual-stack with IPv4 first: each node's InternalIP of each family
/// (one node lists its IPv6 one first), both pod ranges (`podCIDRs`), flannel's IPv6 VTEP
/// (`flannel-v6.1`, from `backend-v6-data`); the `kubernetes` Service single-stack IPv4 as
/// Kubernetes makes it, its API server also on its node's IPv6 address; kube-dns dual-stack
/// (`services`), its pods from the IPv4 and the IPv6 EndpointSlice; net-conf.json's
/// `IPv6Network` as the second pod range.
#[tokio::test]
async fn kubeadm_flannel_dual_stack() {
    golden("flannel-dualstack").await;
}

/// kubeadm and flannel, IPv6-only: no IPv4 `address` anywhere; the primary family IPv6
/// (podCIDR, serviceCIDR /112 around the ClusterIP, the DNS Service), the API endpoints from
/// the IPv6 EndpointSlice; flannel's IPv6 VTEP only.
#[tokio::test]
async fn kubeadm_flannel_ipv6_only() {
    golden("flannel-ipv6").await;
}
