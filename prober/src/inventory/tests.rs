//! The inventory's tests: what parses, what is refused and with which field named.

use super::*;
use crate::testutil::inventory;

#[test]
fn broken_rules_name_the_field() {
    let mut inv = inventory(2, 1, "flannel");
    inv.nodes[1].name = "n1".into();
    assert_eq!(
        inv.validate(),
        Err(InvalidInventory::DuplicateName {
            index: 1,
            name: "n1".into()
        })
    );
    inv.nodes[1].name = String::new();
    assert_eq!(
        inv.validate().unwrap_err().to_string(),
        "nodes[1].name: must not be empty"
    );
    inv.nodes[1].name = "n2".into();
    if let Some(a) = inv.nodes[1].agents.pod.as_mut() {
        a.exec.clear();
    }
    assert_eq!(
        inv.validate().unwrap_err().to_string(),
        "nodes[1].agents.pod.exec: must name a command prefix"
    );
    inv.nodes.clear();
    assert_eq!(inv.validate(), Err(InvalidInventory::NoNodes));
}

/// What the agents refuse, or the planner would change or drop without a word, is refused
/// here, naming the field (each of these once ran, wrongly).
#[test]
fn values_the_agents_refuse_are_refused_naming_the_field() {
    type Case = (&'static str, fn(&mut Inventory));
    let cases: [Case; 8] = [
        ("nodes[1].name", |i| i.nodes[1].name = "a".repeat(254)),
        ("nodes[1].name", |i| i.nodes[1].name = "N2 x".into()),
        ("nodes[1].name", |i| i.nodes[1].name = "n2\nn3".into()),
        ("nodes[0].address", |i| {
            i.nodes[0].address = "0.0.0.0".parse().unwrap();
        }),
        ("cluster.overlay.mtu", |i| {
            *i.cluster.overlay.as_mut().unwrap().mtu_mut() = Some(0);
        }),
        ("cluster.dns.names[0]", |i| {
            i.cluster.dns.as_mut().unwrap().names = vec!["a".repeat(255)];
        }),
        ("cluster.api.service", |i| {
            i.cluster.api.service = "10.96.0.1:0".parse().unwrap();
        }),
        ("components[0].name", |i| {
            i.components = vec![Component {
                name: "calico; rm -rf /".into(),
                namespace: "kube-system".into(),
                kind: "DaemonSet".into(),
                role: "cni".into(),
                host_network: true,
                api_access: ApiAccess::Service,
                containers: vec![],
                nodes: vec![],
            }];
        }),
    ];
    for (field, break_it) in cases {
        let mut inv = inventory(3, 1, "flannel");
        break_it(&mut inv);
        let e = inv.validate().unwrap_err().to_string();
        assert!(e.starts_with(&format!("{field}:")), "{field}: {e}");
    }
    // What Kubernetes allows is allowed: a 253-character node name, IP-in-IP without a port.
    let mut inv = inventory(3, 1, "flannel");
    let label = "a".repeat(63);
    inv.nodes[0].name = format!("{label}.{label}.{label}.{}", "a".repeat(61));
    inv.cluster.overlay = Some(Overlay::Ipip { mtu: Some(1480) });
    inv.validate().unwrap();
}

/// Port 0 is refused by the type, naming the field, never planned as port 1; roles keep their
/// YAML form.
#[test]
fn port_zero_is_refused_naming_the_field_and_roles_read_back() {
    let text = inventory(2, 1, "flannel").to_yaml();
    for (from, to, field) in [
        ("port: 9917", "port: 0", "nodes[0].agents.host.port"),
        (
            "\n  agents:",
            "\n  serves: [179, 0]\n  agents:",
            "nodes[0].serves[1]",
        ),
    ] {
        let broken = text.replacen(from, to, 1);
        assert_ne!(broken, text);
        let e = from_yaml::<Inventory>(&broken).unwrap_err().to_string();
        assert!(e.contains(field) && e.contains("port 0"), "{field}: {e}");
    }
    let inv: Inventory = from_yaml(&text).unwrap();
    assert_eq!(inv.nodes[0].roles, [NodeRole::ControlPlane]);
    assert!(inv.nodes[0].is_control_plane() && !inv.nodes[1].is_control_plane());
    assert_eq!(inv.to_yaml(), text);
}

#[test]
fn load_names_the_file_the_field_and_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("inventory.yaml");
    let mut text = inventory(1, 1, "flannel").to_yaml();
    text = text.replacen("roles:", "rolez:", 1);
    std::fs::write(&path, &text).unwrap();
    let err = Inventory::load(&path).unwrap_err();
    match &err {
        InventoryError::Parse { source, .. } => assert_eq!(source.field, "nodes[0].rolez"),
        e => panic!("want a parse error, got {e:?}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains(&path.display().to_string()) && msg.contains("rolez"),
        "{msg}"
    );
    std::fs::write(
        &path,
        text.replace("rolez:", "roles:")
            .replace("name: n1", "name: ''"),
    )
    .unwrap();
    let msg = Inventory::load(&path).unwrap_err().to_string();
    assert!(
        msg.contains(&path.display().to_string()) && msg.contains("nodes[0].name"),
        "{msg}"
    );
}

#[test]
fn cidrs() {
    let c = Cidr::try_from("10.244.1.0/24".to_string()).unwrap();
    assert!(c.contains(Ipv4Addr::new(10, 244, 1, 200)));
    assert!(!c.contains(Ipv4Addr::new(10, 244, 2, 1)));
    for bad in ["10.244.1.0", "10.244.1/24", "10.244.1.0/33", "10.244.1.0/x"] {
        assert_eq!(
            Cidr::try_from(bad.to_string()),
            Err(BadCidr(bad.into())),
            "{bad}"
        );
    }
}

#[test]
fn ipv6_cidrs() {
    let c = Cidr::try_from("fd00:10:244:1::/64".to_string()).unwrap();
    assert_eq!(c.family(), Family::Ipv6);
    assert!(c.contains("fd00:10:244:1::2a".parse::<std::net::Ipv6Addr>().unwrap()));
    assert!(!c.contains("fd00:10:244:2::2".parse::<std::net::Ipv6Addr>().unwrap()));
    // An address of the other family is never in it, whatever its bits.
    assert!(!c.contains(Ipv4Addr::new(253, 0, 0, 16)));
    assert!(
        Cidr::try_from("::/0".to_string())
            .unwrap()
            .contains(std::net::Ipv6Addr::LOCALHOST)
    );
    for bad in ["fd00::/129", "fd00::", "fd00:::/64"] {
        let e = Cidr::try_from(bad.to_string()).unwrap_err();
        assert!(e.to_string().contains("fd00:10:244::/56"), "{e}");
    }
}

/// A dual-stack inventory: both families' addresses, ranges and `ClusterIPs`; an IPv4-only one
/// reads and writes exactly as before (no new key appears).
#[test]
fn dual_stack_fields_read_back_and_ipv4_only_writes_none_of_them() {
    let v4 = inventory(2, 1, "flannel");
    let text = v4.to_yaml();
    for key in ["address6", "vtep6", "podCIDRs", "serviceCIDRs", "services"] {
        assert!(!text.contains(key), "{key} in an IPv4 inventory:\n{text}");
    }
    assert_eq!(v4.families(), [Family::Ipv4]);
    let dual = text
        .replacen(
            "  serviceCIDR: 10.96.0.0/12\n",
            "  podCIDRs: [10.244.0.0/16, \"fd00:10:244::/56\"]\n  serviceCIDR: 10.96.0.0/12\n  \
             serviceCIDRs: [10.96.0.0/12, \"fd00:10:96::/112\"]\n",
            1,
        )
        .replacen(
            "\n  address: \"192.168.56.10\"\n",
            "\n  address: \"192.168.56.10\"\n  address6: fd00:56::a\n  podCIDRs: [10.244.1.0/24, \"fd00:10:244:1::/64\"]\n  \
             vtep6: {address: \"fd00:10:244:1::\"}\n",
            1,
        );
    assert_ne!(dual, text);
    let inv: Inventory = from_yaml(&dual).unwrap_or_else(|e| panic!("{e}\n{dual}"));
    inv.validate().unwrap();
    assert_eq!(inv.families(), [Family::Ipv4, Family::Ipv6]);
    let n1 = &inv.nodes[0];
    assert_eq!(
        n1.ips().map(|ip| ip.to_string()).collect::<Vec<_>>(),
        ["192.168.56.10", "fd00:56::a"]
    );
    assert!(n1.holds_pod_ip("fd00:10:244:1::2".parse::<std::net::Ipv6Addr>().unwrap()));
    assert_eq!(inv.cluster.pod_ranges().count(), 2);
    assert_eq!(
        inv.cluster.service_ranges().last().unwrap().family(),
        Family::Ipv6
    );
    let back: Inventory = from_yaml(&inv.to_yaml()).unwrap();
    assert_eq!(back, inv);
}

/// An IPv6-only inventory: no IPv4 `address` anywhere; it round-trips without one.
#[test]
fn an_ipv6_only_inventory_is_accepted() {
    let text = "cluster:\n  cni: flannel\n  podCIDR: fd00:10:244::/56\n  serviceCIDR: fd00:10:96::/112\n  \
        api: {service: \"[fd00:10:96::1]:443\", endpoints: [\"[fd00:56::a]:6443\"]}\n  \
        dns: {service: \"[fd00:10:96::a]:53\", endpoints: [\"[fd00:10:244:1::35]:53\"]}\n\
        nodes:\n  - name: n1\n    address6: fd00:56::a\n    podCIDR: fd00:10:244:1::/64\n    agents:\n      \
        host: {exec: [ip, netns, exec, n1], address6: fd00:56::a, port: 9917}\n      \
        pod: {exec: [ip, netns, exec, n1p0], address6: \"fd00:10:244:1::2\", port: 9917}\n";
    let inv: Inventory = from_yaml(text).unwrap();
    inv.validate().unwrap();
    assert_eq!(inv.families(), [Family::Ipv6]);
    let n1 = &inv.nodes[0];
    assert_eq!(n1.ipv4(), None);
    assert_eq!(n1.agents.host.as_ref().unwrap().ipv4(), None);
    assert_eq!(
        n1.agents
            .pod
            .as_ref()
            .unwrap()
            .ip(Family::Ipv6)
            .unwrap()
            .to_string(),
        "fd00:10:244:1::2"
    );
    let out = inv.to_yaml();
    assert!(!out.contains("address:"), "{out}");
    assert_eq!(from_yaml::<Inventory>(&out).unwrap(), inv);
}

/// Bad IPv6 and dual-stack input names its field.
#[test]
fn bad_family_fields_are_refused_naming_them() {
    type Case = (&'static str, fn(&mut Inventory));
    let text = inventory(2, 1, "flannel").to_yaml();
    // Parse errors: the field serde was in.
    for (from, to, field, says) in [
        (
            "address: \"192.168.56.10\"",
            "address: 0.0.0.0",
            "nodes[0].address",
            "address6",
        ),
        (
            "address: \"192.168.56.10\"",
            "address6: 192.168.56.10",
            "nodes[0].address6",
            "",
        ),
        (
            "podCIDR: 10.244.1.0/24",
            "podCIDR: fd00::/200",
            "nodes[0].podCIDR",
            "not a CIDR",
        ),
    ] {
        let broken = text.replacen(from, to, 1);
        assert_ne!(broken, text);
        let e = from_yaml::<Inventory>(&broken).unwrap_err().to_string();
        assert!(e.contains(field) && e.contains(says), "{field}: {e}");
    }
    // Rules across fields.
    let cases: [Case; 6] = [
        ("nodes[1].address", |i| i.nodes[1].address = NO_IPV4),
        ("nodes[0].agents.pod.address", |i| {
            i.nodes[0].agents.pod.as_mut().unwrap().address = NO_IPV4;
        }),
        ("nodes[0].address6", |i| {
            i.nodes[0].address6 = Some(std::net::Ipv6Addr::UNSPECIFIED);
        }),
        ("cluster.podCIDRs[1]", |i| {
            i.cluster.pod_cidrs = vec![
                i.cluster.pod_cidr,
                "10.245.0.0/16".to_string().try_into().unwrap(),
            ];
        }),
        ("cluster.serviceCIDRs[0]", |i| {
            i.cluster.service_cidrs = vec!["fd00:10:96::/112".to_string().try_into().unwrap()];
        }),
        ("cluster.api.services[1]", |i| {
            i.cluster.api.services = vec![i.cluster.api.service, "10.96.0.2:443".parse().unwrap()];
        }),
    ];
    for (field, break_it) in cases {
        let mut inv = inventory(2, 1, "flannel");
        break_it(&mut inv);
        let e = inv.validate().unwrap_err().to_string();
        assert!(e.starts_with(&format!("{field}:")), "{field}: {e}");
    }
}

#[test]
fn a_node_address_no_peer_can_reach_it_at_is_refused_naming_the_field() {
    type Case = (&'static str, &'static str, fn(&mut Inventory));
    let cases: [Case; 7] = [
        ("nodes[0].address6", "IPv4-mapped", |i| {
            i.nodes[0].address6 = Some("::ffff:192.168.56.10".parse().unwrap());
        }),
        ("nodes[1].address6", "loopback", |i| {
            i.nodes[1].address6 = Some("::1".parse().unwrap());
        }),
        ("nodes[1].address", "loopback", |i| {
            i.nodes[1].address = "127.0.0.1".parse().unwrap();
        }),
        ("nodes[0].address6", "link-local", |i| {
            i.nodes[0].address6 = Some("fe80::1".parse().unwrap());
        }),
        ("nodes[0].agents.host.address", "loopback", |i| {
            i.nodes[0].agents.host.as_mut().unwrap().address = "127.0.0.2".parse().unwrap();
        }),
        ("nodes[2].address", "also nodes[0]", |i| {
            i.nodes[2].address = i.nodes[0].address;
        }),
        ("nodes[1].address6", "also nodes[0]", |i| {
            i.nodes[0].address6 = Some("fd00:56::a".parse().unwrap());
            i.nodes[1].address6 = Some("fd00:56::a".parse().unwrap());
        }),
    ];
    for (field, says, break_it) in cases {
        let mut inv = inventory(3, 1, "flannel");
        break_it(&mut inv);
        let e = inv.validate().unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("{field}:")) && e.contains(says),
            "{field}: {e}"
        );
    }
}
