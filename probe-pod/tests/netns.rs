//! Every probe outcome, proved for real: namespaces, veth, kernel VXLAN, nftables, dnsmasq and a
//! rustls server. Needs root (CI runs as root).

mod common;

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use common::tls_server::{GOOD_TOKEN, TlsServer, pki};
use common::{
    Ns, ROUTER, Routed, SERVER, assert_outcomes, link, outcome, plan, receipts, seen_on,
    tcp_sightings, udp_sightings,
};
use probe_pod::proto::Outcome;
use serde_json::json;

#[test]
fn tcp_and_udp_outcomes() {
    if !common::require_root() {
        return;
    }
    let mut net = Routed::new();
    net.server.serve(&["--sniff", "never"]);
    net.router_rule(
        "meta l4proto { tcp, udp } th dport 7001 reject with icmp type admin-prohibited; \
         meta l4proto { tcp, udp } th dport 7002 drop;",
    );
    let r = net.client.probe(&plan(
        800,
        json!([
            {"id": "tcp-ok", "kind": "tcp", "address": SERVER, "port": 9917, "echo": true},
            {"id": "tcp-refused", "kind": "tcp", "address": SERVER, "port": 9999},
            {"id": "tcp-rejected", "kind": "tcp", "address": SERVER, "port": 7001},
            {"id": "tcp-timeout", "kind": "tcp", "address": SERVER, "port": 7002},
            {"id": "tcp-unreachable", "kind": "tcp", "address": "10.77.9.9", "port": 9917},
            {"id": "udp-ok", "kind": "udp", "address": SERVER, "port": 9917},
            {"id": "udp-refused", "kind": "udp", "address": SERVER, "port": 9999},
            {"id": "udp-rejected", "kind": "udp", "address": SERVER, "port": 7001},
            {"id": "udp-timeout", "kind": "udp", "address": SERVER, "port": 7002},
            {"id": "udp-unreachable", "kind": "udp", "address": "10.77.9.9", "port": 9917},
        ]),
    ));
    assert_outcomes(
        &r,
        &[
            ("tcp-ok", Outcome::Ok),
            ("tcp-refused", Outcome::Refused),
            ("tcp-rejected", Outcome::Rejected),
            ("tcp-timeout", Outcome::Timeout),
            ("tcp-unreachable", Outcome::Unreachable),
            ("udp-ok", Outcome::Ok),
            ("udp-refused", Outcome::Refused),
            ("udp-rejected", Outcome::Rejected),
            ("udp-timeout", Outcome::Timeout),
            ("udp-unreachable", Outcome::Unreachable),
        ],
    );
    let router: IpAddr = ROUTER.parse().unwrap();
    for id in ["tcp-rejected", "udp-rejected"] {
        let icmp = r[id]
            .icmp
            .unwrap_or_else(|| panic!("{id} carries the ICMP error: {:?}", r[id]));
        assert_eq!((icmp.icmp_type, icmp.code), (3, 13), "{id}");
        assert_eq!(icmp.from, Some(router), "{id}: the router is the offender");
    }
    let refused = r["udp-refused"]
        .icmp
        .expect("port unreachable is an ICMP error");
    assert_eq!(
        (refused.icmp_type, refused.code, refused.from),
        (3, 3, Some(SERVER.parse().unwrap()))
    );
    assert!(
        r["tcp-refused"].icmp.is_none(),
        "a RST is not ICMP: {:?}",
        r["tcp-refused"]
    );
    let unreach = r["tcp-unreachable"]
        .icmp
        .expect("the router says net unreachable");
    assert_eq!((unreach.icmp_type, unreach.code), (3, 0));
    assert!(r["tcp-ok"].rtt_micros.is_some() && r["tcp-ok"].nonce.is_some());
    assert!(
        r["tcp-timeout"].detail.contains("no answer within"),
        "{:?}",
        r["tcp-timeout"]
    );
}

