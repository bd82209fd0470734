//! The fix lines for a firewall gap, written where the packets died: the network's firewall
//! (router, security group) when they died on the network, the receiving host's own rules
//! (nftables, iptables, firewalld, all restricted to the same sources) only on the hosts that
//! dropped them, and both, labelled, when the place is unknown. Address sets are written as the
//! fewest CIDR blocks that cover exactly them, so 99 nodes of a /24 are a handful of blocks.
//! Per family: IPv4 gets `ip saddr`, `iptables` and firewalld's `family="ipv4"`; IPv6 gets
//! `ip6 saddr` (in the same `inet` table), `ip6tables` and `family="ipv6"`, with compressed
//! addresses; a gap in both families gets both.

use crate::inventory::Inventory;
use crate::model::{Family, Protocol};

use super::context::Ctx;
use super::{Hop, Where};

/// The nodes' host addresses over `families`, summarised exactly as CIDR blocks (a lone address
/// stays bare), IPv4 first.
fn addrs(ctx: &Ctx<'_>, nodes: &[u32], families: &[Family]) -> Vec<String> {
    let list: Vec<std::net::IpAddr> = families
        .iter()
        .flat_map(|&f| nodes.iter().filter_map(move |&n| ctx.host_addr(n, f)))
        .collect();
    super::cidr::summarise_any(&list)
}

/// A family's words in a host rule: the nftables match, the iptables command and firewalld's
/// family.
struct Words {
    nft: &'static str,
    iptables: &'static str,
    firewalld: &'static str,
}

fn words(family: Family) -> Words {
    match family {
        Family::Ipv4 => Words {
            nft: "ip saddr",
            iptables: "iptables",
            firewalld: "ipv4",
        },
        Family::Ipv6 => Words {
            nft: "ip6 saddr",
            iptables: "ip6tables",
            firewalld: "ipv6",
        },
    }
}

/// At most this many receiving nodes get their own fix lines.
const FIX_NODES: usize = 5;

/// `between zone a and zone b` when both sides have one zone each, else empty.
fn zones(inv: &Inventory, from: &[u32], to: &[u32]) -> String {
    let zone = |ns: &[u32]| {
        let mut z: Vec<&str> = ns
            .iter()
            .filter_map(|&n| inv.nodes[n as usize].zone.as_deref())
            .collect();
        z.sort_unstable();
        z.dedup();
        (z.len() == 1 && ns.iter().all(|&n| inv.nodes[n as usize].zone.is_some())).then(|| z[0])
    };
    match (zone(from), zone(to)) {
        (Some(a), Some(b)) if a != b => format!(" between zone {a} and zone {b}"),
        _ => String::new(),
    }
}

/// What a fix line calls the traffic: `udp/8472`, or `IP protocol 4 (IP-in-IP)`.
fn traffic(proto: Protocol, port: u16) -> String {
    if proto == Protocol::Ipip {
        "IP protocol 4 (IP-in-IP)".into()
    } else {
        format!("{proto}/{port}")
    }
}

/// The rules one receiving host needs to accept IP protocol 4 from `srcs`.
fn ipip_host_rules(name: &str, src: &[String], w: &Words) -> Vec<String> {
    let rich: Vec<String> = src
        .iter()
        .map(|a| format!("firewall-cmd --permanent --add-rich-rule='rule family=\"{}\" source address=\"{a}\" protocol value=\"ipip\" accept'", w.firewalld))
        .collect();
    // IPv6 has no `ip protocol`: its next header is read through `meta l4proto`.
    let proto = if w.firewalld == "ipv6" {
        "meta l4proto 4"
    } else {
        "ip protocol 4"
    };
    vec![
        format!(
            "on {name} (nftables): nft insert rule inet filter input {} {{ {} }} {proto} accept",
            w.nft,
            src.join(", ")
        ),
        format!(
            "on {name} ({0}): {0} -I INPUT -p 4 -s {1} -j ACCEPT",
            w.iptables,
            src.join(",")
        ),
        // The rich-rule form of `--add-protocol=ipip`, restricted to the same sources.
        format!(
            "on {name} (firewalld): {} && firewall-cmd --reload",
            rich.join(" && ")
        ),
    ]
}

