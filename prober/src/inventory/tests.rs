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