#[test]
fn icmp_raw_and_ping_socket() {
    if !common::require_root() {
        return;
    }
    let net = Routed::new();
    for a in ["10.77.2.3/24", "10.77.2.4/24"] {
        net.server.ip(&["addr", "add", a, "dev", "eth0"]);
    }
    net.router_rule(
        "ip daddr 10.77.2.3 icmp type echo-request drop; \
         ip daddr 10.77.2.4 icmp type echo-request reject with icmp type admin-prohibited;",
    );
    let probes = json!([
        {"id": "ok", "kind": "icmp", "address": SERVER},
        {"id": "dropped", "kind": "icmp", "address": "10.77.2.3"},
        {"id": "rejected", "kind": "icmp", "address": "10.77.2.4"},
    ]);
    let want = [
        ("ok", Outcome::Ok),
        ("dropped", Outcome::Timeout),
        ("rejected", Outcome::Rejected),
    ];
    // New namespaces disallow ping sockets ("1 0"): the raw fallback runs.
    for (range, via) in [("1 0", "raw socket"), ("0 2147483647", "ping socket")] {
        net.client.sysctl("net.ipv4.ping_group_range", range);
        let r = net.client.probe(&plan(700, probes.clone()));
        assert_outcomes(&r, &want);
        assert!(r["ok"].detail.contains(via), "{:?}", r["ok"]);
        let icmp = r["rejected"].icmp.expect("the router's ICMP error");
        assert_eq!(
            (icmp.icmp_type, icmp.code, icmp.from),
            (3, 13, Some(ROUTER.parse().unwrap())),
            "{via}"
        );
    }
}

/// Two nodes with flannel-style VXLAN: `flannel.1`, VNI 1, UDP 8472, static fdb/neigh/routes.
struct VxlanPair {
    n1: Ns,
    n2: Ns,
}

const N1: &str = "192.168.77.1";
const N2: &str = "192.168.77.2";
const MAC2: &str = "02:00:00:00:00:02";

impl VxlanPair {
    fn new() -> Self {
        let n1 = Ns::new("n1");
        let n2 = Ns::new("n2");
        link(
            &n1,
            "eth0",
            "192.168.77.1/24",
            &n2,
            "eth0",
            "192.168.77.2/24",
        );
        common::flannel_vxlan(&n1, &n2, (N1, N2));
        Self { n1, n2 }
    }
}

#[test]
fn vtep_and_crafted_vxlan_with_sniffer() {
    if !common::require_root() {
        return;
    }
    let mut pair = VxlanPair::new();
    // Auto mode: a VXLAN device exists and we are root, so the sniffer starts by itself.
    pair.n2.serve(&["--geneve-port", "6081,7081"]);
    let send = |nonce: u32| {
        json!([
            {"id": "vtep", "kind": "vtep", "address": "10.244.2.0"},
            {"id": "vx", "kind": "vxlan", "address": N2, "nonce": nonce, "innerSource": "10.244.1.0",
             "innerDestination": "10.244.2.0", "destinationMac": MAC2},
        ])
    };
    let r = pair.n1.probe(&plan(1000, send(1111)));
    assert_outcomes(&r, &[("vtep", Outcome::Ok), ("vx", Outcome::Ok)]);
    assert_eq!(r["vx"].nonce, Some(1111));
    assert_eq!(
        seen_on(&pair.n2, 1111),
        ["eth0", "flannel.1"],
        "seen on the underlay and decapsulated"
    );

    // Geneve on a port other than 6081 is seen when the sniffer is told that port (no Geneve
    // device owns it here, so it arrives on the NIC only).
    let geneve =
        json!([{"id": "gn", "kind": "geneve", "address": N2, "port": 7081, "nonce": 3333}]);
    let r = pair.n1.probe(&plan(1000, geneve));
    assert_eq!(r["gn"].nonce, Some(3333), "{:?}", r["gn"]);
    assert_eq!(seen_on(&pair.n2, 3333), ["eth0"], "geneve to 7081 seen");

    // The host firewall on n2 drops VXLAN: the NIC sees it, the VXLAN device never does.
    pair.n2.nft_chain("host", "input", "udp dport 8472 drop");
    let r = pair.n1.probe(&plan(1000, send(2222)));
    assert_outcomes(&r, &[("vtep", Outcome::Timeout), ("vx", Outcome::Ok)]);
    assert_eq!(
        seen_on(&pair.n2, 2222),
        ["eth0"],
        "seen on eth0 only: dropped by the host"
    );
    // And the sniffer data is loopback-only: n1 cannot ask n2.
    let r = pair
        .n1
        .probe(&plan(1000, json!([{"id": "s", "kind": "seen"}])));
    assert_eq!(
        r["s"].outcome,
        Outcome::Error,
        "no local agent on n1: {:?}",
        r["s"]
    );
}

