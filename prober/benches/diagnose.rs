//! Diagnosis on a synthetic 1,000-node result set (about a million results): wall time and peak
//! memory, printed, never asserted. `cargo bench -p prober --bench diagnose`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Instant;

use probe_proto::{MacAddr, Outcome, ProbeResult};
use prober::diagnose::diagnose;
use prober::inventory::{Agent, Agents, Api, Cidr, Cluster, Cni, Inventory, Node, Overlay, Vtep};
use prober::model::{
    AgentKind, AgentRef, AgentStatus, PathClass, Protocol, ResultRecord, Target, Unknown,
};

const NODES: u32 = 1000;
/// Nodes behind a firewall that drops UDP 8472 to and from everyone else.
const FIREWALLED: u32 = 3;

fn addr(i: u32) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 0, 0, 0)) + i + 1)
}

fn pod(i: u32) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(100, 64, 0, 2)) + (i << 8))
}

fn inventory() -> Inventory {
    let cidr = |s: &str| Cidr::try_from(s.to_string()).unwrap();
    let nodes = (0..NODES)
        .map(|i| Node {
            name: format!("n{i}"),
            roles: if i == 0 {
                vec!["control-plane".into()]
            } else {
                Vec::new()
            },
            address: addr(i),
            address6: None,
            pod_cidr: Some(Cidr::v4(Ipv4Addr::from(u32::from(pod(i)) - 2), 24)),
            pod_cidrs: Vec::new(),
            host_root: None,
            vtep: Some(Vtep {
                address: Ipv4Addr::from(u32::from(pod(i)) - 2),
                mac: Some(MacAddr([
                    2,
                    0,
                    0,
                    0,
                    i.to_be_bytes()[2],
                    i.to_be_bytes()[3],
                ])),
            }),
            vtep6: None,
            zone: None,
            serves: None,
            agents: Agents {
                host: Some(Agent {
                    exec: vec!["true".into()],
                    address: addr(i),
                    address6: None,
                    port: probe_proto::Port::new(9917).unwrap(),
                }),
                pod: Some(Agent {
                    exec: vec!["true".into()],
                    address: pod(i),
                    address6: None,
                    port: probe_proto::Port::new(9917).unwrap(),
                }),
            },
        })
        .collect();
    Inventory {
        cluster: Cluster {
            cni: Cni::Flannel,
            pod_cidr: cidr("100.64.0.0/10"),
            pod_cidrs: Vec::new(),
            service_cidr: cidr("10.96.0.0/12"),
            service_cidrs: Vec::new(),
            overlay: Some(Overlay::Vxlan {
                port: probe_proto::Port::new(8472).unwrap(),
                vni: probe_proto::Vni::new(1).unwrap(),
                mtu: None,
            }),
            api: Api {
                service: "10.96.0.1:443".parse().unwrap(),
                services: Vec::new(),
                endpoints: vec![SocketAddr::from((addr(0), 6443))],
            },
            dns: None,
            bgp: None,
            node_files: None,
            policies: Vec::new(),
            agents_namespace: None,
        },
        nodes,
        components: Vec::new(),
        agent_bin: None,
    }
}

fn record(
    path: PathClass,
    from: (u32, AgentKind),
    to: (u32, Option<AgentKind>, IpAddr, u16, Protocol),
    outcome: Outcome,
    id: String,
) -> ResultRecord {
    let mut result = ProbeResult::new(
        id,
        outcome,
        if outcome.is_ok() {
            "ok"
        } else {
            "no answer within 2000 ms"
        },
    );
    if outcome.is_ok() {
        result.rtt_micros = Some(400);
    }
    ResultRecord {
        unknown: None,
        path,
        from: AgentRef {
            node: format!("n{}", from.0),
            agent: from.1,
        },
        to: Target {
            node: Some(format!("n{}", to.0)),
            agent: to.1,
            service: None,
            address: to.2,
            port: Some(to.3),
            protocol: to.4,
        },
        result,
    }
}

