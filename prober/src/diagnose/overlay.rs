//! The overlay and its MTU: pod traffic that fails although the encapsulation (VXLAN, Geneve or
//! IP-in-IP) gets through both ways, and full-size packets that vanish while small ones pass —
//! between pods, or (preflight) between hosts with DF set at the underlay MTU the overlay needs.

use std::collections::{BTreeSet, HashSet};

use probe_proto::Outcome;

use crate::model::{AgentKind, Family, PathClass, Protocol, Record};

use super::context::{Ctx, Link, failed, list, names_text};
use super::finding::{Finding, Mtu, Overlay, Severity};

/// A direction (from, to) over one family: IPv4 getting through says nothing of IPv6.
type Dir = (u32, u32, Family);

/// What got through, per direction and family.
struct Seen {
    /// Crafted overlay datagrams confirmed decapsulated (in the tunnel's family).
    vxlan_ok: HashSet<Dir>,
    /// Small pod-to-pod packets.
    small_ok: HashSet<Dir>,
    /// Full-size pod-to-pod packets.
    big_ok: HashSet<Dir>,
    /// Anything between two hosts other than a full-size packet: the underlay path works.
    host_ok: HashSet<Dir>,
    /// Pairs the overlay carried some probe between: a lone failure there is not a broken route
    /// (a missing route or fdb entry fails every probe of the pair); under loss it is the loss's.
    carried: HashSet<Dir>,
}

fn seen(ctx: &Ctx<'_>) -> Seen {
    let mut s = Seen {
        vxlan_ok: HashSet::new(),
        small_ok: HashSet::new(),
        big_ok: HashSet::new(),
        host_ok: HashSet::new(),
        carried: HashSet::new(),
    };
    for r in ctx.results.iter().filter(|r| r.result.outcome.is_ok()) {
        let (Some(a), Some(b)) = (ctx.from(&r), ctx.to(&r)) else {
            continue;
        };
        let dir = (a, b, r.to.family());
        if Ctx::is_vxlan(&r) {
            s.vxlan_ok.insert(dir);
        }
        if r.path == PathClass::PodToPod {
            s.small_ok.insert(dir);
        }
        if Ctx::is_mtu(&r) {
            s.big_ok.insert(dir);
        }
        if r.from.agent == AgentKind::Host
            && r.to.agent != Some(AgentKind::Pod)
            && !is_underlay_mtu(&r)
        {
            s.host_ok.insert(dir);
        }
        if matches!(r.path, PathClass::PodToPod | PathClass::NodeToPod) && !Ctx::is_mtu(&r) {
            s.carried.insert(dir);
        }
    }
    s
}

/// A full-size packet with DF set from one host to another (preflight's underlay MTU probe).
fn is_underlay_mtu(r: &Record<'_>) -> bool {
    r.path == PathClass::Overlay
        && r.to.agent == Some(AgentKind::Host)
        && r.to.protocol == Protocol::Icmp
}

