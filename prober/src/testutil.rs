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