#[allow(clippy::too_many_lines)] // one linear script: build, diagnose, print, twice
fn main() {
    let inv = inventory();
    let fw = |i: u32| i >= NODES - FIREWALLED;
    let crosses = |a: u32, b: u32| fw(a) != fw(b);
    let started = Instant::now();
    let mut results: Vec<ResultRecord> = Vec::with_capacity((NODES * NODES) as usize + 10_000);
    for a in 0..NODES {
        for b in 0..NODES {
            let o = if a != b && crosses(a, b) {
                Outcome::Timeout
            } else {
                Outcome::Ok
            };
            results.push(record(
                PathClass::PodToPod,
                (a, AgentKind::Pod),
                (
                    b,
                    Some(AgentKind::Pod),
                    IpAddr::V4(pod(b)),
                    9917,
                    Protocol::Tcp,
                ),
                o,
                format!("pod-to-pod:n{a}/pod->n{b}/pod:tcp/9917"),
            ));
            // The firewalled nodes' underlay checks: VXLAN receipts and the kubelet port.
            if a != b && (fw(a) || fw(b)) {
                let vx = if crosses(a, b) {
                    Outcome::Timeout
                } else {
                    Outcome::Ok
                };
                results.push(record(
                    PathClass::Overlay,
                    (a, AgentKind::Host),
                    (
                        b,
                        Some(AgentKind::Host),
                        IpAddr::V4(addr(b)),
                        8472,
                        Protocol::Udp,
                    ),
                    vx,
                    format!("overlay:n{a}/host->n{b}/host:vxlan/8472"),
                ));
                results.push(record(
                    PathClass::NodeToNode,
                    (a, AgentKind::Host),
                    (b, None, IpAddr::V4(addr(b)), 10250, Protocol::Tcp),
                    Outcome::Ok,
                    format!("node-to-node:n{a}/host->n{b}/host:tcp/10250"),
                ));
            }
        }
    }
    let built = started.elapsed();
    let rss = || {
        nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF)
            .map_or(0, |u| u.max_rss() / 1024)
    };
    let store = prober::model::Results::of(&results);
    let rss_before = rss();
    let t = Instant::now();
    let findings = diagnose(&inv, &store, &[]);
    let took = t.elapsed();
    let failed = results.iter().filter(|r| !r.result.outcome.is_ok()).count();
    println!(
        "{NODES} nodes: {} results ({failed} failed), built in {:.2} s",
        results.len(),
        built.as_secs_f64()
    );
    println!(
        "diagnose: {:.2} s; peak RSS {} MB before diagnosis, {} MB after",
        took.as_secs_f64(),
        rss_before,
        rss()
    );
    for f in &findings {
        println!(
            "  {:?} {:?}: {} (evidence {}, consequences {})",
            f.kind(),
            f.severity,
            f.summary.chars().take(90).collect::<String>(),
            f.evidence.len(),
            f.consequences.len()
        );
    }
    assert!(!findings.is_empty());

    // Every agent missing: every result unknown. The diagnosis must stay linear in the results,
    // however many agents are missing.
    let agents: Vec<AgentStatus> = (0..NODES)
        .flat_map(|i| {
            [AgentKind::Host, AgentKind::Pod].map(|agent| AgentStatus {
                node: format!("n{i}"),
                agent,
                ran: false,
                detail: "exec failed".into(),
            })
        })
        .collect();
    for r in &mut results {
        r.unknown = Some(Unknown::AgentFailed);
        r.result.outcome = Outcome::Error;
    }
    let store = prober::model::Results::of(&results);
    let t = Instant::now();
    let missing = diagnose(&inv, &store, &agents);
    println!(
        "every agent missing ({} agents, {} results): diagnose {:.2} s, {} findings, peak RSS {} MB",
        agents.len(),
        results.len(),
        t.elapsed().as_secs_f64(),
        missing.len(),
        rss()
    );
    assert_eq!(missing.len(), agents.len());
}