pub(super) fn overlay_and_mtu(
    ctx: &mut Ctx<'_>,
    findings: &mut Vec<Finding>,
    blocked: &HashSet<Link>,
) {
    // Native routing has no encapsulation to blame, but its pods' MTU is probed all the same.
    let port = ctx.overlay_port;
    let Seen {
        vxlan_ok,
        small_ok,
        big_ok,
        host_ok,
        carried,
    } = seen(ctx);
    // In a run that loses packets, a full-size packet lost one way while one got through the
    // other way between the same pods is the loss's: a path too small for the overlay's packets
    // drops them both ways (the encapsulated packet is the same size over the same links).
    let lossy = ctx.lossy_ends().is_some();
    let mut mtu: Vec<usize> = Vec::new();
    let mut underlay: Vec<usize> = Vec::new();
    let mut overlay: Vec<usize> = Vec::new();
    for (i, r) in ctx.results.iter().enumerate() {
        if !failed(&r) || ctx.explained.contains(&i) {
            continue;
        }
        let (Some(a), Some(b)) = (ctx.from(&r), ctx.to(&r)) else {
            continue;
        };
        if a == b || ctx.needs(&r).iter().any(|l| blocked.contains(l)) {
            continue;
        }
        let overlay_path = matches!(
            r.path,
            PathClass::PodToPod | PathClass::NodeToPod | PathClass::Overlay
        ) && !Ctx::is_vxlan(&r);
        let family = r.to.family();
        let tunnel = ctx.tunnel_family(family);
        if Ctx::is_mtu(&r)
            && r.result.outcome == Outcome::Timeout
            && small_ok.contains(&(a, b, family))
        {
            if !(lossy && big_ok.contains(&(b, a, family))) {
                mtu.push(i);
            }
        } else if is_underlay_mtu(&r) {
            // Too big for the path: silence (a black hole) or an ICMP "fragmentation needed";
            // it counts only where smaller packets between the same hosts get through.
            if host_ok.contains(&(a, b, family)) {
                underlay.push(i);
            }
        } else if overlay_path
            && port.is_some()
            && vxlan_ok.contains(&(a, b, tunnel))
            && vxlan_ok.contains(&(b, a, tunnel))
            && !carried.contains(&(a, b, family))
        {
            overlay.push(i);
        }
    }
    pod_mtu(ctx, findings, &mtu, &big_ok);
    underlay_mtu(ctx, findings, &underlay);
    if !overlay.is_empty() {
        let pairs: BTreeSet<(u32, u32)> = overlay
            .iter()
            .filter_map(|&i| Some((ctx.from(&ctx.results.at(i))?, ctx.to(&ctx.results.at(i))?)))
            .collect();
        let names = list(ctx, &common_nodes(&pairs));
        let mut f = Finding::new(
            Overlay {
                nodes: names.clone(),
            },
            Severity::Error,
            format!(
                "overlay traffic fails although {} is open both ways ({} receipts confirmed){}: routes, fdb or neighbour entries for the {} device are missing or wrong",
                if ctx.overlay_udp {
                    format!("udp/{}", port.unwrap_or_default())
                } else {
                    "IP protocol 4".into()
                },
                ctx.overlay_name,
                if names.is_empty() {
                    String::new()
                } else {
                    format!(" on {}", names_text(&names))
                },
                ctx.overlay_name,
            ),
        );
        f.fix.push("compare `ip route`, `bridge fdb show dev flannel.1` and `ip neigh show dev flannel.1` on the nodes involved with the other nodes; restart the CNI agent there".into());
        ctx.emit(findings, f, &overlay, &[]);
    }
}

