//! The lab's long-running programs: DNS servers, the API server stand-in and the agents.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use super::{API_PORT, API_SERVICE, API_SERVICE6, DNS_SERVICE, DNS_SERVICE6, LabNode, Layout};
use crate::lab::scenario::{Fault, OverlayMode, Scenario};
use probe_proto::Port;

/// A long-running program the lab starts in one of its namespaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    pub ns: String,
    pub argv: Vec<String>,
    /// For logs and messages: `host-agent`, `apiserver`, ...
    pub what: &'static str,
}

fn dnsmasq(listen: Ipv4Addr, extra: &[String]) -> Vec<String> {
    let mut v: Vec<String> = [
        "dnsmasq",
        "-k",
        "--no-resolv",
        "--no-hosts",
        "--conf-file=/dev/null",
        "--bind-interfaces",
        "--port=53",
        // No cache: every probe must reach the server it names.
        "--cache-size=0",
        "--pid-file=",
        "--user=root",
        "--log-facility=-",
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    v.push(format!("--listen-address={listen}"));
    v.extend(extra.iter().cloned());
    v
}

/// The user-space tunnel of a node whose overlay this kernel has no device for: IP-in-IP or
/// Geneve to every other node, by their pod networks.
fn tunnel(s: &Scenario, l: &Layout, n: &LabNode, agent: &str) -> Option<Process> {
    let mode = match s.overlay().mode() {
        OverlayMode::Vxlan | OverlayMode::None => return None,
        OverlayMode::Ipip => "ipip",
        OverlayMode::Geneve | OverlayMode::Wireguard => "geneve",
    };
    let peers: Vec<String> = l
        .nodes
        .iter()
        .filter(|p| p.name != n.name)
        .map(|p| format!("{}={}", p.pod_cidr, p.address))
        .collect();
    Some(Process {
        ns: n.ns.clone(),
        argv: vec![
            agent.to_string(),
            "tunnel".into(),
            "--device".into(),
            super::overlay_device(s).into(),
            "--mode".into(),
            mode.into(),
            "--vni".into(),
            super::vni(s).to_string(),
            "--port".into(),
            s.overlay().port().map_or(0, Port::get).to_string(),
            "--peer".into(),
            peers.join(","),
        ],
        what: "tunnel",
    })
}

/// The cluster DNS pod's server: the cluster's names, everything else forwarded upstream (to
/// itself, through its Service, in a DNS loop).
fn cluster_dns(s: &Scenario, l: &Layout) -> Process {
    let forward = if s.faults.iter().any(|f| matches!(f, Fault::DnsLoop)) {
        IpAddr::V4(DNS_SERVICE)
    } else {
        l.upstream_resolver()
    };
    // Dual-stack: the cluster DNS answers on its IPv6 address too, and its names have AAAA
    // records (the lab's Services are dual-stack).
    let (v6_listen, api6, dns6) = match l.dns_pod.address6 {
        Some(a) => (
            vec![format!("--listen-address={a}")],
            format!(",{API_SERVICE6}"),
            format!(",{DNS_SERVICE6}"),
        ),
        None => (Vec::new(), String::new(), String::new()),
    };
    let mut cluster_dns = vec![
        "--local=/cluster.local/".into(),
        format!("--host-record=kubernetes.default.svc.cluster.local,{API_SERVICE}{api6}"),
        format!("--host-record=kube-dns.kube-system.svc.cluster.local,{DNS_SERVICE}{dns6}"),
        format!("--server={forward}"),
    ];
    cluster_dns.extend(v6_listen);
    Process {
        ns: l.dns_pod.ns.clone(),
        argv: dnsmasq(l.dns_pod.address, &cluster_dns),
        what: "cluster-dns",
    }
}

/// The servers and agents of the lab: the "external" resolver on the router, the cluster DNS pod,
/// the API server stand-in on every control-plane node, and an agent in every node and pod.
#[must_use]
pub fn processes(s: &Scenario, l: &Layout, agent: &Path, prober: &Path) -> Vec<Process> {
    let mut out = vec![Process {
        ns: l.router_ns.clone(),
        // Documentation addresses (never a real one); AAAA too where the lab has IPv6.
        argv: dnsmasq(
            l.upstream_dns,
            &std::iter::once("--address=/example.com/192.0.2.10".to_string())
                .chain(
                    s.dual_stack()
                        .then(|| {
                            [
                                "--address=/example.com/2001:db8::10".to_string(),
                                format!("--listen-address={}", super::layout::zone_router6(0)),
                            ]
                        })
                        .into_iter()
                        .flatten(),
                )
                .collect::<Vec<_>>(),
        ),
        what: "upstream-dns",
    }];
    out.push(cluster_dns(s, l));
    // Dual-stack servers listen on `::`, which takes IPv4 peers too.
    let any = if s.dual_stack() { "[::]" } else { "0.0.0.0" };
    let pki = l.state_dir.join("pki");
    let path = |p: PathBuf| p.display().to_string();
    for n in l.nodes.iter().filter(|n| n.control_plane) {
        let mut argv = vec![
            path(prober.to_path_buf()),
            "lab".into(),
            "apiserver".into(),
            "--listen".into(),
            format!("{any}:{API_PORT}"),
            "--cert".into(),
            path(pki.join("apiserver.crt")),
            "--key".into(),
            path(pki.join("apiserver.key")),
            "--tokens".into(),
            path(pki.join("tokens")),
        ];
        argv.extend(super::candidate::apiserver_skew(s));
        out.push(Process {
            ns: n.ns.clone(),
            argv,
            what: "apiserver",
        });
    }
    let agent = path(agent.to_path_buf());
    for n in &l.nodes {
        // The host agent also stands in for what listens on a real node: the kubelet, etcd on
        // control planes, and the CNI's TCP ports.
        // (The API server's own port is the stand-in's, not the agent's.)
        let ports = crate::plan::served_tcp_ports(s.cni, n.control_plane);
        let list: Vec<String> = ports
            .iter()
            .filter(|&&p| p != API_PORT)
            .map(u16::to_string)
            .collect();
        let mut argv = vec![
            agent.clone(),
            "serve".into(),
            "--extra-tcp-port".into(),
            list.join(","),
        ];
        if s.dual_stack() {
            argv.extend(["--listen".into(), "::".into()]);
        }
        if let Some(t) = tunnel(s, l, n, &agent) {
            // The TUN device is no kernel tunnel the sniffer would recognise by its type.
            argv.extend(["--sniff".into(), "always".into()]);
            out.push(t);
        }
        out.push(Process {
            ns: n.ns.clone(),
            argv,
            what: "host-agent",
        });
        for p in &n.pods {
            let mut argv = vec![
                agent.clone(),
                "serve".into(),
                "--sniff".into(),
                "never".into(),
            ];
            if s.dual_stack() {
                argv.extend(["--listen".into(), "::".into()]);
            }
            out.push(Process {
                ns: p.ns.clone(),
                argv,
                what: "pod-agent",
            });
        }
    }
    out.extend(super::candidate::processes(s, l, &agent));
    out
}
