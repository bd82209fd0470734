//! Two routers in a row (`routers: 2`): the first zone's router and a second one, the gateway of
//! every other zone, joined by a transit link; each decrements the TTL, so a traced path between
//! the first zone and another meets two hops, and either router can be the one that drops.

use std::net::Ipv4Addr;

use super::layout::zone_router;
use super::{Layout, NsSetup, nat};

/// The first router's address on the transit link (the second's is the next one).
pub const TRANSIT_FIRST: Ipv4Addr = Ipv4Addr::new(192, 168, 64, 1);
pub const TRANSIT_SECOND: Ipv4Addr = Ipv4Addr::new(192, 168, 64, 2);

/// Whether zone `z`'s gateway is on the second router.
pub(super) fn behind_second(l: &Layout, z: usize) -> bool {
    l.router2_ns.is_some() && z > 0
}

/// The second router, with the transit link from `first` to it and the routes both need: the
/// first reaches the other zones through the second, the second everything else through the
/// first (the upstream resolver, and Service IPs, which the first drops as a cloud would).
pub(super) fn second(l: &Layout, first: &mut NsSetup) -> Option<NsSetup> {
    let ns = l.router2_ns.as_ref()?;
    let mut st = NsSetup::new(ns);
    st.sysctl.push(("net.ipv4.ip_forward".into(), "1".into()));
    st.nft = nat::router_ruleset(false);
    first
        .links
        .push(format!("link add t0 type veth peer name t0 netns {ns}"));
    first
        .config
        .push(format!("addr add {TRANSIT_FIRST}/30 dev t0"));
    first.config.push("link set t0 up".into());
    for z in (1..l.zones.len()).filter(|&z| behind_second(l, z)) {
        let net = Ipv4Addr::from(u32::from(zone_router(z)) - 1);
        first
            .config
            .push(format!("route add {net}/24 via {TRANSIT_SECOND}"));
    }
    st.config
        .push(format!("addr add {TRANSIT_SECOND}/30 dev t0"));
    st.config.push("link set t0 up".into());
    st.config
        .push(format!("route add default via {TRANSIT_FIRST}"));
    Some(st)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::lab::build::{NsSetup, layout, setups};
    use crate::lab::scenario::Scenario;

    const TWO: &str = "{nodes: 3, routers: 2, zones: [{name: a, nodes: [n1]}, {name: b, nodes: [n2]}, {name: c, nodes: [n3]}], faults: [
        {kind: firewall, action: drop, protocol: tcp, port: 10250, from: [n1], to: [n2], place: second-router},
        {kind: firewall, action: drop, protocol: udp, port: 8472, from: [n1], to: [n2]},
        {kind: firewall, action: drop, protocol: tcp, port: 6443, from: [n2], to: [n3]}]}";

    fn ns<'a>(st: &'a [NsSetup], name: &str) -> &'a NsSetup {
        st.iter()
            .find(|s| s.ns == name)
            .unwrap_or_else(|| panic!("no namespace {name}"))
    }

    #[test]
    fn the_zones_after_the_first_sit_behind_a_second_router() {
        let s = Scenario::parse(TWO).unwrap();
        let l = layout(&s, "plab-t-", Path::new("/run/prober-lab/plab-t-"));
        assert_eq!(
            l.namespaces()[..3],
            ["plab-t-rt", "plab-t-rt2", "plab-t-sw0"]
        );
        let st = setups(&s, &l);
        assert_eq!(st[0].ns, "plab-t-rt");
        assert_eq!(st[1].ns, "plab-t-rt2");
        let (rt, rt2) = (ns(&st, "plab-t-rt"), ns(&st, "plab-t-rt2"));
        assert_eq!(
            rt.links,
            ["link add t0 type veth peer name t0 netns plab-t-rt2"]
        );
        for line in [
            "addr add 192.168.56.1/24 dev z0",
            "addr add 192.168.64.1/30 dev t0",
            "route add 192.168.57.0/24 via 192.168.64.2",
            "route add 192.168.58.0/24 via 192.168.64.2",
        ] {
            assert!(
                rt.config.contains(&line.into()),
                "rt lacks {line}: {:#?}",
                rt.config
            );
        }
        for line in [
            "addr add 192.168.57.1/24 dev z1",
            "addr add 192.168.58.1/24 dev z2",
            "addr add 192.168.64.2/30 dev t0",
            "route add default via 192.168.64.1",
        ] {
            assert!(
                rt2.config.contains(&line.into()),
                "rt2 lacks {line}: {:#?}",
                rt2.config
            );
        }
        assert!(
            !rt.config.iter().any(|c| c.contains("dev z1")),
            "{:#?}",
            rt.config
        );
        assert!(
            ns(&st, "plab-t-sw1").links[0].ends_with("netns plab-t-rt2"),
            "{:#?}",
            ns(&st, "plab-t-sw1").links
        );
        assert!(
            rt2.sysctl
                .contains(&("net.ipv4.ip_forward".into(), "1".into()))
        );
        // Each fault on the router it names; between two zones behind the second, the second.
        let on = |r: &NsSetup, rule: &str| r.nft.contains(rule);
        let n1_n2 = "ip saddr 192.168.56.10 ip daddr 192.168.57.11";
        assert!(
            on(rt2, &format!("{n1_n2} tcp dport 10250 drop")),
            "{}",
            rt2.nft
        );
        assert!(!on(rt, "tcp dport 10250"), "{}", rt.nft);
        assert!(
            on(rt, &format!("{n1_n2} udp dport 8472 drop")),
            "{}",
            rt.nft
        );
        assert!(!on(rt2, "udp dport 8472"), "{}", rt2.nft);
        assert!(on(
            rt2,
            "ip saddr 192.168.57.11 ip daddr 192.168.58.12 tcp dport 6443 drop"
        ));
    }

    #[test]
    fn one_router_is_the_default_and_a_second_needs_zones() {
        let s = Scenario::parse("{}").unwrap();
        let l = layout(&s, "plab-t-", Path::new("/run/prober-lab/plab-t-"));
        assert_eq!(l.router2_ns, None);
        assert!(!setups(&s, &l)[0].links.iter().any(|k| k.contains("t0")));
        for (yaml, field) in [
            ("{routers: 2}", "at least 2 zones"),
            (
                "{routers: 3, zones: [{name: a, nodes: [n1]}, {name: b, nodes: [n2]}]}",
                "routers: 3",
            ),
            (
                "{faults: [{kind: firewall, action: drop, protocol: tcp, port: 1, from: [n1], place: second-router}]}",
                "faults[0].place",
            ),
        ] {
            let err = Scenario::parse(yaml).unwrap_err().to_string();
            assert!(err.contains(field), "{yaml}: {err}");
        }
    }
}