/// Full-size packets between pods that vanish while small ones pass: an MTU black hole. Over
/// IPv6 alone, while full-size IPv4 packets between the same pods pass, it is `ICMPv6` Packet
/// Too Big filtered on the way: IPv6 routers never fragment, so path MTU discovery is all
/// there is, and it needs those messages back.
fn pod_mtu(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>, mtu: &[usize], big_ok: &HashSet<Dir>) {
    if mtu.is_empty() {
        return;
    }
    let family = ctx.family_of(mtu.iter().copied());
    let ptb_filtered = family == Some(Family::Ipv6)
        && mtu.iter().all(|&i| {
            let r = ctx.results.at(i);
            matches!((ctx.from(&r), ctx.to(&r)), (Some(a), Some(b)) if big_ok.contains(&(a, b, Family::Ipv4)))
        });
    // What the probes sent: the inventory's MTU, or each pod's own interface MTU.
    let size = mtu
        .iter()
        .filter_map(|&i| ctx.results.at(i).result.packet_size)
        .max()
        .or_else(|| {
            ctx.inv
                .cluster
                .overlay
                .as_ref()
                .and_then(crate::plan::pod_mtu)
        })
        .unwrap_or(0);
    let pairs: BTreeSet<(u32, u32)> = mtu
        .iter()
        .filter_map(|&i| Some((ctx.from(&ctx.results.at(i))?, ctx.to(&ctx.results.at(i))?)))
        .collect();
    let nodes = common_nodes(&pairs);
    let names = list(ctx, &nodes);
    let pair_text: Vec<String> = pairs
        .iter()
        .map(|(a, b)| format!("{}->{}", ctx.name(*a), ctx.name(*b)))
        .collect();
    let nodes_text = if names.is_empty() {
        String::new()
    } else {
        format!(" to and from {}", names_text(&names))
    };
    let summary = if ptb_filtered {
        format!(
            "full-size IPv6 packets ({size} bytes) between pods vanish while small ones and full-size IPv4 packets pass ({}): ICMPv6 Packet Too Big (type 2) is filtered on the way{nodes_text}, so IPv6 path MTU discovery cannot work",
            pair_text.join(", ")
        )
    } else {
        let over = match family {
            Some(f) if ctx.dual_stack => format!(" over {f}"),
            _ => String::new(),
        };
        format!(
            "full-size packets ({size} bytes) between pods vanish{over} while small ones pass ({}): the underlay path MTU{nodes_text} is below what the overlay needs",
            pair_text.join(", ")
        )
    };
    let mut f = Finding::new(
        Mtu {
            nodes: names.clone(),
        },
        Severity::Error,
        summary,
    );
    // The underlay must carry the pods' packets plus the encapsulation (none: native routing).
    let overhead = u32::from(
        ctx.inv
            .cluster
            .overlay
            .as_ref()
            .map_or(0, |o| crate::plan::encapsulation_overhead(o.mode())),
    );
    // The underlay that carries these packets: the pods' own family under native routing, else
    // the tunnel's (IPv6 pods ride an IPv4 tunnel where the CNI has no IPv6 one), whose outer
    // IPv6 header is 20 bytes longer than IPv4's.
    let v6 = family == Some(Family::Ipv6);
    let pods_family = family.unwrap_or(Family::Ipv4);
    let underlay_family = if overhead > 0 {
        ctx.tunnel_family(pods_family)
    } else {
        pods_family
    };
    let overhead = overhead
        + if underlay_family == Family::Ipv6 && overhead > 0 {
            20
        } else {
            0
        };
    let underlay = u32::from(size) + overhead;
    if let Some(&(a, b)) = pairs.iter().next() {
        f.fix.push(ping_line(ctx, a, b, underlay, underlay_family));
    }
    if v6 {
        f.fix.extend(packet_too_big_lines(ctx, &nodes));
    }
    if ptb_filtered {
        f.notes.push("IPv4 packets of the same size pass between the same pods, so the path can carry them: it is the Packet Too Big messages that never arrive, and the firewalls on the way (and each node's) must let ICMPv6 type 2 through".into());
    } else {
        f.fix.push(if overhead == 0 {
        format!("raise the underlay MTU to {underlay}, or lower the pods' MTU to the underlay's")
    } else {
        format!(
            "raise the underlay MTU to {underlay}, or lower the CNI's MTU to the underlay's minus {overhead}"
        )
        });
    }
    f.notes.push(PING_NOTE.into());
    ctx.emit(findings, f, mtu, &[]);
}

/// The rules that let `ICMPv6` Packet Too Big (type 2) through on `nodes`, and through the
/// network. All three hooks: a node receives the message (input), forwards it to its pods
/// (forward) and, when it is the hop whose link is too small, sends it (output).
fn packet_too_big_lines(ctx: &Ctx<'_>, nodes: &[u32]) -> Vec<String> {
    let mut lines = vec!["on the firewalls and routers between the nodes: allow ICMPv6 type 2 (Packet Too Big); IPv6 path MTU discovery cannot work without it".to_string()];
    for &n in nodes.iter().take(5) {
        let name = ctx.name(n);
        lines.extend([
            format!("on {name} (nftables): for c in input forward output; do nft insert rule inet filter $c icmpv6 type packet-too-big accept; done"),
            format!("on {name} (ip6tables): for c in INPUT FORWARD OUTPUT; do ip6tables -I $c -p ipv6-icmp --icmpv6-type 2 -j ACCEPT; done"),
            format!("on {name} (firewalld): firewall-cmd --permanent --add-rich-rule='rule family=\"ipv6\" icmp-type name=\"packet-too-big\" accept' && firewall-cmd --reload"),
        ]);
    }
    lines
}

