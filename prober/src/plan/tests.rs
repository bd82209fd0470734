//! The matrix's sizes, ids and filters for synthetic inventories.

use super::*;
use crate::testutil::inventory;
use probe_proto::VxlanProbe;

fn count(probes: &[PlannedProbe], path: PathClass) -> usize {
    probes.iter().filter(|p| p.path == path).count()
}

#[test]
fn matrix_sizes_by_path_class() {
    // (nodes, control planes, cni) -> expected counts per class
    let table: &[(usize, usize, &str, [usize; 10])] = &[
        // pod-pod, node-pod, pod-node, node-node, pod-svc, node-svc, pod-api, node-api, overlay, dns
        (3, 1, "flannel", [9, 9, 9, 2 + 6, 3, 3, 3, 3, 12 + 6, 12]),
        (1, 1, "flannel", [1, 1, 1, 0, 1, 1, 1, 1, 0, 4]),
        // 3 control planes: 6443 to 3 cps from 4 others each (minus self): 12; 10250: 20;
        // etcd 2379/2380 between cps: 3*2*2 = 12.
        (
            5,
            3,
            "flannel",
            [25, 25, 25, 12 + 20 + 12, 5, 5, 15, 15, 40 + 20, 20],
        ),
        // calico adds 179 and 5473 between every ordered pair.
        (
            3,
            1,
            "calico",
            [9, 9, 9, 2 + 6 + 12, 3, 3, 3, 3, 12 + 6, 12],
        ),
    ];
    for (nodes, cps, cni, want) in table {
        let probes = plan(&inventory(*nodes, *cps, cni), &Filter::default()).to_vec();
        let got: Vec<usize> = PathClass::ALL[..10]
            .iter()
            .map(|p| count(&probes, *p))
            .collect();
        assert_eq!(
            count(&probes, PathClass::NodeConfig),
            0,
            "no host roots in this inventory"
        );
        assert_eq!(got, want, "{nodes} nodes, {cps} control planes, {cni}");
    }
}

#[test]
fn ids_are_unique_and_readable() {
    let probes = plan(&inventory(4, 1, "flannel"), &Filter::default()).to_vec();
    let mut ids: Vec<&str> = probes.iter().map(|p| p.id.as_str()).collect();
    assert!(
        ids.contains(&"pod-to-pod:n1/pod->n3/pod:tcp/9917"),
        "{ids:?}"
    );
    assert!(ids.contains(&"overlay:n2/host->n4/host:vxlan/8472"));
    assert!(ids.contains(&"node-to-node:n2/host->n1/host:tcp/6443"));
    assert!(ids.contains(&"dns:n2/pod->svc/kube-dns:tcp/53/kubernetes.default.svc.cluster.local"));
    assert!(ids.contains(&"pod-to-apiserver:n3/pod->n1/apiserver:tls/6443"));
    let n = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), n, "unique ids");
}

#[test]
fn filters() {
    let inv = inventory(3, 1, "flannel");
    let only = plan(
        &inv,
        &Filter {
            paths: vec![PathClass::Overlay, PathClass::Dns],
            ..Filter::default()
        },
    );
    assert!(
        only.iter()
            .all(|p| matches!(p.path, PathClass::Overlay | PathClass::Dns))
    );
    let skip = plan(
        &inv,
        &Filter {
            skip_paths: vec![PathClass::PodToPod],
            ..Filter::default()
        },
    )
    .to_vec();
    assert_eq!(count(&skip, PathClass::PodToPod), 0);
    assert_eq!(count(&skip, PathClass::NodeToPod), 9);
    let n3 = plan(
        &inv,
        &Filter {
            nodes: vec!["n3".into()],
            ..Filter::default()
        },
    )
    .to_vec();
    assert_eq!(
        count(&n3, PathClass::PodToPod),
        5,
        "n3->n1,n2,n3 and n1,n2->n3"
    );
    assert!(
        n3.iter()
            .all(|p| p.from.node == "n3" || p.to.node.as_deref() == Some("n3"))
    );
}

#[test]
fn vxlan_probes_carry_the_peer_vtep() {
    let probes = plan(&inventory(2, 1, "flannel"), &Filter::default()).to_vec();
    let vx = probes
        .iter()
        .find(|p| p.id == "overlay:n1/host->n2/host:vxlan/8472")
        .unwrap();
    match &vx.probe {
        Probe::Vxlan(VxlanProbe {
            address,
            inner_source,
            inner_destination,
            destination_mac,
            ..
        }) => {
            assert_eq!(address.to_string(), "192.168.56.11");
            assert_eq!(inner_source.unwrap().to_string(), "10.244.1.0");
            assert_eq!(inner_destination.unwrap().to_string(), "10.244.2.0");
            assert_eq!(destination_mac.unwrap().to_string(), "02:00:0a:f4:02:00");
        }
        p => panic!("{p:?}"),
    }
}

