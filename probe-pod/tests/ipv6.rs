//! The probes over IPv6, proved for real as their IPv4 twins are in `netns.rs`: a dual-stack
//! client — router — server chain of namespaces, the kernel's own answers, nftables, dnsmasq, a
//! rustls server and the agent's responders. Needs root (CI runs as root).

mod common;

use std::net::IpAddr;

use common::tls_server::{TlsServer, pki};
use common::{
    CLIENT6, Ns, ROUTER6, Routed, SERVER, SERVER6, assert_outcomes, plan, receipts, seen_on,
    tcp_sightings, udp_sightings,
};
use probe_pod::proto::Outcome;
use serde_json::json;

#[test]
fn tcp_and_udp_echo_over_ipv6() {
    if !common::require_root() {
        return;
    }
    let mut net = Routed::dual_stack();
    net.server.serve(&["--listen", "::", "--sniff", "never"]);
    net.router_rule("meta nfproto ipv6 meta l4proto { tcp, udp } th dport 7002 drop;");
    let r = net.client.probe(&plan(
        800,
        json!([
            {"id": "tcp-ok", "kind": "tcp", "address": SERVER6, "port": 9917, "echo": true},
            {"id": "tcp-refused", "kind": "tcp", "address": SERVER6, "port": 9999},
            {"id": "tcp-timeout", "kind": "tcp", "address": SERVER6, "port": 7002},
            {"id": "udp-ok", "kind": "udp", "address": SERVER6, "port": 9917},
            {"id": "udp-refused", "kind": "udp", "address": SERVER6, "port": 9999},
            {"id": "udp-timeout", "kind": "udp", "address": SERVER6, "port": 7002},
            // The same responders over IPv4, and the IPv6-only rule leaves IPv4 alone.
            {"id": "tcp4-ok", "kind": "tcp", "address": SERVER, "port": 9917, "echo": true},
            {"id": "udp4-ok", "kind": "udp", "address": SERVER, "port": 9917},
            {"id": "tcp4-7002", "kind": "tcp", "address": SERVER, "port": 7002},
        ]),
    ));
    assert_outcomes(
        &r,
        &[
            ("tcp-ok", Outcome::Ok),
            ("tcp-refused", Outcome::Refused),
            ("tcp-timeout", Outcome::Timeout),
            ("udp-ok", Outcome::Ok),
            ("udp-refused", Outcome::Refused),
            ("udp-timeout", Outcome::Timeout),
            ("tcp4-ok", Outcome::Ok),
            ("udp4-ok", Outcome::Ok),
            ("tcp4-7002", Outcome::Refused),
        ],
    );
    let client6: IpAddr = common::CLIENT6.parse().unwrap();
    for id in ["tcp-ok", "tcp-timeout", "udp-ok", "udp-timeout"] {
        let source = r[id].source.unwrap_or_else(|| panic!("{id}: {:?}", r[id]));
        assert_eq!(
            source.ip(),
            client6,
            "{id} left from the client's IPv6 address"
        );
    }
    for id in ["tcp-ok", "udp-ok"] {
        assert!(
            r[id].rtt_micros.is_some() && r[id].nonce.is_some(),
            "{:?}",
            r[id]
        );
        assert!(r[id].detail.contains("[fd77:2::2]:9917"), "{:?}", r[id]);
    }
    assert!(
        r["tcp-refused"].icmp.is_none(),
        "a RST is not ICMP: {:?}",
        r["tcp-refused"]
    );
}