/// Full-size packets with DF between hosts that vanish while smaller ones pass: the underlay path
/// cannot carry the overlay's packets plus its encapsulation (preflight's check from the
/// candidate, before it joins).
fn underlay_mtu(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>, failed: &[usize]) {
    if failed.is_empty() {
        return;
    }
    let ov = ctx.inv.cluster.overlay.as_ref();
    let (mode, pod_mtu) = (
        ov.map_or("the overlay", |o| o.mode().as_str()),
        ov.and_then(crate::inventory::Overlay::mtu).unwrap_or(0),
    );
    let needed = ov.and_then(crate::plan::underlay_mtu_needed).unwrap_or(0);
    let pairs: BTreeSet<(u32, u32)> = failed
        .iter()
        .filter_map(|&i| Some((ctx.from(&ctx.results.at(i))?, ctx.to(&ctx.results.at(i))?)))
        .collect();
    let names = list(ctx, &common_nodes(&pairs));
    let pair_text: Vec<String> = pairs
        .iter()
        .map(|(a, b)| format!("{}->{}", ctx.name(*a), ctx.name(*b)))
        .collect();
    let measured: Vec<u32> = failed
        .iter()
        .filter_map(|&i| ctx.results.at(i).result.path_mtu)
        .filter(|&m| m < u32::from(needed))
        .collect();
    let path = measured.iter().min().map_or_else(String::new, |m| {
        format!(" (the kernel reports a path MTU of {m})")
    });
    let mut f = Finding::new(
        Mtu {
            nodes: names.clone(),
        },
        Severity::Error,
        format!(
            "{needed}-byte packets with DF set vanish between hosts while smaller ones pass ({}): the underlay path MTU{}{path} is below the {needed} bytes the overlay needs ({pod_mtu} for pods + {} for {mode})",
            pair_text.join(", "),
            if names.is_empty() {
                String::new()
            } else {
                format!(" to and from {}", names_text(&names))
            },
            needed.saturating_sub(pod_mtu),
        ),
    );
    if let Some(&(a, b)) = pairs.iter().next() {
        f.fix
            .push(ping_line(ctx, a, b, u32::from(needed), Family::Ipv4));
    }
    f.fix.push(format!(
        "raise the MTU of every link and router on the way to {needed}, or set the CNI's MTU to the path MTU minus {} before the join",
        needed.saturating_sub(pod_mtu)
    ));
    f.notes.push(PING_NOTE.into());
    ctx.emit(findings, f, failed, &[]);
}

/// How to read [`ping_line`]'s answer.
const PING_NOTE: &str = "the ping measures the path: lower -s until it passes; that size plus 28 (the IP and ICMP headers; 48 for IPv6) is the path MTU";

/// `on n1: ping -M do -s 1472 -c 1 192.168.56.12`: a `packet`-byte unfragmentable ping from `a`
/// to `b`'s address over `family` (a name would need a resolver that knows the nodes).
fn ping_line(ctx: &Ctx<'_>, a: u32, b: u32, packet: u32, family: Family) -> String {
    let (flag, headers) = match family {
        Family::Ipv4 => ("", 28),
        Family::Ipv6 => ("-6 ", 48),
    };
    let to = ctx
        .host_addr(b, family)
        .unwrap_or(std::net::IpAddr::V4(ctx.inv.nodes[b as usize].address));
    format!(
        "on {}: ping {flag}-M do -s {} -c 1 {to}",
        ctx.name(a),
        packet.saturating_sub(headers)
    )
}

/// The nodes that appear in every pair (the common end of a set of failing pairs), or, when no
/// node is common, every node involved.
fn common_nodes(pairs: &BTreeSet<(u32, u32)>) -> Vec<u32> {
    let all: BTreeSet<u32> = pairs.iter().flat_map(|(a, b)| [*a, *b]).collect();
    let common: Vec<u32> = all
        .iter()
        .copied()
        .filter(|n| pairs.iter().all(|(a, b)| a == n || b == n))
        .collect();
    if common.is_empty() {
        all.into_iter().collect()
    } else {
        common
    }
}
