//! TTL-limited probes through two real kernel routers, the second of which drops one port: the
//! routers name themselves with ICMP time exceeded until the packets die. Needs root.

mod common;

use std::net::IpAddr;

use common::{Ns, link, plan};
use probe_pod::proto::{Outcome, ProbeResult};
use serde_json::json;

/// client (10.78.1.2) — r1 (10.78.1.1 | 10.78.2.1) — r2 (10.78.2.2 | 10.78.3.1) — server
/// (10.78.3.2), every hop a real kernel router that decrements the TTL.
struct TwoRouters {
    client: Ns,
    _r1: Ns,
    r2: Ns,
    server: Ns,
}

const SERVER: &str = "10.78.3.2";
const R1: &str = "10.78.1.1";
/// The second router's address toward the client: where its time exceeded comes from.
const R2: &str = "10.78.2.2";
const SERVER6: &str = "fd78:3::2";
const R1_6: &str = "fd78:1::1";
const R2_6: &str = "fd78:2::2";

impl TwoRouters {
    fn new() -> Self {
        let client = Ns::new("hcl");
        let r1 = Ns::new("hr1");
        let r2 = Ns::new("hr2");
        let server = Ns::new("hsv");
        for ns in [&client, &r1, &r2, &server] {
            ns.enable_ipv6();
        }
        link(&client, "eth0", "10.78.1.2/24", &r1, "r0", "10.78.1.1/24");
        link(&r1, "r1", "10.78.2.1/24", &r2, "r0", "10.78.2.2/24");
        link(&r2, "r1", "10.78.3.1/24", &server, "eth0", "10.78.3.2/24");
        for r in [&r1, &r2] {
            r.sysctl("net.ipv4.ip_forward", "1");
        }
        client.ip(&["route", "add", "default", "via", R1]);
        r1.ip(&["route", "add", "10.78.3.0/24", "via", R2]);
        r2.ip(&["route", "add", "default", "via", "10.78.2.1"]);
        server.ip(&["route", "add", "default", "via", "10.78.3.1"]);
        // The same chain over IPv6: fd78:N::/64 where IPv4 has 10.78.N.0/24.
        for (ns, dev, addr) in [
            (&client, "eth0", "fd78:1::2/64"),
            (&r1, "r0", "fd78:1::1/64"),
            (&r1, "r1", "fd78:2::1/64"),
            (&r2, "r0", "fd78:2::2/64"),
            (&r2, "r1", "fd78:3::1/64"),
            (&server, "eth0", "fd78:3::2/64"),
        ] {
            ns.addr6(dev, addr);
        }
        for r in [&r1, &r2] {
            r.sysctl("net.ipv6.conf.all.forwarding", "1");
            r.sysctl("net.ipv6.icmp.ratelimit", "0");
        }
        client.ip(&["-6", "route", "add", "default", "via", R1_6]);
        r1.ip(&["-6", "route", "add", "fd78:3::/64", "via", R2_6]);
        r2.ip(&["-6", "route", "add", "default", "via", "fd78:2::1"]);
        server.ip(&["-6", "route", "add", "default", "via", "fd78:3::1"]);
        Self {
            client,
            _r1: r1,
            r2,
            server,
        }
    }
}

#[test]
fn each_router_names_itself_until_the_one_that_drops() {
    if !common::require_root() {
        return;
    }
    let mut net = TwoRouters::new();
    net.server.serve(&["--sniff", "never"]);
    // The second router filters what it forwards, as a firewall in its forward path does.
    net.r2.nft_chain(
        "network",
        "forward",
        "meta l4proto { tcp, udp } th dport 7002 drop",
    );
    for (family, server, (r1, r2), expired) in [
        ("v4", SERVER, (R1, R2), 11),
        ("v6", SERVER6, (R1_6, R2_6), 3),
    ] {
        let mut probes = Vec::new();
        for proto in ["tcp", "udp"] {
            for (port, ttl) in [(7002, 1), (7002, 2), (7002, 3), (9917, 3)] {
                probes.push(json!({"id": format!("{proto}-{port}-{ttl}"), "kind": "hop",
                    "address": server, "port": port, "protocol": proto, "ttl": ttl}));
            }
        }
        let r = net.client.probe(&plan(1500, json!(probes)));
        assert_eq!(r.len(), probes.len(), "one result per probe: {r:#?}");
        let (r1, r2): (IpAddr, IpAddr) = (r1.parse().unwrap(), r2.parse().unwrap());
        let expired_at = |r: &ProbeResult| {
            r.icmp
                .filter(|i| i.icmp_type == expired)
                .and_then(|i| i.from)
        };
        for proto in ["tcp", "udp"] {
            let at = |id: &str| &r[&format!("{proto}-{id}")];
            let what = format!("{family} {proto}");
            assert_eq!(
                expired_at(at("7002-1")),
                Some(r1),
                "{what}: {:?}",
                at("7002-1")
            );
            assert_eq!(
                expired_at(at("7002-2")),
                Some(r2),
                "{what}: {:?}",
                at("7002-2")
            );
            assert_eq!(at("7002-1").outcome, Outcome::Unreachable, "{what}");
            // Past the second router: the drop, silence.
            assert_eq!(
                at("7002-3").outcome,
                Outcome::Timeout,
                "{what}: {:?}",
                at("7002-3")
            );
            assert_eq!(expired_at(at("7002-3")), None, "{what}");
            // Three hops are enough to reach the server on a port nobody drops.
            assert_eq!(
                at("9917-3").outcome,
                Outcome::Ok,
                "{what}: {:?}",
                at("9917-3")
            );
            assert!(
                at("7002-2").detail.starts_with("ttl 2: "),
                "{:?}",
                at("7002-2")
            );
        }
    }
}
