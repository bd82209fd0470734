//! `overlay.ipv6Tunnel`: a dual-stack lab whose pods' IPv6 rides a VXLAN device of its own over
//! the IPv6 underlay, as flannel and Calico run dual-stack; refused where the lab cannot build it.

use super::*;

const TWO_TUNNELS: &str = "ipFamilies: [ipv4, ipv6]\noverlay: {mode: vxlan, ipv6Tunnel: true}";

/// Each node has `flannel.1` over IPv4 as before and beside it `flannel-v6.1`: its own MAC,
/// `local` the node's IPv6 address, MTU 1430, the node's `vtep6` on it, each peer's IPv6 range
/// routed via the peer's `vtep6` with a permanent neighbour and an fdb entry to its IPv6
/// address. The pods take the smaller MTU.
#[test]
fn each_node_gets_an_ipv6_twin_of_its_vxlan_device() {
    let (_, st) = lab(TWO_TUNNELS);
    let n1 = ns(&st, "plab-t-n1");
    has_lines(
        n1,
        &[
            "addr add 192.168.56.10/24 dev eth0",
            "addr add fd00:56::a/64 dev eth0 nodad",
            "link add flannel.1 address 02:00:0a:f4:01:00 type vxlan id 1 local 192.168.56.10 dev eth0 dstport 8472 nolearning",
            "link set flannel.1 mtu 1450",
            "link add flannel-v6.1 address 02:00:fd:f4:01:00 type vxlan id 1 local fd00:56::a dev eth0 dstport 8472 nolearning",
            "link set flannel-v6.1 mtu 1430",
            "addr add fd00:10:244:1::/128 dev flannel-v6.1 nodad",
            "link set flannel-v6.1 up",
            "route add 10.244.2.0/24 via 10.244.2.0 dev flannel.1 onlink",
            "route add fd00:10:244:2::/64 via fd00:10:244:2:: dev flannel-v6.1 onlink",
            "neigh add fd00:10:244:3:: lladdr 02:00:fd:f4:03:00 dev flannel-v6.1 nud permanent",
            "link set cni0 mtu 1430",
        ],
    );
    assert!(
        !n1.config
            .iter()
            .any(|c| c.contains("::ff")
                || (c.contains("fd00:10:244:") && c.contains("dev flannel.1"))),
        "no IPv6 pod range through flannel.1: {:#?}",
        n1.config
    );
    assert_eq!(
        n1.fdb,
        [
            "fdb append 02:00:0a:f4:02:00 dev flannel.1 dst 192.168.56.11",
            "fdb append 02:00:fd:f4:02:00 dev flannel-v6.1 dst fd00:56::b",
            "fdb append 02:00:0a:f4:03:00 dev flannel.1 dst 192.168.56.12",
            "fdb append 02:00:fd:f4:03:00 dev flannel-v6.1 dst fd00:56::c",
        ]
    );
    has_lines(ns(&st, "plab-t-n1p0"), &["link set eth0 mtu 1430 up"]);
    // An IPv6 path MTU fault lowers the routes on the device that carries the pods' IPv6.
    let (_, st) = lab(&format!(
        "{TWO_TUNNELS}\nfaults: [{{kind: mtu, node: n3, mtu: 1400, family: ipv6}}]"
    ));
    has_lines(
        ns(&st, "plab-t-n1"),
        &["route change fd00:10:244:3::/64 via fd00:10:244:3:: dev flannel-v6.1 onlink mtu 1400"],
    );
    // Calico's twin is `vxlan-v6.calico`, on its port and VNI.
    let (_, st) = lab(
        "ipFamilies: [ipv4, ipv6]\ncni: calico\noverlay: {mode: vxlan, port: 4789, ipv6Tunnel: true}",
    );
    has_lines(
        ns(&st, "plab-t-n2"),
        &[
            "link add vxlan-v6.calico address 02:00:fd:f4:02:00 type vxlan id 4096 local fd00:56::b dev eth0 dstport 4789 nolearning",
        ],
    );
}

/// The inventory names both tunnel endpoints, `vtep6` with the twin's MAC, and the pods' MTU;
/// so the plan echoes each peer's VTEP and sends crafted VXLAN over both underlays.
#[test]
fn the_inventory_names_the_ipv6_vtep_so_both_underlays_are_probed() {
    let (l, _) = lab(TWO_TUNNELS);
    let s = Scenario::parse(TWO_TUNNELS).unwrap();
    let inv = inventory(&s, &l);
    inv.validate().unwrap();
    let n2 = &inv.nodes[1];
    assert_eq!(
        n2.vtep.as_ref().map(|v| v.address.to_string()).as_deref(),
        Some("10.244.2.0")
    );
    let vtep6 = n2.vtep6.as_ref().unwrap();
    assert_eq!(vtep6.address.to_string(), "fd00:10:244:2::");
    assert_eq!(
        vtep6.mac.map(|m| m.to_string()).as_deref(),
        Some("02:00:fd:f4:02:00")
    );
    assert_eq!(inv.cluster.overlay.and_then(|o| o.mtu()), Some(1430));
    let plan = crate::plan::plan(&inv, &crate::plan::Filter::default()).to_vec();
    let ids: Vec<&str> = plan.iter().map(|p| p.id.as_str()).collect();
    for id in [
        "overlay:n1/host->n2/vtep:icmp",
        "overlay:n1/host->n2/host:vxlan/8472",
        "overlay:n1/host->n2/vtep:icmp/ipv6",
        "overlay:n1/host->n2/host:vxlan/8472/ipv6",
    ] {
        assert!(ids.contains(&id), "{id} not in {ids:#?}");
    }
    // Without the key the dual-stack lab is as before: no `vtep6`, no IPv6 tunnel probes.
    let (l, _) = lab("ipFamilies: [ipv4, ipv6]");
    let s = Scenario::parse("ipFamilies: [ipv4, ipv6]").unwrap();
    let plan = crate::plan::plan(&inventory(&s, &l), &crate::plan::Filter::default()).to_vec();
    assert!(
        !plan
            .iter()
            .any(|p| p.id.contains("vtep:icmp/ipv6") || p.id.contains("vxlan/8472/ipv6")),
        "{plan:#?}"
    );
}

/// The twin is a dual-stack lab's, over VXLAN, for a CNI that runs two devices: elsewhere the
/// scenario is refused naming the key and what it needs.
#[test]
fn an_ipv6_tunnel_the_lab_cannot_build_is_refused_naming_the_key() {
    for (yaml, says) in [
        (
            "overlay: {mode: vxlan, ipv6Tunnel: true}",
            "ipFamilies: [ipv4]",
        ),
        (
            "ipFamilies: [ipv6]\noverlay: {mode: vxlan, ipv6Tunnel: true}",
            "ipFamilies: [ipv6]",
        ),
        (
            "ipFamilies: [ipv4, ipv6]\noverlay: {mode: geneve, ipv6Tunnel: true}",
            "overlay.mode vxlan, not geneve",
        ),
        (
            "ipFamilies: [ipv4, ipv6]\ncni: cilium\noverlay: {mode: vxlan, ipv6Tunnel: true}",
            "not cilium",
        ),
    ] {
        let e = Scenario::parse(yaml).unwrap_err().to_string();
        assert!(
            e.contains("overlay.ipv6Tunnel") && e.contains(says),
            "{yaml}: {e}"
        );
    }
    Scenario::parse(TWO_TUNNELS).unwrap();
    Scenario::parse(
        "ipFamilies: [ipv4, ipv6]\ncni: calico\noverlay: {mode: vxlan, ipv6Tunnel: true}",
    )
    .unwrap();
}