#[test]
fn the_receivers_sniffer_sees_syns_and_udp_probes_before_its_firewall() {
    if !common::require_root() {
        return;
    }
    let mut net = Routed::new();
    // The sniffer starts by itself (root, TCP ports to watch), though no VXLAN device exists.
    net.server.serve(&["--receipt-tcp-port", "7002,7003"]);
    std::thread::sleep(Duration::from_millis(200));
    // 7002 dies on the router; 7003 and UDP to the agent in the server's own input chain.
    net.router_rule("meta l4proto { tcp, udp } th dport 7002 drop;");
    net.server
        .nft_chain("host", "input", "tcp dport 7003 drop; udp dport 9917 drop");
    let r = net.client.probe(&plan(
        600,
        json!([
            {"id": "tcp-ok", "kind": "tcp", "address": SERVER, "port": 9917},
            {"id": "tcp-network", "kind": "tcp", "address": SERVER, "port": 7002},
            {"id": "tcp-host", "kind": "tcp", "address": SERVER, "port": 7003},
            {"id": "udp-network", "kind": "udp", "address": SERVER, "port": 7002},
            {"id": "udp-host", "kind": "udp", "address": SERVER, "port": 9917},
        ]),
    ));
    assert_outcomes(
        &r,
        &[
            ("tcp-ok", Outcome::Ok),
            ("tcp-network", Outcome::Timeout),
            ("tcp-host", Outcome::Timeout),
            ("udp-network", Outcome::Timeout),
            ("udp-host", Outcome::Timeout),
        ],
    );
    let flow = |id: &str| {
        let src = r[id]
            .source
            .unwrap_or_else(|| panic!("{id} has its source: {:?}", r[id]));
        assert_eq!(src.ip().to_string(), common::CLIENT, "{id}");
        let port = match id {
            "tcp-ok" => 9917,
            "tcp-network" => 7002,
            _ => 7003,
        };
        json!({"from": common::CLIENT, "sourcePort": src.port(), "port": port})
    };
    let nonce = |id: &str| r[id].nonce.unwrap();
    let flows = json!([flow("tcp-ok"), flow("tcp-network"), flow("tcp-host")]);
    let nonces = [nonce("udp-network"), nonce("udp-host")];
    let s = receipts(&net.server, &flows, &nonces);
    let watched = s.watched_tcp_ports.clone().expect("the ports it watches");
    for p in [7002, 7003, 9917] {
        assert!(watched.contains(&p), "{watched:?}");
    }
    let ok = tcp_sightings(&s, &flow("tcp-ok"));
    assert!(
        ok.contains(&false) && ok.contains(&true),
        "SYN in, SYN-ACK out: {s:?}"
    );
    assert!(
        tcp_sightings(&s, &flow("tcp-network")).is_empty(),
        "never arrived: {s:?}"
    );
    let host = tcp_sightings(&s, &flow("tcp-host"));
    assert!(
        !host.is_empty() && host.iter().all(|r| !r),
        "arrived, never answered: {s:?}"
    );
    assert!(udp_sightings(&s, nonce("udp-network")).is_empty(), "{s:?}");
    assert_eq!(udp_sightings(&s, nonce("udp-host")), [false], "{s:?}");
    // Only what was asked comes back: nothing about flows nobody asked for.
    let unasked = receipts(&net.server, &json!([]), &[]);
    assert_eq!(unasked.seen.as_deref(), Some(&[][..]), "{unasked:?}");
}

