//! The API stand-in with N stub nodes, for `bench/api-scale.sh`: writes its kubeconfig, then serves until SIGTERM or SIGINT.
//!
//! `standin_scale --nodes N --dir DIR --agent PROBE_POD [--round-trip-ms 100]
//! [--probe-phase-ms 2000]`. The nodes are no lab namespaces and the agents are stubs
//! (`probe-pod probe --simulate`: nothing is sent on any network). Dev-only: an example of the
//! test kit, never part of a shipped binary.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use nix::sys::signal::{SigSet, Signal};
use test_kit::standin::{Config, StandIn, Stub, seed, stub};

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
    let root = match stub::node_root(&args.dir) {
        Ok(r) => r,
        Err(e) => {
            eprintln!(
                "standin_scale: cannot make the nodes' root under {}: {e}",
                args.dir.display()
            );
            return ExitCode::FAILURE;
        }
    };
    let c = stub::cluster(args.nodes);
    let nodes = stub::nodes(&c, &root);
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