#[test]
fn tls_over_ipv6_verifies_the_ipv6_san() {
    if !common::require_root() {
        return;
    }
    let net = Routed::dual_stack();
    let tmp_dir = tempfile::Builder::new()
        .prefix("ppt-tls6-")
        .tempdir()
        .unwrap();
    let dir = tmp_dir.path();
    let server_ip: IpAddr = SERVER6.parse().unwrap();
    let good = pki(&dir.join("good"), server_ip);
    let other = pki(&dir.join("other"), server_ip);
    let _tls = TlsServer::start(&net.server.path(), (server_ip, 6443).into(), &good);
    let ca = good.ca_file.to_str().unwrap();
    let wrong_ca = other.ca_file.to_str().unwrap();
    let r = net.client.probe(&plan(
        1500,
        json!([
            {"id": "anon", "kind": "tls", "address": SERVER6, "port": 6443},
            {"id": "by-ip", "kind": "tls", "address": SERVER6, "port": 6443, "caFile": ca},
            {"id": "by-name", "kind": "tls", "address": SERVER6, "port": 6443, "caFile": ca, "serverName": "apiserver.test"},
            {"id": "wrong-ca-required", "kind": "tls", "address": SERVER6, "port": 6443, "caFile": wrong_ca, "requireVerified": true},
            {"id": "closed", "kind": "tls", "address": SERVER6, "port": 6444},
        ]),
    ));
    assert_outcomes(
        &r,
        &[
            ("anon", Outcome::Ok),
            ("by-ip", Outcome::Ok),
            ("by-name", Outcome::Ok),
            ("wrong-ca-required", Outcome::TlsError),
            ("closed", Outcome::Refused),
        ],
    );
    let tls = |id: &str| {
        r[id]
            .tls
            .clone()
            .unwrap_or_else(|| panic!("{id}: {:?}", r[id]))
    };
    assert!(
        tls("by-ip").verified,
        "the IPv6 SAN matches: {:?}",
        r["by-ip"]
    );
    assert!(tls("by-name").verified, "{:?}", r["by-name"]);
    assert!(!tls("anon").verified);
    assert_eq!(r["by-ip"].http_status, Some(200), "{:?}", r["by-ip"]);
}

#[test]
fn dns_aaaa_and_queries_over_ipv6() {
    if !common::require_root() {
        return;
    }
    let mut net = Routed::dual_stack();
    net.server.dnsmasq(
        &[SERVER6, SERVER],
        "kubernetes.default.svc.cluster.local,10.96.0.1,fd00:96::1",
    );
    let tmp_dir = tempfile::Builder::new()
        .prefix("ppt-dns6-")
        .tempdir()
        .unwrap();
    let resolv = tmp_dir.path().join("resolv.conf");
    std::fs::write(
        &resolv,
        format!("search default.svc.cluster.local svc.cluster.local cluster.local\nnameserver {SERVER6}\noptions ndots:5\n"),
    )
    .unwrap();
    let server6 = format!("[{SERVER6}]:53");
    let server4 = format!("{SERVER}:53");
    let name = "kubernetes.default.svc.cluster.local";
    let probes = json!([
        {"id": "aaaa-udp6", "kind": "dns", "name": name, "recordType": "AAAA", "server": server6},
        {"id": "aaaa-tcp6", "kind": "dns", "name": name, "recordType": "AAAA", "server": server6, "protocol": "tcp"},
        {"id": "a-udp6", "kind": "dns", "name": name, "server": server6},
        {"id": "aaaa-udp4", "kind": "dns", "name": name, "recordType": "AAAA", "server": server4},
        {"id": "resolv6", "kind": "dns", "name": "kubernetes.default", "recordType": "AAAA", "resolvConf": resolv},
    ]);
    let r = net.client.probe(&plan(1000, probes.clone()));
    assert_outcomes(
        &r,
        &[
            ("aaaa-udp6", Outcome::Ok),
            ("aaaa-tcp6", Outcome::Ok),
            ("a-udp6", Outcome::Ok),
            ("aaaa-udp4", Outcome::Ok),
            ("resolv6", Outcome::Ok),
        ],
    );
    let dns = |id: &str| {
        r[id]
            .dns
            .clone()
            .unwrap_or_else(|| panic!("{id}: {:?}", r[id]))
    };
    for id in ["aaaa-udp6", "aaaa-tcp6", "aaaa-udp4", "resolv6"] {
        assert_eq!(dns(id).answers, ["AAAA fd00:96::1"], "{id}");
    }
    assert_eq!(dns("a-udp6").answers, ["A 10.96.0.1"]);
    assert_eq!(dns("aaaa-udp6").server.to_string(), server6);
    assert_eq!(dns("resolv6").name, name, "found through the search list");
    assert_eq!(dns("resolv6").server.to_string(), server6);

    // TCP over IPv6 dropped on the router: that query times out, the others do not notice.
    net.router_rule("meta nfproto ipv6 tcp dport 53 drop;");
    let r = net.client.probe(&plan(1000, probes));
    assert_eq!(
        r["aaaa-tcp6"].outcome,
        Outcome::Timeout,
        "{:?}",
        r["aaaa-tcp6"]
    );
    for id in ["aaaa-udp6", "a-udp6", "aaaa-udp4", "resolv6"] {
        assert_eq!(r[id].outcome, Outcome::Ok, "{id}: {:?}", r[id]);
    }
}