/// The rules one receiving host needs to accept `proto`/`port` from `srcs` over `family`.
fn host_rules(
    ctx: &Ctx<'_>,
    recv: u32,
    srcs: &[u32],
    (proto, port): (Protocol, u16),
    family: Family,
) -> Vec<String> {
    let name = ctx.name(recv);
    let src = addrs(ctx, srcs, &[family]);
    if src.is_empty() {
        return Vec::new();
    }
    let w = words(family);
    if proto == Protocol::Ipip {
        return ipip_host_rules(name, &src, &w);
    }
    let rich: Vec<String> = src
        .iter()
        .map(|a| format!("firewall-cmd --permanent --add-rich-rule='rule family=\"{}\" source address=\"{a}\" port port=\"{port}\" protocol=\"{proto}\" accept'", w.firewalld))
        .collect();
    vec![
        format!(
            "on {name} (nftables): nft insert rule inet filter input {} {{ {} }} {proto} dport {port} accept",
            w.nft,
            src.join(", ")
        ),
        format!(
            "on {name} ({0}): {0} -I INPUT -p {proto} -s {1} --dport {port} -j ACCEPT",
            w.iptables,
            src.join(",")
        ),
        format!(
            "on {name} (firewalld): {} && firewall-cmd --reload",
            rich.join(" && ")
        ),
    ]
}

/// The fix lines that open `proto`/`port` from `from` to `to` (and back when `both`) over
/// `families`, at the places `where_` names (empty: unknown); the network's line names the hop
/// where they died, when known.
#[allow(clippy::too_many_arguments)]
pub(super) fn lines(
    ctx: &Ctx<'_>,
    families: &[Family],
    proto: Protocol,
    port: u16,
    (from, to): (&[u32], &[u32]),
    both: bool,
    where_: &[Where],
    hop: Option<&Hop>,
) -> Vec<String> {
    let inv = ctx.inv;
    let mut fix = Vec::new();
    let network = where_.contains(&Where::Network);
    let unknown = where_.is_empty();
    if network || unknown {
        fix.push(format!(
            "{}{}{}: allow {} from {} to {}{}",
            if unknown { "network side: " } else { "" },
            super::hop::device(hop),
            zones(inv, from, to),
            traffic(proto, port),
            addrs(ctx, from, families).join(", "),
            addrs(ctx, to, families).join(", "),
            if both { " and back" } else { "" }
        ));
        if proto == Protocol::Ipip {
            fix.push("in a cloud security group IP-in-IP is no TCP or UDP port, so \"all TCP\" and \"all UDP\" rules do not cover it: add a rule for protocol number 4 (AWS: custom protocol 4; GCP: protocol \"ipip\"; Azure does not carry IP-in-IP at all, use VXLAN there) with the same sources".into());
        }
    }
    for (recv, srcs) in receivers(inv, (from, to), both, where_)
        .iter()
        .take(FIX_NODES)
    {
        for l in families
            .iter()
            .flat_map(|&f| host_rules(ctx, *recv, srcs, (proto, port), f))
        {
            fix.push(if unknown {
                format!("host side: {l}")
            } else {
                l
            });
        }
    }
    fix
}

/// The receivers whose own rules must change, each with its senders: the hosts that dropped
/// the packets, or every receiver when where they died is unknown.
fn receivers(
    inv: &Inventory,
    (from, to): (&[u32], &[u32]),
    both: bool,
    where_: &[Where],
) -> Vec<(u32, Vec<u32>)> {
    let mut all: Vec<(u32, Vec<u32>)> = to.iter().map(|&t| (t, from.to_vec())).collect();
    if both {
        all.extend(from.iter().map(|&t| (t, to.to_vec())));
    }
    all.retain(|(r, _)| {
        where_.is_empty() || where_.contains(&Where::Host(inv.nodes[*r as usize].name.clone()))
    });
    all
}

