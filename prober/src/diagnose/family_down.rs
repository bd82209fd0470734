//! A whole IP family dead on a node: every probe of one family to and from the node fails, on
//! every port and path class, while the other family works there (no IPv6 route or address, or
//! `ICMPv6` neighbour discovery filtered so no neighbour is ever resolved). One `partition`
//! finding per family naming the nodes and the family, never a pile of port gaps; its fix is
//! the family's address, route and (for IPv6) the `ICMPv6` types that must pass.

use std::collections::{BTreeMap, HashSet};

use crate::model::{Family, PathClass};

use super::context::{Ctx, failed, list, names_text};
use super::cutoff::probed_widely;
use super::finding::{Finding, Partition, PartitionState, Severity};

/// `ICMPv6` that IPv6 cannot work without: Packet Too Big (2, path MTU discovery) and neighbour
/// discovery (133-137: router solicitation and advertisement, neighbour solicitation and
/// advertisement, redirect), by their nftables and firewalld names.
const ICMPV6: [(u8, &str, &str); 6] = [
    (2, "packet-too-big", "packet-too-big"),
    (133, "nd-router-solicit", "router-solicitation"),
    (134, "nd-router-advert", "router-advertisement"),
    (135, "nd-neighbor-solicit", "neighbour-solicitation"),
    (136, "nd-neighbor-advert", "neighbour-advertisement"),
    (137, "nd-redirect", "redirect"),
];

pub(super) fn family_down(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) {
    if !ctx.dual_stack {
        // One family only: a node reaching nothing is `cutoff.rs`'s partition.
        return;
    }
    // Per (node, family): whether anything leaving or reaching the node got through, and the
    // failures with the node as an end.
    let mut ok: HashSet<(u32, Family)> = HashSet::new();
    let mut bad: BTreeMap<(u32, Family), Vec<usize>> = BTreeMap::new();
    for (i, r) in ctx.results.iter().enumerate() {
        let Some(a) = ctx.from(&r) else { continue };
        let ends: Vec<u32> = match ctx.to(&r) {
            Some(b) if b != a => vec![a, b],
            Some(_) => continue,
            None => vec![a],
        };
        let family = r.to.family();
        for e in ends {
            if r.result.outcome.is_ok() {
                ok.insert((e, family));
            } else if failed(&r) && !ctx.explained.contains(&i) {
                bad.entry((e, family)).or_default().push(i);
            }
        }
    }
    let mut down: BTreeMap<Family, Vec<(u32, Vec<usize>)>> = BTreeMap::new();
    for ((node, family), idx) in bad {
        if !ok.contains(&(node, family))
            && ok.contains(&(node, family.other()))
            && probed_widely(ctx, &idx)
        {
            down.entry(family).or_default().push((node, idx));
        }
    }
    for (family, nodes) in down {
        emit(ctx, findings, family, &nodes);
    }
}

fn emit(
    ctx: &mut Ctx<'_>,
    findings: &mut Vec<Finding>,
    family: Family,
    down: &[(u32, Vec<usize>)],
) {
    let nodes: Vec<u32> = down.iter().map(|(n, _)| *n).collect();
    let names = list(ctx, &nodes);
    let mut idx: Vec<usize> = down.iter().flat_map(|(_, v)| v.iter().copied()).collect();
    idx.sort_unstable();
    idx.dedup();
    // What else of the family needs the nodes (a Service or DNS pod behind them, a tunnel to
    // them) fails with them.
    for (i, r) in ctx.results.iter().enumerate() {
        if failed(&r)
            && !ctx.explained.contains(&i)
            && r.to.family() == family
            && ctx
                .needs(&r)
                .iter()
                .any(|l| nodes.contains(&l.from) || nodes.contains(&l.to))
        {
            idx.push(i);
        }
    }
    idx.sort_unstable();
    idx.dedup();
    // Host to host is what proves it; the pods' and Services' paths follow.
    let (ev, cons): (Vec<usize>, Vec<usize>) = idx.into_iter().partition(|&i| {
        let r = ctx.results.at(i);
        matches!(r.path, PathClass::NodeToNode | PathClass::NodeToApiserver) || Ctx::is_vxlan(&r)
    });
    let (cause, other) = match family {
        Family::Ipv6 => (
            "no IPv6 address or route, or ICMPv6 neighbour discovery filtered so no neighbour resolves",
            "IPv4",
        ),
        Family::Ipv4 => ("no IPv4 address or route, or ARP not answered", "IPv6"),
    };
    let mut f = Finding::new(
        Partition {
            state: PartitionState::Unreachable,
            nodes: names.clone(),
        },
        Severity::Error,
        format!(
            "{} cut off over {family}: no {family} probe to or from {} gets through on any port, while {other} works there ({cause})",
            if names.len() == 1 {
                format!("{} is", names[0])
            } else {
                format!("{} are", names_text(&names))
            },
            if names.len() == 1 { "it" } else { "them" },
        ),
    );
    f.family = Some(family);
    for &n in nodes.iter().take(5) {
        f.fix.extend(node_lines(ctx, n, family));
    }
    if family == Family::Ipv6 {
        f.notes.push("IPv6 needs ICMPv6: neighbour discovery (types 133-137) to find any neighbour, Packet Too Big (type 2) for path MTU discovery; where the node's own rules allow them, a switch or router on the way (RA guard, ND inspection, a security group without ICMPv6) may be what drops them".into());
    }
    if nodes.len() > 5 {
        f.notes.push(format!(
            "the same checks apply to the other {} nodes",
            nodes.len() - 5
        ));
    }
    ctx.emit(findings, f, &ev, &cons);
}

/// What to check and open on node `n` for `family`.
fn node_lines(ctx: &Ctx<'_>, n: u32, family: Family) -> Vec<String> {
    let name = ctx.name(n);
    // A peer's address of the family, to ask the route and neighbour for.
    let peer = (0..u32::try_from(ctx.inv.nodes.len()).unwrap_or(0))
        .filter(|&p| p != n)
        .find_map(|p| ctx.host_addr(p, family));
    let peer_text = peer.map_or_else(|| "PEER".to_string(), |a| a.to_string());
    match family {
        Family::Ipv6 => {
            let nft: Vec<&str> = ICMPV6.iter().map(|(_, nft, _)| *nft).collect();
            let types: Vec<String> = ICMPV6.iter().map(|(t, _, _)| t.to_string()).collect();
            let fwd: Vec<&str> = ICMPV6.iter().map(|(_, _, fwd)| *fwd).collect();
            vec![
                format!(
                    "on {name}: ip -6 addr show; ip -6 route get {peer_text}; ip -6 neigh show (a FAILED or INCOMPLETE neighbour: neighbour discovery gets no answer)"
                ),
                format!(
                    "on {name} (nftables): nft insert rule inet filter input icmpv6 type {{ {} }} accept",
                    nft.join(", ")
                ),
                format!(
                    "on {name} (ip6tables): for t in {}; do ip6tables -I INPUT -p ipv6-icmp --icmpv6-type $t -j ACCEPT; done",
                    types.join(" ")
                ),
                format!(
                    "on {name} (firewalld): for t in {}; do firewall-cmd --permanent --add-rich-rule=\"rule family=ipv6 icmp-type name=$t accept\"; done && firewall-cmd --reload",
                    fwd.join(" ")
                ),
            ]
        }
        Family::Ipv4 => vec![format!(
            "on {name}: ip -4 addr show; ip -4 route get {peer_text}; ip -4 neigh show (a FAILED or INCOMPLETE neighbour: ARP gets no answer)"
        )],
    }
}
