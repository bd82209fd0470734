//! The lab end to end: every checked-in scenario passes `prober lab run`; the root namespace is
//! never touched; teardown happens on success, on Ctrl-C and (with `lab down NAME`) after a kill. Every lab
//! is named with this run's tag (`common::lab_name`), so a second run on the machine is untouched.
//! Needs root, iproute2, nftables and dnsmasq (installed by scripts/test).

// A test: it reads fixtures and the clock freely (clippy.toml bans them in shipped code).
#![allow(clippy::disallowed_methods)]

mod common;

use common::{StateDir, agent, lab, lab_name, netns_with, prober, require_root, root, text};

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The root namespace's links and addresses, to prove the lab never changes them.
fn root_netns_state() -> String {
    let links = Command::new("ip")
        .args(["-o", "link", "show"])
        .output()
        .unwrap();
    let addrs = Command::new("ip")
        .args(["-o", "addr", "show"])
        .output()
        .unwrap();
    let routes = Command::new("ip")
        .args(["route", "show", "table", "all"])
        .output()
        .unwrap();
    let strip = |o: &Output| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            // Counters and lifetimes change by themselves; names, addresses and routes do not.
            .map(|l| l.split(" valid_lft").next().unwrap_or(l).to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };
    format!("{}\n{}\n{}", strip(&links), strip(&addrs), strip(&routes))
}