/// What goes with [`lines`] that is no step to run: where the fault is not, that the place is
/// unknown, and the receivers beyond the first few whose host rules are the same.
pub(super) fn notes(
    inv: &Inventory,
    (from, to): (&[u32], &[u32]),
    both: bool,
    where_: &[Where],
) -> Vec<String> {
    let mut notes = Vec::new();
    let recv = receivers(inv, (from, to), both, where_);
    if where_.is_empty() {
        notes.push("where the packets are dropped is unknown: open the port on the network firewall if there is one between these hosts (the network side line), else on the receiving hosts (the host side lines)".into());
    }
    if where_.contains(&Where::Network) && recv.is_empty() {
        notes.push(
            "the hosts' own firewalls are not the cause: the packets never reached them".into(),
        );
    }
    if recv.len() > FIX_NODES {
        let rest: Vec<&str> = recv[FIX_NODES..]
            .iter()
            .map(|(n, _)| inv.nodes[*n as usize].name.as_str())
            .collect();
        notes.push(format!(
            "the same host rules, each with its own sources, are needed on {} more {}: {}",
            rest.len(),
            if rest.len() == 1 { "node" } else { "nodes" },
            rest.join(", ")
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Results;
    use crate::testutil::inventory;

    const V4: &[Family] = &[Family::Ipv4];

    #[test]
    fn address_sets_are_written_as_cidrs() {
        // 100 nodes, 192.168.56.10 to .109: n1 sends, the 99 others receive.
        let inv = inventory(100, 1, "flannel");
        let none = Results::new();
        let ctx = Ctx::new(&inv, &none);
        let (from, to) = (vec![0u32], (1..100).collect::<Vec<u32>>());
        let host = lines(
            &ctx,
            V4,
            Protocol::Udp,
            8472,
            (&to, &from),
            false,
            &[Where::Host("n1".into())],
            None,
        );
        let want = [
            "192.168.56.11",
            "192.168.56.12/30",
            "192.168.56.16/28",
            "192.168.56.32/27",
            "192.168.56.64/27",
            "192.168.56.96/29",
            "192.168.56.104/30",
            "192.168.56.108/31",
        ];
        assert!(
            host[0].contains(&format!(
                "ip saddr {{ {} }} udp dport 8472",
                want.join(", ")
            )),
            "{host:#?}"
        );
        assert!(
            host[1].contains(&format!("-s {} ", want.join(","))),
            "{host:#?}"
        );
        assert_eq!(
            host[2].matches("--add-rich-rule").count(),
            want.len(),
            "{host:#?}"
        );
        assert!(
            host[2].contains("source address=\"192.168.56.16/28\""),
            "{host:#?}"
        );
        let net = lines(
            &ctx,
            V4,
            Protocol::Udp,
            8472,
            (&to, &from),
            false,
            &[Where::Network],
            None,
        );
        assert!(
            net[0].contains(&format!("from {} to 192.168.56.10", want.join(", "))),
            "{net:#?}"
        );
        // Exact: no block covers an address outside the set (n1, 192.168.56.10).
        let covered: Vec<std::net::Ipv4Addr> = want
            .iter()
            .flat_map(|c| {
                let (a, len) = c.split_once('/').unwrap_or((c, "32"));
                let base = u32::from(a.parse::<std::net::Ipv4Addr>().unwrap());
                (0..1u32 << (32 - len.parse::<u32>().unwrap())).map(move |k| (base + k).into())
            })
            .collect();
        let expected: Vec<std::net::Ipv4Addr> =
            to.iter().map(|&n| inv.nodes[n as usize].address).collect();
        assert_eq!(covered, expected);
    }

    #[test]
    fn fixes_go_where_the_packets_died() {
        let inv = inventory(3, 1, "flannel");
        let none = Results::new();
        let ctx = Ctx::new(&inv, &none);
        let (from, to) = (vec![2u32], vec![0u32, 1]);
        let net = lines(
            &ctx,
            V4,
            Protocol::Udp,
            8472,
            (&from, &to),
            true,
            &[Where::Network],
            None,
        );
        assert!(
            net[0].starts_with("on the firewall, router or security group"),
            "{net:#?}"
        );
        assert!(
            !net.iter()
                .any(|l| l.contains("nft ") || l.contains("iptables ")),
            "{net:#?}"
        );
        assert!(
            net[0].ends_with("from 192.168.56.12 to 192.168.56.10/31 and back"),
            "{net:#?}"
        );
        // Issue 25, item 8: what is no step to run is a note, never a fix line.
        assert_eq!(net.len(), 1, "{net:#?}");
        assert_eq!(
            notes(&inv, (&from, &to), true, &[Where::Network]),
            ["the hosts' own firewalls are not the cause: the packets never reached them"]
        );
        let host = lines(
            &ctx,
            V4,
            Protocol::Udp,
            8472,
            (&from, &to),
            true,
            &[Where::Host("n3".into())],
            None,
        );
        assert!(host.iter().all(|l| l.starts_with("on n3 ")), "{host:#?}");
        assert_eq!(host.len(), 3, "{host:#?}");
        // firewalld restricted to the same sources as nft and iptables.
        let fw = host.iter().find(|l| l.contains("firewalld")).unwrap();
        for a in addrs(&ctx, &to, V4) {
            assert!(fw.contains(&format!("source address=\"{a}\"")), "{fw}");
            assert!(host[0].contains(&a) && host[1].contains(&a), "{host:#?}");
        }
        assert!(!fw.contains("--add-port"), "{fw}");
        assert_eq!(
            fw.matches("--add-rich-rule").count(),
            1,
            "one rule for the /31: {fw}"
        );
        let unknown = lines(
            &ctx,
            V4,
            Protocol::Tcp,
            6443,
            (&from, &to),
            false,
            &[],
            None,
        );
        let said = notes(&inv, (&from, &to), false, &[]);
        assert!(said[0].contains("unknown"), "{said:#?}");
        assert!(
            unknown.iter().any(|l| l.starts_with("network side: ")),
            "{unknown:#?}"
        );
        assert!(
            unknown
                .iter()
                .any(|l| l.starts_with("host side: on n1 (nftables)")),
            "{unknown:#?}"
        );
    }

    #[test]
    fn ipip_fixes_name_protocol_4_with_the_same_sources() {
        let inv = inventory(3, 1, "calico");
        let none = Results::new();
        let ctx = Ctx::new(&inv, &none);
        let (from, to) = (vec![0u32], vec![2u32]);
        let host = lines(
            &ctx,
            V4,
            Protocol::Ipip,
            0,
            (&from, &to),
            false,
            &[Where::Host("n3".into())],
            None,
        );
        let src = addrs(&ctx, &from, V4)[0].clone();
        assert_eq!(host.len(), 3, "{host:#?}");
        assert!(
            host[0].ends_with(&format!("ip saddr {{ {src} }} ip protocol 4 accept")),
            "{host:#?}"
        );
        assert!(
            host[1].contains(&format!("-p 4 -s {src} -j ACCEPT")),
            "{host:#?}"
        );
        assert!(
            host[2].contains(&format!(
                "source address=\"{src}\" protocol value=\"ipip\" accept"
            )),
            "{host:#?}"
        );
        assert!(!host.iter().any(|l| l.contains("dport")), "{host:#?}");
        let net = lines(
            &ctx,
            V4,
            Protocol::Ipip,
            0,
            (&from, &to),
            true,
            &[Where::Network],
            None,
        );
        assert!(
            net[0].contains("allow IP protocol 4 (IP-in-IP) from"),
            "{net:#?}"
        );
        assert!(
            net[1].contains("security group") && net[1].contains("protocol number 4"),
            "{net:#?}"
        );
    }
}