#[test]
fn twenty_nodes_is_about_four_hundred_pod_pairs() {
    let probes = plan(&inventory(20, 3, "flannel"), &Filter::default()).to_vec();
    assert_eq!(count(&probes, PathClass::PodToPod), 400);
    assert!(probes.len() < 4000, "{}", probes.len());
    let agents: std::collections::BTreeSet<&AgentRef> = probes.iter().map(|p| &p.from).collect();
    assert_eq!(agents.len(), 40);
}

#[test]
fn cni_ports_go_only_to_the_nodes_that_serve_them() {
    let ports_to = |probes: &[PlannedProbe], port: u16| -> Vec<String> {
        let mut v: Vec<String> = probes
            .iter()
            .filter(|p| p.path == PathClass::NodeToNode && p.to.port == Some(port))
            .map(|p| format!("{}->{}", p.from.node, p.to.node.as_deref().unwrap_or("")))
            .collect();
        v.sort();
        v
    };
    // Without `serves`, every node is assumed to serve its CNI's ports (as before).
    let mut inv = inventory(3, 1, "calico");
    let all = plan(&inv, &Filter::default()).to_vec();
    assert_eq!(ports_to(&all, 5473).len(), 6);
    assert_eq!(ports_to(&all, 179).len(), 6);
    // Typha on n2 only, BGP off (VXLAN mode): Typha probed toward n2 alone, no BGP at all.
    for n in &mut inv.nodes {
        n.serves = Some(if n.name == "n2" {
            crate::testutil::ports(&[5473])
        } else {
            Vec::new()
        });
    }
    let probes = plan(&inv, &Filter::default()).to_vec();
    assert_eq!(ports_to(&probes, 5473), ["n1->n2", "n3->n2"]);
    assert!(ports_to(&probes, 179).is_empty());
    // A BGP full mesh on every node: 179 between every pair.
    for n in &mut inv.nodes {
        n.serves = Some(crate::testutil::ports(&[179]));
    }
    inv.cluster.bgp = Some(crate::inventory::Bgp {
        mesh: true,
        as_number: Some(64512),
    });
    let probes = plan(&inv, &Filter::default()).to_vec();
    assert_eq!(ports_to(&probes, 179).len(), 6);
    assert!(ports_to(&probes, 5473).is_empty());
    // The same speakers without a mesh: their peers are not known, so 179 is not probed.
    inv.cluster.bgp = Some(crate::inventory::Bgp {
        mesh: false,
        as_number: None,
    });
    assert!(ports_to(&plan(&inv, &Filter::default()).to_vec(), 179).is_empty());
}

mod mtu_default;

/// A dual-stack cluster gets every TCP, TLS and DNS path class in both families: the IPv4
/// cells exactly as an IPv4-only cluster's (same ids, same order), then the IPv6 ones, whose
/// ids end in `/ipv6`: the pods' MTU probes too (`ICMPv6`); the VTEP echo and the crafted
/// datagram only where a node has an IPv6 tunnel endpoint (`vtep6`), which this one has not: its
/// IPv4 underlay carries the overlay's IPv6 too.
#[test]
fn a_dual_stack_cluster_is_planned_in_both_families() {
    use crate::testutil::dual_stack;
    let v4 = plan(&inventory(3, 1, "flannel"), &Filter::default()).to_vec();
    let dual = plan(&dual_stack(3, 1, "flannel"), &Filter::default()).to_vec();
    let v4_of_dual: Vec<&PlannedProbe> = dual.iter().filter(|p| p.to.address.is_ipv4()).collect();
    assert_eq!(v4_of_dual, v4.iter().collect::<Vec<_>>());
    let six: Vec<&PlannedProbe> = dual.iter().filter(|p| p.to.address.is_ipv6()).collect();
    assert!(six.iter().all(|p| p.id.ends_with("/ipv6")), "{six:#?}");
    let per_class = |path| six.iter().filter(|p| p.path == path).count();
    // pod-pod, node-pod, pod-node, node-node, pod-svc, node-svc, pod-api, node-api, overlay, dns
    let want = [9, 9, 9, 2 + 6, 3, 3, 3, 3, 6, 12];
    let got: Vec<usize> = PathClass::ALL[..10].iter().map(|p| per_class(*p)).collect();
    assert_eq!(got, want);
    let ids: Vec<&str> = six.iter().map(|p| p.id.as_str()).collect();
    for id in [
        "pod-to-pod:n1/pod->n3/pod:tcp/9917/ipv6",
        "node-to-pod:n2/host->n1/pod:tcp/9917/ipv6",
        "pod-to-node:n2/pod->n1/host:tcp/9917/ipv6",
        "node-to-node:n2/host->n1/host:tcp/10250/ipv6",
        "pod-to-service:n2/pod->svc/kubernetes:tls/443/ipv6",
        "pod-to-apiserver:n3/pod->n1/apiserver:tls/6443/ipv6",
        "dns:n2/pod->svc/kube-dns:udp/53/kubernetes.default.svc.cluster.local/ipv6",
        "overlay:n1/pod->n3/pod:mtu/1450/ipv6",
    ] {
        assert!(ids.contains(&id), "{id} not in {ids:#?}");
    }
    let p = six
        .iter()
        .find(|p| p.id == "pod-to-pod:n1/pod->n3/pod:tcp/9917/ipv6")
        .unwrap();
    assert_eq!(p.to.address.to_string(), "fd00:10:244:3::2");
    assert!(matches!(&p.probe, Probe::Tcp(t) if t.address == p.to.address));
    // A TCP probe to a node's IPv6 address is witnessed by its host agent, as over IPv4.
    let n2n = six
        .iter()
        .find(|p| p.path == PathClass::NodeToNode)
        .unwrap();
    assert!(n2n.receipt_port.is_some());
    let mut all: Vec<&str> = dual.iter().map(|p| p.id.as_str()).collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), dual.len(), "ids are unique");
}