#[test]
fn icmpv6_errors_map_to_the_ipv4_outcomes_and_name_their_sender() {
    if !common::require_root() {
        return;
    }
    let mut net = Routed::dual_stack();
    net.server.serve(&["--listen", "::", "--sniff", "never"]);
    net.router_rule(
        "meta nfproto ipv6 meta l4proto { tcp, udp } th dport 7001 reject with icmpv6 type admin-prohibited; \
         meta nfproto ipv6 meta l4proto { tcp, udp } th dport 7004 reject with icmpv6 type port-unreachable;",
    );
    // A router's `prohibit` route answers administratively prohibited too.
    net.router
        .ip(&["-6", "route", "add", "prohibit", "fd77:7::/64"]);
    // The sender's own OUTPUT chain, rejecting: the local stack's ICMPv6 is queued as well.
    net.client.nft_chain(
        "local",
        "output",
        "meta nfproto ipv6 tcp dport 7003 reject with icmpv6 type admin-prohibited",
    );
    let r = net.client.probe(&plan(
        800,
        json!([
            {"id": "tcp-rejected", "kind": "tcp", "address": SERVER6, "port": 7001},
            {"id": "udp-rejected", "kind": "udp", "address": SERVER6, "port": 7001},
            {"id": "tcp-refused-by-router", "kind": "tcp", "address": SERVER6, "port": 7004},
            {"id": "udp-refused", "kind": "udp", "address": SERVER6, "port": 9999},
            {"id": "tcp-unreachable", "kind": "tcp", "address": "fd77:9::9", "port": 9917},
            {"id": "udp-unreachable", "kind": "udp", "address": "fd77:9::9", "port": 9917},
            {"id": "tcp-prohibit-route", "kind": "tcp", "address": "fd77:7::1", "port": 9917},
            {"id": "tcp-local-reject", "kind": "tcp", "address": SERVER6, "port": 7003},
        ]),
    ));
    assert_outcomes(
        &r,
        &[
            ("tcp-rejected", Outcome::Rejected),
            ("udp-rejected", Outcome::Rejected),
            ("tcp-refused-by-router", Outcome::Refused),
            ("udp-refused", Outcome::Refused),
            ("tcp-unreachable", Outcome::Unreachable),
            ("udp-unreachable", Outcome::Unreachable),
            ("tcp-prohibit-route", Outcome::Rejected),
            ("tcp-local-reject", Outcome::Rejected),
        ],
    );
    let (router, server, client): (IpAddr, IpAddr, IpAddr) = (
        ROUTER6.parse().unwrap(),
        SERVER6.parse().unwrap(),
        CLIENT6.parse().unwrap(),
    );
    for (id, icmp_type, code, from) in [
        ("tcp-rejected", 1, 1, router),
        ("udp-rejected", 1, 1, router),
        ("tcp-refused-by-router", 1, 4, router),
        ("udp-refused", 1, 4, server),
        ("tcp-unreachable", 1, 0, router),
        ("udp-unreachable", 1, 0, router),
        ("tcp-prohibit-route", 1, 1, router),
        ("tcp-local-reject", 1, 1, client),
    ] {
        let icmp = r[id]
            .icmp
            .unwrap_or_else(|| panic!("{id} carries the ICMPv6 error: {:?}", r[id]));
        assert_eq!(
            (icmp.icmp_type, icmp.code, icmp.from),
            (icmp_type, code, Some(from)),
            "{id}: {:?}",
            r[id]
        );
        assert!(r[id].detail.contains("ICMPv6 "), "{id}: {:?}", r[id]);
    }
    assert!(
        r["tcp-rejected"].detail.ends_with(
            "ICMPv6 communication administratively prohibited (type 1 code 1) from fd77:1::1"
        ),
        "{:?}",
        r["tcp-rejected"]
    );
}