#[test]
fn vxlan_to_a_node_without_vxlan_is_refused() {
    if !common::require_root() {
        return;
    }
    let a = Ns::new("a");
    let b = Ns::new("b");
    link(&a, "eth0", "192.168.78.1/24", &b, "eth0", "192.168.78.2/24");
    let r = a.probe(&plan(
        1000,
        json!([{"id": "vx", "kind": "vxlan", "address": "192.168.78.2"}]),
    ));
    assert_eq!(
        r["vx"].outcome,
        Outcome::Refused,
        "nothing owns 8472 there: {:?}",
        r["vx"]
    );
}

#[test]
fn tls_probe_against_a_real_tls_server() {
    if !common::require_root() {
        return;
    }
    let mut net = Routed::new();
    net.server.serve(&["--sniff", "never"]);
    let tmp_dir = tempfile::Builder::new()
        .prefix("ppt-tls-")
        .tempdir()
        .unwrap();
    let dir = tmp_dir.path().to_path_buf();
    let server_ip: IpAddr = SERVER.parse().unwrap();
    let good = pki(&dir.join("good"), server_ip);
    let other = pki(&dir.join("other"), server_ip);
    let _tls = TlsServer::start(&net.server.path(), (server_ip, 6443).into(), &good);
    let good_token = dir.join("good-token");
    let bad_token = dir.join("bad-token");
    std::fs::write(&good_token, format!("{GOOD_TOKEN}\n")).unwrap();
    std::fs::write(&bad_token, "eyJhbGciOiJub25lIn0.eyJzdWIiOiJvbGQifQ.b2xk\n").unwrap();
    let ca = good.ca_file.to_str().unwrap();
    let wrong_ca = other.ca_file.to_str().unwrap();
    let r = net.client.probe(&plan(
        1500,
        json!([
            {"id": "anon", "kind": "tls", "address": SERVER, "port": 6443},
            {"id": "verified", "kind": "tls", "address": SERVER, "port": 6443, "caFile": ca, "serverName": "apiserver.test"},
            {"id": "by-ip", "kind": "tls", "address": SERVER, "port": 6443, "caFile": ca},
            {"id": "wrong-name", "kind": "tls", "address": SERVER, "port": 6443, "caFile": ca, "serverName": "other.test"},
            {"id": "wrong-ca", "kind": "tls", "address": SERVER, "port": 6443, "caFile": wrong_ca},
            {"id": "wrong-ca-required", "kind": "tls", "address": SERVER, "port": 6443, "caFile": wrong_ca, "requireVerified": true},
            {"id": "good-token", "kind": "tls", "address": SERVER, "port": 6443, "caFile": ca, "tokenFile": good_token},
            {"id": "bad-token", "kind": "tls", "address": SERVER, "port": 6443, "caFile": ca, "tokenFile": bad_token},
            {"id": "not-tls", "kind": "tls", "address": SERVER, "port": 9917},
            {"id": "closed", "kind": "tls", "address": SERVER, "port": 6444},
            {"id": "echo-to-tls", "kind": "tcp", "address": SERVER, "port": 6443, "echo": true},
        ]),
    ));
    assert_outcomes(
        &r,
        &[
            ("anon", Outcome::Ok),
            ("verified", Outcome::Ok),
            ("by-ip", Outcome::Ok),
            ("wrong-name", Outcome::Ok),
            ("wrong-ca", Outcome::Ok),
            ("wrong-ca-required", Outcome::TlsError),
            ("good-token", Outcome::Ok),
            ("bad-token", Outcome::Unauthorized),
            ("not-tls", Outcome::TlsError),
            ("closed", Outcome::Refused),
            ("echo-to-tls", Outcome::Error),
        ],
    );
    let tls = |id: &str| {
        r[id]
            .tls
            .clone()
            .unwrap_or_else(|| panic!("{id} has tls info: {:?}", r[id]))
    };
    assert!(!tls("anon").verified && tls("anon").verify_error.unwrap().contains("no CA"));
    assert!(tls("verified").verified, "{:?}", r["verified"]);
    assert!(
        tls("by-ip").verified,
        "the IP SAN matches: {:?}",
        r["by-ip"]
    );
    assert!(!tls("wrong-name").verified);
    assert!(!tls("wrong-ca").verified && tls("wrong-ca").verify_error.is_some());
    assert_eq!(r["bad-token"].http_status, Some(401));
    assert_eq!(r["good-token"].http_status, Some(200));
    assert!(
        r["echo-to-tls"].detail.contains("another service"),
        "not the agent: {:?}",
        r["echo-to-tls"]
    );
    for res in r.values() {
        let line = serde_json::to_string(res).unwrap();
        assert!(
            !line.contains(GOOD_TOKEN) && !line.contains("eyJ"),
            "a token leaked: {line}"
        );
    }
}

