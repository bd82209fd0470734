//! The API stand-in with N stub nodes, for `bench/api-scale.sh`: writes its kubeconfig, then serves until SIGTERM or SIGINT.
//!
//! `standin_scale --nodes N --dir DIR --agent PROBE_POD [--round-trip-ms 100]
//! [--probe-phase-ms 2000]`. The nodes are no lab namespaces and the agents are stubs
//! (`probe-pod probe --simulate`: nothing is sent on any network). Dev-only: an example of the
//! test kit, never part of a shipped binary.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use nix::sys::signal::{SigSet, Signal};
use test_kit::standin::{Config, NodeSpec, StandIn, Stub, seed};

struct Args {
    nodes: usize,
    dir: PathBuf,
    agent: PathBuf,
    round_trip: Duration,
    probe_phase: Duration,
}

fn parse() -> Result<Args, String> {
    let mut nodes = None;
    let mut dir = None;
    let mut agent = None;
    let mut round_trip = Duration::from_millis(100);
    let mut probe_phase = Duration::from_secs(2);
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let ms = |v: &str| {
            v.parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|e| format!("{flag} {v:?}: not a number of milliseconds ({e})"))
        };
        match flag.as_str() {
            "--nodes" => {
                let n: usize = value
                    .parse()
                    .map_err(|e| format!("--nodes {value:?}: not a number ({e})"))?;
                if !(1..=60_000).contains(&n) {
                    return Err(format!("--nodes {n}: between 1 and 60000"));
                }
                nodes = Some(n);
            }
            "--dir" => dir = Some(PathBuf::from(value)),
            "--agent" => agent = Some(PathBuf::from(value)),
            "--round-trip-ms" => round_trip = ms(&value)?,
            "--probe-phase-ms" => probe_phase = ms(&value)?,
            other => return Err(format!("unknown flag {other:?}")),
        }
    }
    Ok(Args {
        nodes: nodes.ok_or("--nodes is required")?,
        dir: dir.ok_or("--dir is required")?,
        agent: agent.ok_or("--agent is required (the probe-pod binary)")?,
        round_trip,
        probe_phase,
    })
}

/// Node `i`'s address and pod range's base: 10.(10 + i/250).(i/250).(i%250 + 1), 10.(64 + i/256).(i%256).0.
fn addresses(i: usize) -> (Ipv4Addr, Ipv4Addr) {
    let b = |x: usize| u8::try_from(x).unwrap_or(u8::MAX);
    (
        Ipv4Addr::new(10, b(10 + i / 250), b(i / 250), b(i % 250 + 1)),
        Ipv4Addr::new(10, b(64 + i / 256), b(i % 256), 0),
    )
}

fn cluster(n: usize) -> seed::Cluster {
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

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("standin_scale: {e}");
            return ExitCode::from(2);
        }
    };
    // SIGTERM and SIGINT are waited for below: blocked before any thread starts, so every
    // thread inherits the mask and none dies of them.
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGTERM);
    signals.add(Signal::SIGINT);
    if let Err(e) = signals.thread_block() {
        eprintln!("standin_scale: cannot block SIGTERM and SIGINT: {e}");
        return ExitCode::FAILURE;
    }
    // Every node's `/`: the one file the host agent mounts (`hostPath` of type `File`).
    let root = args.dir.join("node-root");
    let made = std::fs::create_dir_all(root.join("etc"))
        .and_then(|()| std::fs::write(root.join("etc/resolv.conf"), "nameserver 10.96.0.10\n"));
    if let Err(e) = made {
        eprintln!("standin_scale: cannot create {}: {e}", root.display());
        return ExitCode::FAILURE;
    }
    let c = cluster(args.nodes);
    let nodes = c
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let (_, pods) = addresses(i);
            let o = pods.octets();
            NodeSpec {
                name: n.name.clone(),
                // Names only: a stub node has no namespace and nothing ever enters one.
                netns: format!("stub-host-{i}"),
                address: n.address,
                pod_sandboxes: vec![(format!("stub-pod-{i}"), Ipv4Addr::new(o[0], o[1], o[2], 2))],
                root: root.clone(),
            }
        })
        .collect();
    let mut config = Config::new(&args.dir.join("standin"), nodes, &args.agent);
    config.stub = Some(Stub {
        exec_round_trip: args.round_trip,
        probe_phase: args.probe_phase,
    });
    let standin = match StandIn::start(config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("standin_scale: {e}");
            return ExitCode::FAILURE;
        }
    };
    standin.seed(seed::objects(&c));
    println!("{}", standin.kubeconfig.display());
    let waited = signals.wait();
    drop(standin);
    match waited {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("standin_scale: waiting for a signal: {e}");
            ExitCode::FAILURE
        }
    }
}