#[test]
fn icmpv6_echo_over_raw_and_ping_sockets() {
    if !common::require_root() {
        return;
    }
    let net = Routed::dual_stack();
    net.server.addr6("eth0", "fd77:2::3/64");
    net.server.addr6("eth0", "fd77:2::4/64");
    net.server
        .ip(&["addr", "add", "10.77.2.4/24", "dev", "eth0"]);
    net.router_rule(
        "ip6 daddr fd77:2::3 icmpv6 type echo-request drop; \
         ip6 daddr fd77:2::4 icmpv6 type echo-request reject with icmpv6 type admin-prohibited; \
         ip daddr 10.77.2.4 icmp type echo-request reject with icmp type admin-prohibited;",
    );
    let probes = json!([
        {"id": "ok", "kind": "icmp", "address": SERVER6},
        {"id": "vtep", "kind": "vtep", "address": SERVER6},
        {"id": "dropped", "kind": "icmp", "address": "fd77:2::3"},
        {"id": "rejected", "kind": "icmp", "address": "fd77:2::4"},
        {"id": "unreachable", "kind": "icmp", "address": "fd77:9::9"},
        {"id": "v4", "kind": "icmp", "address": SERVER},
        {"id": "v4-rejected", "kind": "icmp", "address": "10.77.2.4"},
    ]);
    let want = [
        ("ok", Outcome::Ok),
        ("vtep", Outcome::Ok),
        ("dropped", Outcome::Timeout),
        ("rejected", Outcome::Rejected),
        ("unreachable", Outcome::Unreachable),
        ("v4", Outcome::Ok),
        ("v4-rejected", Outcome::Rejected),
    ];
    let router: IpAddr = ROUTER6.parse().unwrap();
    // New namespaces disallow ping sockets ("1 0"): the raw fallback runs. The one sysctl
    // governs ICMPv6 ping sockets too.
    for (range, via) in [("0 2147483647", "ping socket"), ("1 0", "raw socket")] {
        net.client.sysctl("net.ipv4.ping_group_range", range);
        let r = net.client.probe(&plan(700, probes.clone()));
        assert_outcomes(&r, &want);
        for id in ["ok", "vtep", "v4"] {
            assert!(r[id].detail.contains(via), "{id}: {:?}", r[id]);
            assert!(r[id].rtt_micros.is_some() && r[id].nonce.is_some());
        }
        assert!(
            r["ok"].detail.starts_with("icmpv6 echo fd77:2::2"),
            "{:?}",
            r["ok"]
        );
        let icmp = |id: &str| r[id].icmp.unwrap_or_else(|| panic!("{id}: {:?}", r[id]));
        assert_eq!(
            (
                icmp("rejected").icmp_type,
                icmp("rejected").code,
                icmp("rejected").from
            ),
            (1, 1, Some(router)),
            "{via}"
        );
        assert_eq!(
            (icmp("unreachable").icmp_type, icmp("unreachable").code),
            (1, 0),
            "{via}"
        );
    }
}