#[test]
fn dns_over_udp_and_tcp_separately() {
    if !common::require_root() {
        return;
    }
    let mut net = Routed::new();
    net.server
        .dnsmasq(&[SERVER], "kubernetes.default.svc.cluster.local,10.96.0.1");
    let tmp_dir = tempfile::Builder::new()
        .prefix("ppt-dns-")
        .tempdir()
        .unwrap();
    let dir = tmp_dir.path().to_path_buf();
    std::fs::create_dir_all(&dir).unwrap();
    let resolv = dir.join("resolv.conf");
    std::fs::write(&resolv, format!("search default.svc.cluster.local svc.cluster.local cluster.local\nnameserver {SERVER}\noptions ndots:5\n")).unwrap();
    let server = format!("{SERVER}:53");
    let name = "kubernetes.default.svc.cluster.local";
    let probes = json!([
        {"id": "udp", "kind": "dns", "name": name, "server": server, "protocol": "udp"},
        {"id": "tcp", "kind": "dns", "name": name, "server": server, "protocol": "tcp"},
        {"id": "nx", "kind": "dns", "name": "nope.cluster.local", "server": server},
        {"id": "resolv", "kind": "dns", "name": "kubernetes.default", "resolvConf": resolv},
    ]);
    let r = net.client.probe(&plan(1000, probes.clone()));
    assert_outcomes(
        &r,
        &[
            ("udp", Outcome::Ok),
            ("tcp", Outcome::Ok),
            ("nx", Outcome::DnsError),
            ("resolv", Outcome::Ok),
        ],
    );
    let dns = r["udp"].dns.clone().unwrap();
    assert_eq!(dns.answers, ["A 10.96.0.1"]);
    assert_eq!(
        r["nx"].dns.clone().unwrap().rcode.as_deref(),
        Some("NXDOMAIN")
    );
    assert_eq!(
        r["resolv"].dns.clone().unwrap().name,
        name,
        "found through the search list"
    );

    net.router_rule("tcp dport 53 drop;");
    let r = net.client.probe(&plan(1000, probes));
    assert_eq!(outcome(&r, "udp"), Outcome::Ok, "UDP still works");
    assert_eq!(
        outcome(&r, "tcp"),
        Outcome::Timeout,
        "TCP is dropped, and never silently replaced by UDP"
    );
}

#[test]
fn mtu_black_hole() {
    if !common::require_root() {
        return;
    }
    // a — switch — b, where the switch port towards b takes only 1400-byte frames: bigger ones
    // vanish in the switch, as on a real underlay whose MTU is smaller than the nodes believe.
    let a = Ns::new("a");
    let sw = Ns::new("sw");
    let b = Ns::new("b");
    sw.ip(&["link", "add", "br0", "type", "bridge"]);
    sw.ip(&["link", "set", "br0", "up"]);
    for (host, port, addr) in [(&a, "pa", "10.78.0.1/24"), (&b, "pb", "10.78.0.2/24")] {
        host.ip(&[
            "link", "add", "eth0", "type", "veth", "peer", "name", port, "netns", &sw.name,
        ]);
        host.ip(&["addr", "add", addr, "dev", "eth0"]);
        host.ip(&["link", "set", "eth0", "up"]);
        sw.ip(&["link", "set", port, "master", "br0", "up"]);
    }
    sw.ip(&["link", "set", "pb", "mtu", "1400"]);
    let r = a.probe(&plan(
        800,
        json!([
            {"id": "small", "kind": "mtu", "address": "10.78.0.2", "size": 1400},
            {"id": "large", "kind": "mtu", "address": "10.78.0.2", "size": 1500},
            {"id": "too-large", "kind": "mtu", "address": "10.78.0.2", "size": 1600},
        ]),
    ));
    assert_outcomes(
        &r,
        &[
            ("small", Outcome::Ok),
            ("large", Outcome::Timeout),
            ("too-large", Outcome::Error),
        ],
    );
    assert!(
        r["too-large"].detail.contains("MTU"),
        "{:?}",
        r["too-large"]
    );
    assert_eq!(
        r["large"].path_mtu,
        Some(1500),
        "the sender saw nothing wrong"
    );

    // Without a size, the sender probes at its own interface's MTU and says what it sent: 1500
    // vanishes in the switch; once a's interface says 1400, its packets fit.
    let own = json!([{"id": "own", "kind": "mtu", "address": "10.78.0.2"}]);
    let r = a.probe(&plan(800, own.clone()));
    assert_outcomes(&r, &[("own", Outcome::Timeout)]);
    assert_eq!(r["own"].packet_size, Some(1500), "{:?}", r["own"]);
    a.ip(&["link", "set", "eth0", "mtu", "1400"]);
    let r = a.probe(&plan(800, own));
    assert_outcomes(&r, &[("own", Outcome::Ok)]);
    assert_eq!(r["own"].packet_size, Some(1400), "{:?}", r["own"]);
}

