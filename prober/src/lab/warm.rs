//! Warming: a lab is ready when its first packets are not lost. Right after wiring, every
//! neighbour cache is empty, so the matrix's first SYN on each path waits on resolution and a
//! healthy lab shows a retransmission's second as latency. Before the lab says `ready`, every
//! node sends one ICMP echo to every other node and its own pods, and every pod to every other
//! pod, through the agent's own engine (the lab adds no tool for it). Best effort: a path a
//! scenario breaks just fails here, within a second.

use std::io::Write;
use std::net::Ipv4Addr;
use std::num::{NonZeroU32, NonZeroU64};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use probe_proto::{IcmpProbe, Plan, Probe, ProbeSpec};

use super::build::Layout;

/// Each echo's wait; the whole warm-up is bounded by this plus process start-up.
const ECHO_TIMEOUT_MS: u64 = 1000;
/// After this every warming process still running is killed.
const DEADLINE: Duration = Duration::from_secs(5);

/// Who pings whom: (namespace, addresses).
fn pairs(l: &Layout) -> Vec<(String, Vec<Ipv4Addr>)> {
    let pods: Vec<(&str, Ipv4Addr)> = l
        .nodes
        .iter()
        .flat_map(|n| n.pods.iter().map(|p| (p.ns.as_str(), p.address)))
        .collect();
    let mut out = Vec::new();
    for n in &l.nodes {
        let mut to: Vec<Ipv4Addr> = l
            .nodes
            .iter()
            .filter(|o| o.name != n.name)
            .map(|o| o.address)
            .collect();
        to.extend(n.pods.iter().map(|p| p.address));
        out.push((n.ns.clone(), to));
    }
    for (ns, _) in &pods {
        let to = pods
            .iter()
            .filter(|(o, _)| o != ns)
            .map(|(_, a)| *a)
            .collect();
        out.push(((*ns).to_string(), to));
    }
    out
}

/// The plan: one ICMP echo to each address, in the agent's own wire types.
fn plan(to: &[Ipv4Addr]) -> String {
    let ms = |v: u64| NonZeroU64::new(v).expect("non-zero constant");
    let plan = Plan {
        deadline_ms: ms(ECHO_TIMEOUT_MS * 2),
        concurrency: NonZeroU32::new(64).expect("non-zero constant"),
        probe_timeout_ms: ms(ECHO_TIMEOUT_MS),
        probes: to
            .iter()
            .enumerate()
            .map(|(i, &address)| ProbeSpec {
                id: format!("warm-{i}"),
                timeout_ms: None,
                probe: Probe::Icmp(IcmpProbe {
                    address: address.into(),
                }),
            })
            .collect(),
    };
    serde_json::to_string(&plan).unwrap_or_default()
}

/// Warms every path of `l` at once. Best effort: a run that cannot start or finish is let go.
pub fn warm(l: &Layout, agent_bin: &Path) {
    let mut children: Vec<Child> = Vec::new();
    for (ns, to) in pairs(l) {
        if to.is_empty() {
            continue;
        }
        let child = Command::new("ip")
            .args(["netns", "exec", &ns])
            .arg(agent_bin)
            .args(["probe", "--plan", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        if let Ok(mut c) = child {
            if let Some(mut stdin) = c.stdin.take() {
                let _ = stdin.write_all(plan(&to).as_bytes());
            }
            children.push(c);
        }
    }
    let deadline = Instant::now() + DEADLINE;
    for mut c in children {
        loop {
            match c.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                _ => {
                    let _ = c.kill();
                    let _ = c.wait();
                    break;
                }
            }
        }
    }
}