#[test]
fn mtu_over_ipv6_reads_packet_too_big_and_finds_the_black_hole() {
    if !common::require_root() {
        return;
    }
    // The router's link toward the server takes 1400 bytes: the router answers a larger packet
    // with Packet Too Big (IPv6 routers never fragment), as it answers IPv4 with DF set with
    // fragmentation needed.
    let net = Routed::dual_stack();
    net.router.ip(&["link", "set", "r1", "mtu", "1400"]);
    net.server.ip(&["link", "set", "eth0", "mtu", "1400"]);
    let probes = json!([
        {"id": "small", "kind": "mtu", "address": SERVER6, "size": 1400},
        {"id": "large", "kind": "mtu", "address": SERVER6, "size": 1500},
        {"id": "too-large", "kind": "mtu", "address": SERVER6, "size": 1600},
        {"id": "v4-large", "kind": "mtu", "address": SERVER, "size": 1500},
    ]);
    // On its own, before the others: it reads the route's MTU, which their Packet Too Big
    // lowers to 1400 as soon as it arrives.
    let own = json!([{"id": "own", "kind": "mtu", "address": SERVER6}]);
    let router: IpAddr = ROUTER6.parse().unwrap();
    // A raw socket (new namespaces allow no ping socket), then the ping socket a pod agent uses;
    // each starting from a client that has learnt no path MTU yet.
    for (range, via) in [("1 0", "raw socket"), ("0 2147483647", "ping socket")] {
        net.client.sysctl("net.ipv4.ping_group_range", range);
        net.client.ip(&["-6", "route", "flush", "cache"]);
        let mut r = net.client.probe(&plan(800, own.clone()));
        r.extend(net.client.probe(&plan(800, probes.clone())));
        assert_outcomes(
            &r,
            &[
                ("small", Outcome::Ok),
                ("large", Outcome::Unreachable),
                ("too-large", Outcome::Error),
                ("own", Outcome::Unreachable),
                ("v4-large", Outcome::Unreachable),
            ],
        );
        for id in ["large", "own"] {
            let icmp = r[id].icmp.unwrap_or_else(|| panic!("{id}: {:?}", r[id]));
            assert_eq!(
                (icmp.icmp_type, icmp.code, icmp.from),
                (2, 0, Some(router)),
                "{id}"
            );
            assert!(
                r[id]
                    .detail
                    .contains("ICMPv6 packet too big (next-hop MTU 1400) from fd77:1::1"),
                "{id}: {:?}",
                r[id]
            );
        }
        assert_eq!(r["own"].packet_size, Some(1500), "{:?}", r["own"]);
        assert_eq!(r["small"].packet_size, Some(1400));
        assert!(
            r["too-large"].detail.contains("MTU"),
            "{:?}",
            r["too-large"]
        );
        let v4 = r["v4-large"].icmp.expect("fragmentation needed");
        assert_eq!((v4.icmp_type, v4.code), (3, 4), "{:?}", r["v4-large"]);
        assert!(r["small"].detail.contains(via), "{:?}", r["small"]);
    }

    // ICMPv6 filtered on the router: its Packet Too Big never leaves, and the large packets
    // vanish: the black hole a firewall that drops all ICMPv6 makes.
    net.router
        .nft_chain("icmp6", "output", "icmpv6 type packet-too-big drop");
    // And the client forgets the path MTU the first Packet Too Big taught it (`own` would
    // probe at it), as a client that never got one.
    net.client.ip(&["-6", "route", "flush", "cache"]);
    let mut r = net.client.probe(&plan(800, own));
    r.extend(net.client.probe(&plan(800, probes)));
    assert_eq!(r["small"].outcome, Outcome::Ok, "{:?}", r["small"]);
    for id in ["large", "own"] {
        assert_eq!(r[id].outcome, Outcome::Timeout, "{id}: {:?}", r[id]);
        assert_eq!(r[id].icmp, None, "{id}");
    }
    assert_eq!(
        r["v4-large"].outcome,
        Outcome::Unreachable,
        "IPv4's ICMP still flows"
    );
}

