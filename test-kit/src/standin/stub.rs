//! A cluster of N stub nodes (no lab namespaces, addresses nobody routes) for `Config::stub`.

use std::net::Ipv4Addr;
use std::path::Path;

use super::NodeSpec;
use super::seed;

/// Node `i`'s address and pod range's base: 10.(10 + i/250).(i/250).(i%250 + 1), 10.(64 + i/256).(i%256).0.
fn addresses(i: usize) -> (Ipv4Addr, Ipv4Addr) {
    let b = |x: usize| u8::try_from(x).unwrap_or(u8::MAX);
    (
        Ipv4Addr::new(10, b(10 + i / 250), b(i / 250), b(i % 250 + 1)),
        Ipv4Addr::new(10, b(64 + i / 256), b(i % 256), 0),
    )
}

/// A flannel cluster of `n` nodes in three zones, the first three control planes.
#[must_use]
pub fn cluster(n: usize) -> seed::Cluster {
    let nodes = (0..n)
        .map(|i| {
            let (address, pods) = addresses(i);
            let o = pods.octets();
            seed::Node {
                name: format!("node-{i:05}"),
                address,
                pod_cidr: format!("{pods}/24"),
                vtep_mac: format!("02:00:0a:{:02x}:{:02x}:00", o[1], o[2]),
                control_plane: i < 3,
                zone: Some(format!(
                    "zone-{}",
                    char::from(b'a' + u8::try_from(i % 3).unwrap_or(0))
                )),
            }
        })
        .collect::<Vec<_>>();
    let api_endpoints = nodes
        .iter()
        .filter(|n| n.control_plane)
        .map(|n| (n.address, 6443))
        .collect();
    let dns_endpoints = nodes
        .iter()
        .take(2)
        .map(|n| {
            let (_, pods) = addresses(nodes.iter().position(|m| m.name == n.name).unwrap_or(0));
            let o = pods.octets();
            (Ipv4Addr::new(o[0], o[1], o[2], 53), n.name.clone())
        })
        .collect();
    seed::Cluster {
        nodes,
        pod_cidr: "10.64.0.0/14".into(),
        service_cidr: "10.96.0.0/12".into(),
        api_service: Ipv4Addr::new(10, 96, 0, 1),
        api_endpoints,
        dns_service: Ipv4Addr::new(10, 96, 0, 10),
        dns_endpoints,
        corefile: ".:53 {\n  forward . /etc/resolv.conf\n}\n".into(),
        vni: 1,
        vxlan_port: 8472,
        flannel_namespace: "kube-flannel".into(),
    }
}

/// The kubelet's view of `c`'s nodes: names only for their namespaces (nothing ever enters
/// one), each node's `/` at `root`.
#[must_use]
pub fn nodes(c: &seed::Cluster, root: &Path) -> Vec<NodeSpec> {
    c.nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let (_, pods) = addresses(i);
            let o = pods.octets();
            NodeSpec {
                name: n.name.clone(),
                netns: format!("stub-host-{i}"),
                address: n.address,
                pod_sandboxes: vec![(format!("stub-pod-{i}"), Ipv4Addr::new(o[0], o[1], o[2], 2))],
                root: root.to_path_buf(),
            }
        })
        .collect()
}

/// Makes every stub node's `/` under `dir`: the one file the host agent mounts (`hostPath` of
/// type `File`, `/etc/resolv.conf`).
pub fn node_root(dir: &Path) -> std::io::Result<std::path::PathBuf> {
    let root = dir.join("node-root");
    std::fs::create_dir_all(root.join("etc"))?;
    std::fs::write(root.join("etc/resolv.conf"), "nameserver 10.96.0.10\n")?;
    Ok(root)
}
