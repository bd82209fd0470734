//! Test fixtures shared by the planner and the diagnosis tests.

// Test code: it reads /proc freely (clippy.toml bans unbounded reads in shipped code).
#![allow(clippy::disallowed_methods)]

use std::fmt::Write as _;

use crate::inventory::Inventory;

/// A synthetic inventory shaped like the lab's: `nodes` nodes, the first `cps` control planes.
pub fn inventory(nodes: usize, cps: usize, cni: &str) -> Inventory {
    let mut y = format!(
        "cluster:\n  cni: {cni}\n  podCIDR: 10.244.0.0/16\n  serviceCIDR: 10.96.0.0/12\n  overlay: {{mode: vxlan, port: 8472, vni: 1, mtu: 1450}}\n  \
         api: {{service: \"10.96.0.1:443\", endpoints: [{}]}}\n  \
         dns: {{service: \"10.96.0.10:53\", endpoints: [\"10.244.1.53:53\"], names: [kubernetes.default.svc.cluster.local]}}\nnodes:\n",
        (1..=cps)
            .map(|i| format!("\"192.168.56.{}:6443\"", 9 + i))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for i in 1..=nodes {
        let role = if i <= cps { "[control-plane]" } else { "[]" };
        let _ = write!(
            y,
            "  - name: n{i}\n    roles: {role}\n    address: 192.168.56.{a}\n    podCIDR: 10.244.{i}.0/24\n    \
             vtep: {{address: 10.244.{i}.0, mac: \"02:00:0a:f4:{i:02x}:00\"}}\n    agents:\n      \
             host: {{exec: [ip, netns, exec, n{i}], address: 192.168.56.{a}, port: 9917}}\n      \
             pod: {{exec: [ip, netns, exec, n{i}p0], address: 10.244.{i}.2, port: 9917}}\n",
            a = 9 + i
        );
    }
    let inv: Inventory = serde_saphyr::from_str(&y).unwrap();
    inv.validate().unwrap();
    inv
}

/// The lab's IPv6 twin of an IPv4 address: `fd00:56::N` for node `192.168.56.N`,
/// `fd00:10:244:I::H` for pod `10.244.I.H`, `fd00:10:96::H` for Service `10.96.0.H`.
fn six(v4: std::net::Ipv4Addr) -> std::net::Ipv6Addr {
    let [a, b, c, d] = v4.octets();
    let net: u128 = match (a, b) {
        (192, 168) => 0xfd00_0056 << 96,
        (10, 244) => (0xfd00_0010_0244_u128 << 80) | (u128::from(c) << 64),
        _ => (0xfd00_0010_0096_u128 << 80) | (u128::from(c) << 8),
    };
    std::net::Ipv6Addr::from(net | u128::from(d))
}

/// [`inventory`] made dual-stack: every node, agent and Service (the `kubernetes` one too, as
/// the lab makes it) also in IPv6 (`fd00:56::N` for
/// node `192.168.56.N`, `fd00:10:244:I::H` for pod `10.244.I.H`, `fd00:10:96::1` and `::a`).
pub fn dual_stack(nodes: usize, cps: usize, cni: &str) -> Inventory {
    use std::net::{IpAddr, SocketAddr};
    let six_sa = |sa: SocketAddr| match sa.ip() {
        IpAddr::V4(v4) => SocketAddr::new(IpAddr::V6(six(v4)), sa.port()),
        IpAddr::V6(_) => sa,
    };
    let mut inv = inventory(nodes, cps, cni);
    let c = &mut inv.cluster;
    c.pod_cidrs = vec![
        c.pod_cidr,
        "fd00:10:244::/56".to_string().try_into().unwrap(),
    ];
    c.service_cidrs = vec![
        c.service_cidr,
        "fd00:10:96::/112".to_string().try_into().unwrap(),
    ];
    c.api.services = vec![c.api.service, six_sa(c.api.service)];
    let eps: Vec<SocketAddr> = c.api.endpoints.iter().copied().map(six_sa).collect();
    c.api.endpoints.extend(eps);
    if let Some(d) = c.dns.as_mut() {
        d.services = vec![d.service, six_sa(d.service)];
        let eps: Vec<SocketAddr> = d.endpoints.iter().copied().map(six_sa).collect();
        d.endpoints.extend(eps);
    }
    for n in &mut inv.nodes {
        n.address6 = Some(six(n.address));
        let p6 = six(n.pod_cidr.unwrap().ipv4().unwrap());
        n.pod_cidrs = vec![n.pod_cidr.unwrap(), format!("{p6}/64").try_into().unwrap()];
        for a in [n.agents.host.as_mut(), n.agents.pod.as_mut()]
            .into_iter()
            .flatten()
        {
            a.address6 = Some(six(a.address));
        }
    }
    inv.validate().unwrap();
    inv
}

/// [`dual_stack`] without its IPv4 addresses: an IPv6-only cluster, its tunnel endpoints over the
/// IPv6 underlay (`vtep6`).
pub fn ipv6_only(nodes: usize, cps: usize, cni: &str) -> Inventory {
    use std::net::IpAddr;
    let mut inv = dual_stack(nodes, cps, cni);
    let c = &mut inv.cluster;
    c.pod_cidr = c.pod_cidrs[1];
    c.pod_cidrs.clear();
    c.service_cidr = c.service_cidrs[1];
    c.service_cidrs.clear();
    c.api.service = c.api.services[1];
    c.api.services.clear();
    c.api.endpoints.retain(|e| matches!(e.ip(), IpAddr::V6(_)));
    if let Some(d) = c.dns.as_mut() {
        d.service = d.services[1];
        d.services.clear();
        d.endpoints.retain(|e| matches!(e.ip(), IpAddr::V6(_)));
    }
    for n in &mut inv.nodes {
        n.address = crate::inventory::NO_IPV4;
        n.pod_cidr = Some(n.pod_cidrs[1]);
        n.pod_cidrs.clear();
        // flannel's IPv6 VTEP: its pod range's first address, the same device MAC.
        let vtep = n.vtep.take().unwrap();
        n.vtep6 = Some(crate::inventory::Vtep {
            address: six(vtep.address),
            mac: vtep.mac,
        });
        for a in [n.agents.host.as_mut(), n.agents.pod.as_mut()]
            .into_iter()
            .flatten()
        {
            a.address = crate::inventory::NO_IPV4;
        }
    }
    inv.validate().unwrap();
    inv
}

/// `nodes` nodes dealt round-robin into `zones` zones (`z0`, `z1`, ..., `z0`, ...), or with no
/// zone label when `zones` is 0.
pub fn zones_round_robin(nodes: usize, zones: usize) -> Inventory {
    let mut inv = inventory(nodes, 1, "flannel");
    for (i, n) in inv.nodes.iter_mut().enumerate() {
        n.zone = (zones > 0).then(|| format!("z{}", i % zones));
    }
    inv
}

/// `nodes` nodes cut into `zones` zones of consecutive nodes (`z0`, `z0`, ..., `z1`, ...).
pub fn zones_consecutive(nodes: usize, zones: usize) -> Inventory {
    let mut inv = inventory(nodes, 1, "flannel");
    for (i, n) in inv.nodes.iter_mut().enumerate() {
        n.zone = Some(format!("z{}", i * zones / nodes));
    }
    inv
}

/// Ports for tests (`ports(&[179, 5473])`).
pub fn ports(list: &[u16]) -> Vec<probe_proto::Port> {
    list.iter()
        .map(|&p| probe_proto::Port::new(p).unwrap())
        .collect()
}

/// Runs the test `name` (its path, as `cargo test` prints it) again in a child process whose
/// address space may grow by at most `headroom` bytes, and asserts it passed there. Returns
/// `true` in that child, where the test body runs: a test of bounded memory that fails cannot
/// take the machine down with it.
pub fn in_child_with_memory_limit(name: &str, headroom: u64) -> bool {
    const CHILD: &str = "PROBER_TEST_MEMORY_LIMITED";
    if std::env::var_os(CHILD).is_some() {
        let size = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmSize:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            })
            .expect("VmSize in /proc/self/status")
            * 1024;
        let limit = size + headroom;
        nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_AS, limit, limit)
            .expect("setrlimit");
        return true;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.contains("1 passed"),
        "{name} under a memory limit: {}\n{said}",
        out.status
    );
    false
}

/// A worker `new` about to join at 192.168.57.249, its stand-in agent on 9917: the preflight
/// tests' candidate.
#[must_use]
pub fn candidate() -> crate::plan::preflight::Candidate {
    crate::plan::preflight::Candidate {
        name: "new".into(),
        address: "192.168.57.249".parse().unwrap(),
        exec: Vec::new(),
        role: crate::plan::preflight::Role::Worker,
        agent_port: probe_proto::Port::new(9917).unwrap(),
        host_root: None,
    }
}