#[test]
fn the_agent_serves_both_families_and_its_sniffer_sees_ipv6_probes() {
    if !common::require_root() {
        return;
    }
    let mut net = Routed::dual_stack();
    // No --listen: the default serves both families. The sniffer starts by itself (root, TCP
    // ports to watch).
    net.server.serve(&["--receipt-tcp-port", "7002,7003"]);
    std::thread::sleep(std::time::Duration::from_millis(200));
    // Over IPv6, 7002 dies on the router; 7003 and UDP to the agent in the server's own input.
    net.router_rule("meta nfproto ipv6 meta l4proto { tcp, udp } th dport 7002 drop;");
    net.server.nft_chain(
        "host",
        "input",
        "meta nfproto ipv6 tcp dport 7003 drop; meta nfproto ipv6 udp dport 9917 drop",
    );
    let r = net.client.probe(&plan(
        600,
        json!([
            {"id": "tcp-ok", "kind": "tcp", "address": SERVER6, "port": 9917, "echo": true},
            {"id": "tcp-network", "kind": "tcp", "address": SERVER6, "port": 7002},
            {"id": "tcp-host", "kind": "tcp", "address": SERVER6, "port": 7003},
            {"id": "udp-network", "kind": "udp", "address": SERVER6, "port": 7002},
            {"id": "udp-host", "kind": "udp", "address": SERVER6, "port": 9917},
            {"id": "tcp4-ok", "kind": "tcp", "address": SERVER, "port": 9917, "echo": true},
            {"id": "udp4-ok", "kind": "udp", "address": SERVER, "port": 9917},
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
            ("tcp4-ok", Outcome::Ok),
            ("udp4-ok", Outcome::Ok),
        ],
    );
    let flow = |id: &str, port: u16| {
        let src = r[id].source.unwrap_or_else(|| panic!("{id}: {:?}", r[id]));
        assert_eq!(src.ip().to_string(), CLIENT6, "{id}");
        json!({"from": CLIENT6, "sourcePort": src.port(), "port": port})
    };
    let flows = [
        flow("tcp-ok", 9917),
        flow("tcp-network", 7002),
        flow("tcp-host", 7003),
    ];
    let nonces = [
        r["udp-network"].nonce.unwrap(),
        r["udp-host"].nonce.unwrap(),
    ];
    let s = receipts(&net.server, &json!(flows), &nonces);
    let seen = s.seen.clone().unwrap();
    let ok = tcp_sightings(&s, &flows[0]);
    assert!(
        ok.contains(&false) && ok.contains(&true),
        "SYN in, SYN-ACK out: {s:?}"
    );
    assert!(
        tcp_sightings(&s, &flows[1]).is_empty(),
        "never arrived: {s:?}"
    );
    let host = tcp_sightings(&s, &flows[2]);
    assert!(
        !host.is_empty() && host.iter().all(|r| !r),
        "arrived, never answered: {s:?}"
    );
    assert!(udp_sightings(&s, nonces[0]).is_empty(), "{s:?}");
    assert_eq!(udp_sightings(&s, nonces[1]), [false], "{s:?}");
    let client6: IpAddr = CLIENT6.parse().unwrap();
    assert!(
        seen.iter().all(|x| x.from == client6),
        "every sighting names the IPv6 sender: {s:?}"
    );
}

/// Two nodes whose underlay is IPv6 only (`fd79::1`, `fd79::2`), flannel-style VXLAN between them
/// (`flannel.1`, VNI 1, UDP 8472, static fdb/neigh/routes), the pod network inside still IPv4
/// (10.244.1.0, 10.244.2.0; MACs 02:00:00:00:00:01 and :02).
fn vxlan_pair_over_ipv6() -> (Ns, Ns) {
    let (n1_6, n2_6) = ("fd79::1", "fd79::2");
    let n1 = Ns::new("v6n1");
    let n2 = Ns::new("v6n2");
    for ns in [&n1, &n2] {
        ns.enable_ipv6();
    }
    n1.ip(&[
        "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", &n2.name,
    ]);
    for (ns, local) in [(&n1, n1_6), (&n2, n2_6)] {
        ns.addr6("eth0", &format!("{local}/64"));
        ns.ip(&["link", "set", "eth0", "up"]);
    }
    common::flannel_vxlan(&n1, &n2, (n1_6, n2_6));
    (n1, n2)
}

#[test]
fn crafted_vxlan_over_an_ipv6_underlay_is_seen_and_decapsulated() {
    if !common::require_root() {
        return;
    }
    let (n1_6, n2_6, mac2) = ("fd79::1", "fd79::2", "02:00:00:00:00:02");
    let (n1, mut n2) = vxlan_pair_over_ipv6();
    // Auto mode: a VXLAN device exists and we are root, so the sniffer starts by itself.
    n2.serve(&[]);
    let send = |nonce: u32| {
        json!([
            {"id": "vtep", "kind": "vtep", "address": "10.244.2.0"},
            {"id": "vx", "kind": "vxlan", "address": n2_6, "nonce": nonce,
             "innerSource": "10.244.1.0", "innerDestination": "10.244.2.0", "destinationMac": mac2},
        ])
    };
    let r = n1.probe(&plan(1000, send(1111)));
    assert_outcomes(&r, &[("vtep", Outcome::Ok), ("vx", Outcome::Ok)]);
    assert!(r["vx"].detail.contains("[fd79::2]:8472"), "{:?}", r["vx"]);
    assert_eq!(
        seen_on(&n2, 1111),
        ["eth0", "flannel.1"],
        "seen on the IPv6 underlay and decapsulated"
    );
    let s = receipts(&n2, &json!([]), &[1111]);
    let n1_addr: IpAddr = n1_6.parse().unwrap();
    assert!(
        s.seen
            .iter()
            .flatten()
            .any(|x| x.interface == "eth0" && x.from == n1_addr),
        "the outer IPv6 sender: {s:?}"
    );

    // n2's firewall drops VXLAN over IPv6: the NIC sees it, the VXLAN device never does.
    n2.nft_chain("host", "input", "meta nfproto ipv6 udp dport 8472 drop");
    let r = n1.probe(&plan(1000, send(2222)));
    assert_outcomes(&r, &[("vtep", Outcome::Timeout), ("vx", Outcome::Ok)]);
    assert_eq!(seen_on(&n2, 2222), ["eth0"], "dropped by the host");
}
