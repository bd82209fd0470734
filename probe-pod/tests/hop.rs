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

impl TwoRouters {
    fn new() -> Self {
        let client = Ns::new("hcl");
        let r1 = Ns::new("hr1");
        let r2 = Ns::new("hr2");
        let server = Ns::new("hsv");
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
        Self {
            client,
            _r1: r1,
            r2,
            server,
        }
    }
}

fn expired_at(r: &ProbeResult) -> Option<IpAddr> {
    r.icmp.filter(|i| i.icmp_type == 11).and_then(|i| i.from)
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
    let mut probes = Vec::new();
    for proto in ["tcp", "udp"] {
        for (port, ttl) in [(7002, 1), (7002, 2), (7002, 3), (9917, 3)] {
            probes.push(json!({"id": format!("{proto}-{port}-{ttl}"), "kind": "hop",
                "address": SERVER, "port": port, "protocol": proto, "ttl": ttl}));
        }
    }
    let r = net.client.probe(&plan(1500, json!(probes)));
    assert_eq!(r.len(), probes.len(), "one result per probe: {r:#?}");
    let (r1, r2): (IpAddr, IpAddr) = (R1.parse().unwrap(), R2.parse().unwrap());
    for proto in ["tcp", "udp"] {
        let at = |id: &str| &r[&format!("{proto}-{id}")];
        assert_eq!(expired_at(at("7002-1")), Some(r1), "{:?}", at("7002-1"));
        assert_eq!(expired_at(at("7002-2")), Some(r2), "{:?}", at("7002-2"));
        assert_eq!(at("7002-1").outcome, Outcome::Unreachable);
        // Past the second router: the drop, silence.
        assert_eq!(at("7002-3").outcome, Outcome::Timeout, "{:?}", at("7002-3"));
        assert_eq!(expired_at(at("7002-3")), None);
        // Three hops are enough to reach the server on a port nobody drops.
        assert_eq!(at("9917-3").outcome, Outcome::Ok, "{:?}", at("9917-3"));
        assert!(
            at("7002-2").detail.starts_with("ttl 2: "),
            "{:?}",
            at("7002-2")
        );
    }
}