fn scenarios() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in [
        "tests/scenarios",
        "tests/scenarios/faults",
        "tests/scenarios/diagnosis",
    ] {
        for e in std::fs::read_dir(root().join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "yaml") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// One test per checked-in scenario, so a failure names its scenario (`scenario::NAME`, the file
/// name with `-` and `/` as `_`). `every_scenario_is_listed` keeps the list and the folders equal.
macro_rules! scenarios {
    ($($name:ident => $file:literal,)*) => {
        const LISTED: &[&str] = &[$($file),*];
        mod scenario {
            $(
                #[test]
                fn $name() {
                    super::scenario_holds($file);
                }
            )*
        }
    };
}

scenarios! {
    api_port_blocked => "tests/scenarios/api-port-blocked.yaml",
    clusterip_broken => "tests/scenarios/clusterip-broken.yaml",
    cni_token_expired => "tests/scenarios/cni-token-expired.yaml",
    cni_token_stale => "tests/scenarios/cni-token-stale.yaml",
    coredns_loop => "tests/scenarios/coredns-loop.yaml",
    dual_stack_api_port_blocked => "tests/scenarios/dual-stack-api-port-blocked.yaml",
    dual_stack_healthy => "tests/scenarios/dual-stack-healthy.yaml",
    dual_stack_ipv6_gap => "tests/scenarios/dual-stack-ipv6-gap.yaml",
    dual_stack_two_tunnels_healthy => "tests/scenarios/dual-stack-two-tunnels-healthy.yaml",
    dual_stack_vxlan_8472_ipv6_only => "tests/scenarios/dual-stack-vxlan-8472-ipv6-only.yaml",
    flannel_8472 => "tests/scenarios/flannel-8472.yaml",
    healthy => "tests/scenarios/healthy.yaml",
    ipv6_only_clusterip_broken => "tests/scenarios/ipv6-only-clusterip-broken.yaml",
    ipv6_only_cni_token_expired => "tests/scenarios/ipv6-only-cni-token-expired.yaml",
    ipv6_only_cni_token_stale => "tests/scenarios/ipv6-only-cni-token-stale.yaml",
    ipv6_only_coredns_loop => "tests/scenarios/ipv6-only-coredns-loop.yaml",
    ipv6_only_healthy => "tests/scenarios/ipv6-only-healthy.yaml",
    ipv6_only_kubelet_localhost => "tests/scenarios/ipv6-only-kubelet-localhost.yaml",
    ipv6_only_vxlan_8472 => "tests/scenarios/ipv6-only-vxlan-8472.yaml",
    kubelet_localhost => "tests/scenarios/kubelet-localhost.yaml",
    overlay_calico_bgp_179 => "tests/scenarios/overlay-calico-bgp-179.yaml",
    overlay_calico_ipip_healthy => "tests/scenarios/overlay-calico-ipip-healthy.yaml",
    overlay_calico_ipip_zones => "tests/scenarios/overlay-calico-ipip-zones.yaml",
    overlay_calico_vxlan_4789_one_way => "tests/scenarios/overlay-calico-vxlan-4789-one-way.yaml",
    overlay_calico_vxlan_healthy => "tests/scenarios/overlay-calico-vxlan-healthy.yaml",
    overlay_geneve_host => "tests/scenarios/overlay-geneve-host.yaml",
    overlay_wireguard_zones => "tests/scenarios/overlay-wireguard-zones.yaml",
    faults_dual_stack_host_drop_agent_port => "tests/scenarios/faults/dual-stack-host-drop-agent-port.yaml",
    faults_dual_stack_kube_proxy_missing_ipv6 => "tests/scenarios/faults/dual-stack-kube-proxy-missing-ipv6.yaml",
    faults_dual_stack_loss_only => "tests/scenarios/faults/dual-stack-loss-only.yaml",
    faults_host_drop_agent_port => "tests/scenarios/faults/host-drop-agent-port.yaml",
    faults_host_drop_vxlan => "tests/scenarios/faults/host-drop-vxlan.yaml",
    faults_ipv6_packet_too_big_filtered => "tests/scenarios/faults/ipv6-packet-too-big-filtered.yaml",
    faults_kube_proxy_missing => "tests/scenarios/faults/kube-proxy-missing.yaml",
    faults_loss_and_block => "tests/scenarios/faults/loss-and-block.yaml",
    faults_loss_only => "tests/scenarios/faults/loss-only.yaml",
    faults_loss => "tests/scenarios/faults/loss.yaml",
    faults_ipv6_only_loss => "tests/scenarios/faults/ipv6-only-loss.yaml",
    faults_mtu => "tests/scenarios/faults/mtu.yaml",
    faults_network_reject => "tests/scenarios/faults/network-reject.yaml",
    faults_switch_reject => "tests/scenarios/faults/switch-reject.yaml",
    faults_tcp_where => "tests/scenarios/faults/tcp-where.yaml",
    faults_zone_blocks => "tests/scenarios/faults/zone-blocks.yaml",
    diagnosis_hop_first_router_drops => "tests/scenarios/diagnosis/hop-first-router-drops.yaml",
    diagnosis_hop_second_router_drops => "tests/scenarios/diagnosis/hop-second-router-drops.yaml",
    diagnosis_cni_kubeconfig_insecure => "tests/scenarios/diagnosis/cni-kubeconfig-insecure.yaml",
    diagnosis_ipip_unprobed_healthy => "tests/scenarios/diagnosis/ipip-unprobed-healthy.yaml",
    diagnosis_ipip_unprobed_zones => "tests/scenarios/diagnosis/ipip-unprobed-zones.yaml",
    diagnosis_mtu_own_size_healthy => "tests/scenarios/diagnosis/mtu-own-size-healthy.yaml",
    diagnosis_mtu_own_size_vxlan => "tests/scenarios/diagnosis/mtu-own-size-vxlan.yaml",
    diagnosis_multus_token_stale => "tests/scenarios/diagnosis/multus-token-stale.yaml",
    diagnosis_narrowed_node_to_node_zones => "tests/scenarios/diagnosis/narrowed-node-to-node-zones.yaml",
    diagnosis_narrowed_overlay_8472 => "tests/scenarios/diagnosis/narrowed-overlay-8472.yaml",
    diagnosis_policy_anp_deny => "tests/scenarios/diagnosis/policy-anp-deny.yaml",
    diagnosis_policy_calico_global_deny => "tests/scenarios/diagnosis/policy-calico-global-deny.yaml",
    diagnosis_policy_namespace_default_deny_allowed => "tests/scenarios/diagnosis/policy-namespace-default-deny-allowed.yaml",
    diagnosis_policy_namespace_default_deny => "tests/scenarios/diagnosis/policy-namespace-default-deny.yaml",
    diagnosis_policy_one_zone => "tests/scenarios/diagnosis/policy-one-zone.yaml",
    diagnosis_reset_api_one_zone => "tests/scenarios/diagnosis/reset-api-one-zone.yaml",
    diagnosis_reset_everyone_is_not_listening => "tests/scenarios/diagnosis/reset-everyone-is-not-listening.yaml",
    diagnosis_reset_kubelet_two_senders => "tests/scenarios/diagnosis/reset-kubelet-two-senders.yaml",
    diagnosis_reset_on_the_router => "tests/scenarios/diagnosis/reset-on-the-router.yaml",
    diagnosis_typha_unknown_servers => "tests/scenarios/diagnosis/typha-unknown-servers.yaml",
    diagnosis_vxlan_unprobed_one_node => "tests/scenarios/diagnosis/vxlan-unprobed-one-node.yaml",
}

#[test]
fn every_scenario_is_listed() {
    let on_disk: Vec<String> = scenarios()
        .iter()
        .map(|p| {
            p.strip_prefix(root())
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let mut listed: Vec<String> = LISTED.iter().map(|s| (*s).to_string()).collect();
    listed.sort();
    assert_eq!(
        listed, on_disk,
        "the `scenarios!` list in prober/tests/lab.rs and the scenario folders differ"
    );
}

/// `file` (relative to the repository) passes `prober lab run` in a lab of its own, which leaves
/// no namespace behind and the root namespace as it was.
fn scenario_holds(file: &str) {
    if !require_root() {
        return;
    }
    let index = LISTED.iter().position(|f| *f == file).unwrap();
    let state = StateDir::new(&format!("scen{index}"));
    // Its own lab name (the run's tag and its index): scenarios never share a lab.
    let name = lab_name(&format!("s{index}"));
    let before = root_netns_state();
    let path = root().join(file);
    let out = lab(
        &["run", "--scenario", path.to_str().unwrap(), "--name", &name],
        &state,
    );
    let report = text(&out);
    assert!(out.status.success(), "{file} failed:\n{report}");
    assert!(report.contains(" passed, 0 failed\n"), "{report}");
    assert!(
        netns_with(&format!("plab-{name}-")).is_empty(),
        "{file} left namespaces behind"
    );
    assert_eq!(root_netns_state(), before, "the root namespace changed");
}

#[test]
fn up_status_down_and_only_prefixed_namespaces() {
    if !require_root() {
        return;
    }
    let state = StateDir::new("updown");
    let name = lab_name("ud");
    let ns = |node: &str| format!("plab-{name}-{node}");
    let before_all = netns_with("");
    let before_root = root_netns_state();
    let out = lab(&["up", "--name", &name], &state);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("inventory: "), "{}", text(&out));
    let added: Vec<String> = netns_with("")
        .into_iter()
        .filter(|n| !before_all.contains(n))
        .collect();
    assert_eq!(
        added.len(),
        9,
        "3 nodes, 3 pods, DNS pod, switch, router: {added:?}"
    );
    assert!(added.iter().all(|n| n.starts_with(&ns(""))), "{added:?}");
    let inv = state.0.join(format!("plab-{name}/inventory.yaml"));
    let inventory = std::fs::read_to_string(&inv).unwrap();
    assert!(
        inventory.contains(&ns("n1")) && inventory.contains("192.168.56.10:6443"),
        "{inventory}"
    );
    // Ready means warm: every neighbour already resolved, so no first packet waits on ARP and a
    // healthy lab shows its real latency from the first probe.
    let neigh = |ns: &str| {
        let out = Command::new("ip")
            .args(["netns", "exec", ns, "ip", "-4", "neigh", "show"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let resolved = |table: &str, addr: &str| {
        table
            .lines()
            .any(|l| l.starts_with(&format!("{addr} ")) && l.contains("lladdr"))
    };
    let n1 = neigh(&ns("n1"));
    assert!(
        resolved(&n1, "192.168.56.11")
            && resolved(&n1, "192.168.56.12")
            && resolved(&n1, "10.244.1.2"),
        "n1 has resolved its peers and its pod: {n1}"
    );
    let pod = neigh(&ns("n1p0"));
    assert!(
        resolved(&pod, "10.244.1.1"),
        "the pod has resolved its gateway: {pod}"
    );
    let status = lab(&["status"], &state);
    assert!(
        text(&status).contains(&name) && text(&status).contains("3 nodes"),
        "{}",
        text(&status)
    );
    let again = lab(&["up", "--name", &name], &state);
    assert_eq!(
        again.status.code(),
        Some(2),
        "a second lab with the same name is refused"
    );
    assert!(text(&again).contains("already exists"), "{}", text(&again));
    let down = lab(&["down", &name], &state);
    assert!(down.status.success(), "{}", text(&down));
    assert!(netns_with(&ns("")).is_empty());
    assert!(
        !state.0.join(format!("plab-{name}")).exists(),
        "state removed"
    );
    assert_eq!(
        root_netns_state(),
        before_root,
        "the root namespace changed"
    );
}

/// Starts `lab up` and waits until some of its namespaces exist.
fn start_up_and_wait(name: &str, nodes: &str, state: &StateDir) -> std::process::Child {
    let child = Command::new(prober())
        .args(["lab", "up", "--name", name, "--nodes", nodes, "--state-dir"])
        .arg(&state.0)
        .env("PROBER_AGENT_BIN", agent())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while netns_with(&format!("plab-{name}-")).len() < 3 {
        assert!(Instant::now() < deadline, "lab {name} never started");
        std::thread::sleep(Duration::from_millis(5));
    }
    child
}

#[test]
fn ctrl_c_midway_tears_down() {
    if !require_root() {
        return;
    }
    let state = StateDir::new("sigint");
    let name = lab_name("int");
    let mut child = start_up_and_wait(&name, "60", &state);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = child.wait().unwrap();
    // 60 nodes take seconds to build: the signal lands midway and the handler tears down.
    assert_eq!(status.code(), Some(130), "{status}");
    assert!(
        netns_with(&format!("plab-{name}-")).is_empty(),
        "left behind: {:?}",
        netns_with(&format!("plab-{name}-"))
    );
}

/// A killed `lab up` leaves namespaces behind; `lab down NAME` removes them and every process in
/// them. `--all` would reach every lab on the machine, other people's too: a test only asks it,
/// with `--dry-run`, to list what it would remove, and checks that the list names this lab and
/// that nothing was removed.
#[test]
fn killed_midway_then_down_by_name_removes_its_leftovers() {
    if !require_root() {
        return;
    }
    let state = StateDir::new("kill");
    let name = lab_name("kill");
    let prefix = format!("plab-{name}-");
    let mut child = start_up_and_wait(&name, "60", &state);
    child.kill().unwrap();
    let _ = child.wait();
    // An `ip` command the killed run had just started finishes on its own; "later" means later.
    std::thread::sleep(Duration::from_millis(500));
    let left = netns_with(&prefix);
    assert!(!left.is_empty(), "a SIGKILL leaves namespaces behind");
    let dry = lab(&["down", "--all", "--dry-run"], &state);
    assert!(dry.status.success(), "{}", text(&dry));
    assert!(
        text(&dry).contains("would remove") && text(&dry).contains(&format!("  {name} (")),
        "--all --dry-run lists this lab: {}",
        text(&dry)
    );
    assert!(
        netns_with(&prefix).len() >= left.len(),
        "--dry-run removed nothing"
    );
    let out = lab(&["down", &name], &state);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        netns_with(&prefix).is_empty(),
        "down {name} removed its leftovers: {:?}",
        netns_with(&prefix)
    );
    // No lab process survives either (killed processes may take a moment to be reaped).
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let ps = Command::new("pgrep")
            .args(["-a", "-f", &prefix])
            .output()
            .unwrap();
        let left = String::from_utf8_lossy(&ps.stdout).trim().to_string();
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "processes left: {left}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn twenty_nodes() {
    if !require_root() {
        return;
    }
    let state = StateDir::new("twenty");
    let name = lab_name("20");
    let dir = state.0.join("scenario.yaml");
    std::fs::write(
        &dir,
        [
            "name: twenty",
            "nodes: 20",
            "controlPlanes: 3",
            "zones:",
            "  - {name: a, nodes: [n1, n2, n3, n4, n5, n6, n7, n8, n9, n10]}",
            "  - {name: b, nodes: [n11, n12, n13, n14, n15, n16, n17, n18, n19, n20]}",
            "expect:",
            "  reachability:",
            "    - {from: n1/pod, to: n20/pod, probe: tcp, outcome: ok}",
            "    - {from: n20/pod, to: n11/pod, probe: udp, outcome: ok}",
            "    - {from: n17/host, to: service/kubernetes, probe: tls, outcome: ok}",
            "    - {from: n9/pod, to: service/kube-dns, probe: dns, outcome: ok}",
            "    - {from: n5/host, to: n15/vtep, probe: vtep, outcome: ok}",
        ]
        .join("\n"),
    )
    .unwrap();
    let out = lab(
        &["run", "--scenario", dir.to_str().unwrap(), "--name", &name],
        &state,
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("5 passed, 0 failed\n"),
        "{}",
        text(&out)
    );
    assert!(netns_with(&format!("plab-{name}-")).is_empty());
}

#[test]
fn bad_input_is_named() {
    if !require_root() {
        return;
    }
    let state = StateDir::new("bad");
    let file = state.0.join("bad.yaml");
    std::fs::write(
        &file,
        "nodes: 3\nfaults: [{kind: mtu, node: n7, mtu: 1400}]\n",
    )
    .unwrap();
    let out = lab(&["run", "--scenario", file.to_str().unwrap()], &state);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains("faults[0].node") && text(&out).contains("n7"),
        "{}",
        text(&out)
    );
    let missing = Command::new(prober())
        .args([
            "lab",
            "up",
            "--agent-bin",
            "/nonexistent/probe-pod",
            "--state-dir",
        ])
        .arg(&state.0)
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        text(&missing).contains("/nonexistent/probe-pod"),
        "{}",
        text(&missing)
    );
    let down = lab(&["down"], &state);
    assert_eq!(down.status.code(), Some(2), "down needs names or --all");
}

/// A name in a scenario that would become a namespace, a file or a line of an `ip -batch` is
/// refused before anything is built: a newline in `candidate.name` once injected `netns exec
/// ... touch FILE` into the batch and ran it as root, and a space left a namespace `lab down`
/// could not match.
#[test]
fn scenario_names_never_reach_a_command() {
    if !require_root() {
        return;
    }
    let state = StateDir::new("inject");
    let proof = state.0.join("injected");
    let name = lab_name("inj");
    let evil = [
        format!(
            "candidate: {{name: \"new\\nnetns exec plab-{name}-rt touch {}\"}}\n",
            proof.display()
        ),
        "candidate: {name: \"new one\"}\n".to_string(),
        "candidate: {name: \"../../../etc\"}\n".to_string(),
        "candidate: {name: rt}\n".to_string(),
        "zones: [{name: \"a\\nb\", nodes: [n1]}]\n".to_string(),
    ];
    for (i, yaml) in evil.iter().enumerate() {
        let file = state.0.join(format!("evil{i}.yaml"));
        std::fs::write(&file, yaml).unwrap();
        let out = lab(
            &["run", "--scenario", file.to_str().unwrap(), "--name", &name],
            &state,
        );
        let said = text(&out);
        assert_eq!(out.status.code(), Some(2), "{yaml}: {said}");
        assert!(
            said.contains("candidate.name") || said.contains("zones[0].name"),
            "{yaml}: the error names the field: {said}"
        );
        assert!(!proof.exists(), "{yaml}: a command from the scenario ran");
        assert!(
            netns_with(&format!("plab-{name}")).is_empty(),
            "{yaml}: left {:?}",
            netns_with(&format!("plab-{name}"))
        );
    }
}

/// Ctrl-C while `lab run` is probing keeps what was gathered: the partial report is printed,
/// `--save` is written, then the lab is torn down (its inventory included) and the exit is 130.
#[test]
fn ctrl_c_during_the_matrix_keeps_the_report() {
    use std::io::BufRead as _;
    if !require_root() {
        return;
    }
    let state = StateDir::new("runint");
    let saved = state.0.join("report.json");
    let scenario = root().join("tests/scenarios/flannel-8472.yaml");
    let name = lab_name("irun");
    let mut child = Command::new(prober())
        .args(["lab", "run", "--name", &name, "--scenario"])
        .arg(&scenario)
        .arg("--save")
        .arg(&saved)
        .arg("--state-dir")
        .arg(&state.0)
        .env("PROBER_AGENT_BIN", agent())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap_or_default());
    // Once the lab says it is ready the matrix starts; the dropped VXLAN port keeps it busy
    // for seconds (timeouts and their retries).
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut err_lines = stderr.lines();
    for line in err_lines.by_ref() {
        if line.unwrap_or_default().contains("lab: ready") {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let rest: Vec<String> = err_lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    let report = reader.join().unwrap();
    assert_eq!(status.code(), Some(130), "{report}\n{}", rest.join("\n"));
    assert!(
        report.contains("interrupted: results are partial"),
        "{report}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&saved).expect("--save written")).unwrap();
    assert_eq!(json["schema"], "prober.report/v1");
    assert!(
        netns_with(&format!("plab-{name}-")).is_empty(),
        "{:?}",
        netns_with(&format!("plab-{name}-"))
    );
    assert!(
        !state.0.join(format!("plab-{name}")).exists(),
        "the lab's state (inventory.yaml) is left behind"
    );
}

/// `lab run -o json` prints the report alone on stdout (so `| jq` takes it); the scenario, its
/// expectations and the verdict go to stderr.
#[test]
fn lab_run_with_a_machine_format_prints_only_the_report() {
    if !require_root() {
        return;
    }
    let state = StateDir::new("json");
    let name = lab_name("json");
    let scenario = root().join("tests/scenarios/healthy.yaml");
    let out = lab(
        &[
            "run",
            "--scenario",
            scenario.to_str().unwrap(),
            "--name",
            &name,
            "-o",
            "json",
        ],
        &state,
    );
    assert!(out.status.success(), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON report: {e}: {}", text(&out)));
    assert_eq!(report["schema"], "prober.report/v1");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("expectations:") && err.contains(" passed, 0 failed"),
        "{err}"
    );
}

/// `scripts/cleanup-netns` needs the prefix of a run's own namespaces: without one it removes
/// nothing and says how to call it.
#[test]
fn cleanup_netns_needs_a_prefix() {
    let out = Command::new(root().join("scripts/cleanup-netns"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("usage: scripts/cleanup-netns PREFIX"));
}

/// A lab taken down when the test ends, passed or failed.
struct Down<'a>(&'a StateDir, String);

impl Drop for Down<'_> {
    fn drop(&mut self) {
        let _ = lab(&["down", &self.1], self.0);
    }
}

/// `lab up` on a preflight scenario says what the next command needs: the candidate's name,
/// address, exec prefix and host root, and a `prober preflight` line that, run with exactly
/// those values, checks the (healthy) join.
#[test]
fn up_on_a_preflight_scenario_prints_the_candidate_and_its_check() {
    if !require_root() {
        return;
    }
    let state = StateDir::new("upcand");
    let name = lab_name("uc");
    let scenario = root().join("tests/scenarios/preflight/healthy-join.yaml");
    let out = lab(
        &[
            "up",
            "--name",
            &name,
            "--scenario",
            scenario.to_str().unwrap(),
        ],
        &state,
    );
    let _down = Down(&state, name.clone());
    assert!(out.status.success(), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    let home = state.0.join(format!("plab-{name}"));
    let inventory = home.join("inventory.yaml");
    let host_root = home.join("nodes").join("new");
    let exec = format!("ip netns exec plab-{name}-new");
    for line in [
        "candidate: new 192.168.57.249 (worker), not joined".to_string(),
        format!("  exec prefix: {exec}"),
        format!("  host root:   {}", host_root.display()),
        format!(
            "check its join with: prober preflight --inventory {} --candidate new \
             --candidate-address 192.168.57.249 --candidate-exec '{exec}' \
             --candidate-host-root {}",
            inventory.display(),
            host_root.display()
        ),
    ] {
        assert!(
            said.lines().any(|l| l == line),
            "no line {line:?} in:\n{said}"
        );
    }
    let check = Command::new(prober())
        .args(["preflight", "--inventory"])
        .arg(&inventory)
        .args([
            "--candidate",
            "new",
            "--candidate-address",
            "192.168.57.249",
        ])
        .args(["--candidate-exec", &exec, "--candidate-host-root"])
        .arg(&host_root)
        .arg("--agent-bin")
        .arg(agent())
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(0), "{}", text(&check));
}