#[test]
fn plan_deadline_bounds_the_run_and_still_answers_every_probe() {
    if !common::require_root() {
        return;
    }
    let net = Routed::new();
    net.router_rule("tcp dport 7002 drop;");
    let probes: Vec<_> = (0..3)
        .map(|i| json!({"id": format!("p{i}"), "kind": "tcp", "address": SERVER, "port": 7002}))
        .collect();
    let started = Instant::now();
    let r = net.client.probe(
        &json!({"deadlineMs": 1500, "probeTimeoutMs": 1000, "concurrency": 1, "probes": probes}),
    );
    let took = started.elapsed();
    assert_eq!(r.len(), 3);
    assert_eq!(outcome(&r, "p0"), Outcome::Timeout);
    assert_eq!(
        outcome(&r, "p1"),
        Outcome::Timeout,
        "cut at the plan deadline"
    );
    assert_eq!(outcome(&r, "p2"), Outcome::Error);
    assert!(r["p2"].detail.contains("deadline"), "{:?}", r["p2"]);
    assert!(
        took < Duration::from_secs(10),
        "the plan deadline bounds the run: {took:?}"
    );
}

#[test]
fn serve_exits_on_ttl() {
    if !common::require_root() {
        return;
    }
    let ns = Ns::new("ttl");
    let started = Instant::now();
    let status = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns.name,
            common::agent_bin(),
            "serve",
            "--ttl",
            "1s",
            "--sniff",
            "never",
        ])
        .status()
        .unwrap();
    assert!(status.success(), "{status}");
    assert!(started.elapsed() >= Duration::from_secs(1));
}

#[test]
fn local_rejection_and_no_route() {
    if !common::require_root() {
        return;
    }
    // A host with no default route: connect fails locally with ENETUNREACH.
    let a = Ns::new("a");
    let b = Ns::new("b");
    link(&a, "eth0", "10.79.0.1/24", &b, "eth0", "10.79.0.2/24");
    a.nft_chain(
        "local",
        "output",
        "tcp dport 7003 reject with icmp type admin-prohibited",
    );
    let r = a.probe(&plan(
        800,
        json!([
            {"id": "no-route", "kind": "tcp", "address": "10.80.0.1", "port": 9917},
            {"id": "local-reject", "kind": "tcp", "address": "10.79.0.2", "port": 7003},
        ]),
    ));
    assert_outcomes(
        &r,
        &[
            ("no-route", Outcome::Unreachable),
            ("local-reject", Outcome::Rejected),
        ],
    );
    let icmp = r["local-reject"]
        .icmp
        .expect("the local stack's ICMP is queued too");
    assert_eq!(
        icmp.from,
        Some(IpAddr::V4(Ipv4Addr::new(10, 79, 0, 1))),
        "offender is this host: {:?}",
        r["local-reject"]
    );
}