/// An IPv6-only cluster gets the same path classes over IPv6 and no IPv4 probe: its overlay over
/// the IPv6 underlay, `ICMPv6` echo to each `vtep6` and the crafted VXLAN datagram to each
/// node's `address6`, and `ICMPv6` MTU probes between pods.
#[test]
fn an_ipv6_only_cluster_is_planned_over_ipv6() {
    let probes = plan(
        &crate::testutil::ipv6_only(3, 1, "flannel"),
        &Filter::default(),
    )
    .to_vec();
    assert!(probes.iter().all(|p| p.to.address.is_ipv6()), "{probes:#?}");
    let got: Vec<usize> = PathClass::ALL[..10]
        .iter()
        .map(|p| count(&probes, *p))
        .collect();
    // Overlay: 6 VTEP echoes, 6 crafted VXLAN datagrams, 6 MTU probes.
    assert_eq!(got, [9, 9, 9, 2 + 6, 3, 3, 3, 3, 18, 12]);
    let by_id = |id: &str| probes.iter().find(|p| p.id == id);
    let vtep = by_id("overlay:n1/host->n2/vtep:icmp/ipv6").unwrap();
    assert!(
        matches!(&vtep.probe, Probe::Vtep(i) if i.address.to_string() == "fd00:10:244:2::"),
        "{vtep:?}"
    );
    let vx = by_id("overlay:n1/host->n2/host:vxlan/8472/ipv6").unwrap();
    assert_eq!(vx.to.address.to_string(), "fd00:56::b");
    assert!(vx.receipt_port.is_some(), "the peer's sniffer confirms it");
    assert!(
        matches!(&vx.probe, Probe::Vxlan(v) if v.address == vx.to.address
            && v.destination_mac.is_some_and(|m| m.to_string() == "02:00:0a:f4:02:00")
            && v.inner_destination.is_none()),
        "{vx:?}"
    );
    let mtu = by_id("overlay:n3/pod->n1/pod:mtu/1450/ipv6").unwrap();
    assert!(
        matches!(&mtu.probe, Probe::Mtu(m) if m.address.to_string() == "fd00:10:244:1::2"
            && m.size == Some(1450)),
        "{mtu:?}"
    );
    assert!(
        crate::plan::overlay::unprobed(&crate::testutil::ipv6_only(3, 1, "flannel")).is_empty(),
        "every node's overlay is probed over IPv6"
    );
    let dns = probes.iter().find(|p| p.path == PathClass::Dns).unwrap();
    assert!(
        matches!(&dns.probe, Probe::Dns(d) if d.record_type == probe_proto::DnsRecordType::Aaaa),
        "the kubernetes Service is IPv6: its name has a AAAA record"
    );
}

/// Over an IPv6 underlay only VXLAN is crafted (the engine crafts Geneve, IP-in-IP and
/// `WireGuard` over IPv4 alone): their VTEP is still echoed over `ICMPv6`, their datagrams are
/// planned over IPv4 where the nodes have it.
#[test]
fn other_encapsulations_are_crafted_over_ipv4_only() {
    use crate::inventory::Overlay;
    let mut inv = crate::testutil::ipv6_only(3, 1, "cilium");
    let modes = [
        Overlay::Geneve {
            port: probe_proto::Port::new(6081).unwrap(),
            vni: probe_proto::Vni::new(2).unwrap(),
            mtu: Some(1450),
        },
        Overlay::Ipip { mtu: Some(1450) },
        Overlay::Wireguard {
            port: probe_proto::Port::new(51871).unwrap(),
            mtu: Some(1450),
        },
    ];
    for ov in modes {
        inv.cluster.overlay = Some(ov);
        let probes = plan(&inv, &Filter::default()).to_vec();
        let overlay: Vec<&PlannedProbe> = probes
            .iter()
            .filter(|p| p.path == PathClass::Overlay)
            .collect();
        assert!(
            overlay
                .iter()
                .all(|p| matches!(p.probe, Probe::Vtep(_) | Probe::Mtu(_))),
            "{ov:?}: {overlay:#?}"
        );
        assert_eq!(
            overlay
                .iter()
                .filter(|p| matches!(p.probe, Probe::Vtep(_)))
                .count(),
            6
        );
    }
}
