//! Firewall gaps: a port blocked between hosts that otherwise reach each other, grouped into
//! blocks of senders and receivers, with the direction and where the packets died.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use probe_proto::{Outcome, Receipt};

use crate::model::{Direction, Family, PathClass, Protocol};

use super::context::{Ctx, Link, failed, list, names_text};
use super::finding::{Finding, FirewallGap, Severity, Where};
use super::fix;

/// Finds the blocked ports, groups them into findings, and claims their consequences. Returns
/// the blocked links.
pub(super) fn firewall_gaps(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) -> HashSet<Link> {
    let mut measured: BTreeMap<Link, Vec<usize>> = BTreeMap::new();
    let mut reachable: HashSet<(u32, u32, Family)> = HashSet::new();
    let pods_ok = ctx.pods_ok();
    for (i, r) in ctx.results.iter().enumerate() {
        if ctx.explained.contains(&i) {
            continue;
        }
        if let Some(l) = ctx.direct(&r, &pods_ok) {
            measured.entry(l).or_default().push(i);
        }
        // Any working underlay exchange proves the two hosts reach each other (over its family).
        let underlay = matches!(
            r.path,
            PathClass::NodeToNode | PathClass::NodeToApiserver | PathClass::PodToNode
        ) || Ctx::is_vxlan(&r);
        if underlay
            && r.result.outcome.is_ok()
            && let (Some(a), Some(b)) = (ctx.from(&r), ctx.to(&r))
        {
            reachable.insert((a, b, r.to.family()));
        }
    }
    let blocked_outcome = |o: Outcome| matches!(o, Outcome::Timeout | Outcome::Rejected);
    let open = gap_pairs(ctx, &measured, reachable);
    let mut gaps: BTreeMap<(bool, u16), PairFamilies> = BTreeMap::new();
    let mut evidence: HashMap<Link, Vec<usize>> = HashMap::new();
    for (link, idx) in &measured {
        let all_blocked = idx.iter().all(|&i| {
            failed(&ctx.results.at(i)) && blocked_outcome(ctx.results.at(i).result.outcome)
        });
        if all_blocked && open.contains(&(link.from, link.to, link.family)) {
            gaps.entry((link.udp, link.port))
                .or_default()
                .entry((link.from, link.to))
                .or_default()
                .push(link.family);
            evidence.insert(*link, idx.clone());
        }
    }
    let mut blocked = HashSet::new();
    let mut new_findings = Vec::new();
    for ((udp, port), by_pair) in &gaps {
        // A pair blocked in both families is one cause with no family to it; a pair blocked in
        // one family only is that family's (the other one's working probes of the same port
        // are what shows it).
        let mut by_families: BTreeMap<Vec<Family>, BTreeSet<(u32, u32)>> = BTreeMap::new();
        for (pair, fams) in by_pair {
            by_families.entry(fams.clone()).or_default().insert(*pair);
        }
        for (fams, pairs) in &by_families {
            for (from, to, both) in port_blocks(ctx, &measured, (*udp, *port, fams), pairs) {
                let links = block_links((&from, &to, both), (*udp, *port, fams));
                let ev: Vec<usize> = links
                    .iter()
                    .flat_map(|l| evidence.get(l).cloned().unwrap_or_default())
                    .collect();
                blocked.extend(links.iter().copied());
                let reverse_ok = !both && reverse_works(ctx, &measured, &links);
                let other_ok = other_family_works(ctx, &measured, &links, fams);
                let f = gap_finding(
                    ctx,
                    (*udp, *port, fams, other_ok.is_some()),
                    (&from, &to, both),
                    reverse_ok,
                    &ev,
                );
                // The other family's working probes of the same pairs and port are what shows
                // the cause to be this family's: evidence too.
                let mut with = ev;
                with.extend(other_ok.unwrap_or_default());
                new_findings.push((f, with, links));
            }
        }
    }
    // Consequences: failed results needing a blocked link. The first finding that explains a
    // result claims it.
    let mut owner: HashMap<Link, usize> = HashMap::new();
    for (k, (_, _, links)) in new_findings.iter().enumerate() {
        for l in links {
            owner.entry(*l).or_insert(k);
        }
    }
    for (_, ev, _) in &new_findings {
        ctx.explained.extend(ev.iter().copied());
    }
    let mut consequences: Vec<Vec<usize>> = vec![Vec::new(); new_findings.len()];
    for (i, r) in ctx.results.iter().enumerate() {
        if !failed(&r) || ctx.explained.contains(&i) {
            continue;
        }
        if let Some(k) = ctx.needs(&r).iter().find_map(|l| owner.get(l)) {
            consequences[*k].push(i);
        }
    }
    for ((f, ev, _), cons) in new_findings.into_iter().zip(consequences) {
        ctx.emit(findings, f, &ev, &cons);
    }
    blocked
}

/// Blocked directed node pairs, each with the families it is blocked in.
type PairFamilies = BTreeMap<(u32, u32), Vec<Family>>;

/// The links a block covers: every sender to every receiver (and back when `both`), in each of
/// `families`.
fn block_links(
    (from, to, both): (&[u32], &[u32], bool),
    (udp, port, families): (bool, u16, &[Family]),
) -> Vec<Link> {
    let back: Vec<(u32, u32)> = if both {
        to.iter()
            .flat_map(|&b| from.iter().map(move |&a| (b, a)))
            .collect()
    } else {
        Vec::new()
    };
    from.iter()
        .flat_map(|&a| to.iter().map(move |&b| (a, b)))
        .chain(back)
        .filter(|(a, b)| a != b)
        .flat_map(|(a, b)| {
            families.iter().map(move |&family| Link {
                from: a,
                to: b,
                udp,
                port,
                family,
            })
        })
        .collect()
}

/// Groups blocked (from, to) pairs into (from-set, to-set) blocks, pairing a block with its
/// mirror image as one "both directions" block.
fn blocks(pairs: &BTreeSet<(u32, u32)>) -> Vec<Block> {
    // A port blocked between every pair of a set of nodes is one cause, not one per receiver.
    let nodes: BTreeSet<u32> = pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
    let k = nodes.len();
    if k >= 3 && pairs.len() == k * (k - 1) {
        let all: Vec<u32> = nodes.into_iter().collect();
        return vec![(all.clone(), all, true)];
    }
    let mut srcs_of: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for &(a, b) in pairs {
        srcs_of.entry(b).or_default().insert(a);
    }
    let mut by_srcs: BTreeMap<BTreeSet<u32>, BTreeSet<u32>> = BTreeMap::new();
    for (dst, srcs) in srcs_of {
        by_srcs.entry(srcs).or_default().insert(dst);
    }
    let mut blocks: Vec<(BTreeSet<u32>, BTreeSet<u32>)> = by_srcs.into_iter().collect();
    let mut out = Vec::new();
    while let Some((from, to)) = blocks.pop() {
        if let Some(j) = blocks.iter().position(|(f, t)| *f == to && *t == from) {
            blocks.remove(j);
            // Name the smaller side first: "between n3 and n1, n2".
            let (a, b) = if from.len() <= to.len() {
                (from, to)
            } else {
                (to, from)
            };
            out.push((a.into_iter().collect(), b.into_iter().collect(), true));
        } else {
            out.push((from.into_iter().collect(), to.into_iter().collect(), false));
        }
    }
    out.sort();
    out
}

/// The blocks of one port's blocked pairs over `families`, by zone where the inventory names
/// zones.
fn port_blocks(
    ctx: &Ctx<'_>,
    measured: &BTreeMap<Link, Vec<usize>>,
    (udp, port, families): (bool, u16, &[Family]),
    pairs: &BTreeSet<(u32, u32)>,
) -> Vec<Block> {
    let measured_pairs: BTreeSet<(u32, u32)> = measured
        .keys()
        .filter(|l| l.udp == udp && l.port == port && families.contains(&l.family))
        .map(|l| (l.from, l.to))
        .collect();
    let zone = |n: u32| ctx.inv.nodes[n as usize].zone.as_deref();
    zone_blocks(&zone, pairs, &measured_pairs)
}

/// Senders, receivers, and whether the block holds in both directions.
pub(super) type Block = (Vec<u32>, Vec<u32>, bool);

/// The blocks of a port's blocked pairs, a zone-to-zone block being one: where every measured
/// pair from zone X to zone Y is blocked, that is one block (with its mirror, one "both
/// directions" block), however many nodes the zones hold. The pairs left over (within a zone,
/// or a zone pair only partly blocked) are grouped by [`blocks`]; so is everything when some
/// node has no zone, and a port blocked between every pair stays one "everywhere" block.
pub(super) fn zone_blocks<'z>(
    zone: &dyn Fn(u32) -> Option<&'z str>,
    pairs: &BTreeSet<(u32, u32)>,
    measured: &BTreeSet<(u32, u32)>,
) -> Vec<Block> {
    let nodes: BTreeSet<u32> = pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
    let everywhere = nodes.len() >= 3 && pairs.len() == nodes.len() * (nodes.len() - 1);
    let zones: Option<BTreeSet<&str>> = nodes.iter().map(|&n| zone(n)).collect();
    if everywhere || zones.is_none_or(|z| z.len() < 2) {
        return blocks(pairs);
    }
    let by_zone = |set: &BTreeSet<(u32, u32)>| {
        let mut m: BTreeMap<(&'z str, &'z str), BTreeSet<(u32, u32)>> = BTreeMap::new();
        for &(a, b) in set {
            if let (Some(za), Some(zb)) = (zone(a), zone(b))
                && za != zb
            {
                m.entry((za, zb)).or_default().insert((a, b));
            }
        }
        m
    };
    let (blocked, tried) = (by_zone(pairs), by_zone(measured));
    // A zone pair is blocked when every pair measured between its nodes is.
    let whole: BTreeMap<(&str, &str), Block> = blocked
        .iter()
        .filter(|(zp, set)| tried.get(*zp) == Some(*set))
        .map(|(zp, set)| {
            let from: BTreeSet<u32> = set.iter().map(|&(a, _)| a).collect();
            let to: BTreeSet<u32> = set.iter().map(|&(_, b)| b).collect();
            (
                *zp,
                (from.into_iter().collect(), to.into_iter().collect(), false),
            )
        })
        .collect();
    let mut out = Vec::new();
    let mut rest = pairs.clone();
    for ((za, zb), (from, to, _)) in &whole {
        for p in blocked.get(&(*za, *zb)).into_iter().flatten() {
            rest.remove(p);
        }
        match whole.get(&(*zb, *za)) {
            // The mirror, named once, from the zone that sorts first.
            Some((f, t, _)) if f == to && t == from => {
                if za < zb {
                    out.push((from.clone(), to.clone(), true));
                }
            }
            _ => out.push((from.clone(), to.clone(), false)),
        }
    }
    out.extend(blocks(&rest));
    out.sort();
    out
}

/// The directed pairs a blocked port can be a gap between: those that reach each other
/// otherwise; those a firewall answered for with a named rejection (decisive: the pair is
/// connected up to it, whatever else was probed between them); and, unreachable otherwise, a
/// pair probed on too few ports or paths to tell a cut-off node from a closed port (a narrowed
/// run), whose failing port is all the run can name.
fn gap_pairs(
    ctx: &Ctx<'_>,
    measured: &BTreeMap<Link, Vec<usize>>,
    mut pairs: HashSet<(u32, u32, Family)>,
) -> HashSet<(u32, u32, Family)> {
    for (link, idx) in measured {
        if idx
            .iter()
            .any(|&i| named_rejection(&ctx.results.at(i)).is_some())
        {
            pairs.insert((link.from, link.to, link.family));
        }
    }
    for (a, b) in narrow_pairs(ctx, measured) {
        for f in [Family::Ipv4, Family::Ipv6] {
            pairs.extend([(a, b, f), (b, a, f)]);
        }
    }
    pairs
}

/// The address of the device that rejected `r` with an ICMP prohibited, when it named one.
pub(super) fn named_rejection(r: &crate::model::Record<'_>) -> Option<std::net::IpAddr> {
    (r.result.outcome == Outcome::Rejected)
        .then(|| r.result.icmp.and_then(|i| i.from))
        .flatten()
}

/// The node pairs (lower index first) whose results between them, both ways, span fewer than
/// two path classes or two underlay ports: the run probed too little between them to call the
/// pair unreachable rather than the port closed.
fn narrow_pairs(ctx: &Ctx<'_>, measured: &BTreeMap<Link, Vec<usize>>) -> HashSet<(u32, u32)> {
    let mut classes: HashMap<(u32, u32), HashSet<PathClass>> = HashMap::new();
    for r in ctx.results {
        if let (Some(a), Some(b)) = (ctx.from(&r), ctx.to(&r))
            && a != b
        {
            classes
                .entry((a.min(b), a.max(b)))
                .or_default()
                .insert(r.path);
        }
    }
    let mut ports: HashMap<(u32, u32), HashSet<(bool, u16)>> = HashMap::new();
    for l in measured.keys() {
        ports
            .entry((l.from.min(l.to), l.from.max(l.to)))
            .or_default()
            .insert((l.udp, l.port));
    }
    ports
        .into_iter()
        .filter(|(pair, p)| p.len() < 2 || classes.get(pair).is_none_or(|c| c.len() < 2))
        .map(|(pair, _)| pair)
        .collect()
}

/// The other family's probes of the same pairs and port, when `families` is one family and
/// every such probe got through (at least one was made): the cause is this family's alone.
fn other_family_works(
    ctx: &Ctx<'_>,
    measured: &BTreeMap<Link, Vec<usize>>,
    links: &[Link],
    families: &[Family],
) -> Option<Vec<usize>> {
    let [family] = families else { return None };
    let mut ok = Vec::new();
    for l in links {
        let twin = Link {
            family: family.other(),
            ..*l
        };
        if let Some(idx) = measured.get(&twin) {
            if !idx
                .iter()
                .all(|&i| ctx.results.at(i).result.outcome.is_ok())
            {
                return None;
            }
            ok.extend(idx);
        }
    }
    (!ok.is_empty()).then_some(ok)
}

fn reverse_works(ctx: &Ctx<'_>, measured: &BTreeMap<Link, Vec<usize>>, links: &[Link]) -> bool {
    let mut any = false;
    for l in links {
        let rev = Link {
            from: l.to,
            to: l.from,
            ..*l
        };
        match measured.get(&rev) {
            Some(idx)
                if idx
                    .iter()
                    .all(|&i| ctx.results.at(i).result.outcome.is_ok()) =>
            {
                any = true;
            }
            Some(_) => return false,
            None => {}
        }
    }
    any
}

/// Where the packets died, from the receiving hosts' receipts (every protocol) and the ICMP
/// offenders. A probe whose answer was lost on the way back names no place: the host took it.
fn gap_where(ctx: &Ctx<'_>, ev: &[usize]) -> Vec<Where> {
    let mut places = BTreeSet::new();
    for &i in ev {
        let r = &ctx.results.at(i);
        let to = r.to.node.clone().unwrap_or_default();
        match r.result.receipt {
            Some(Receipt::HostDropped) => {
                places.insert(Where::Host(to.clone()));
                continue;
            }
            Some(Receipt::NotArrived) => {
                places.insert(Where::Network);
                continue;
            }
            Some(Receipt::Answered | Receipt::Delivered) => continue,
            None => {}
        }
        if let Some(icmp) = r.result.icmp {
            if icmp.from == Some(r.to.address) {
                places.insert(Where::Host(to.clone()));
            } else if icmp.from.is_some() {
                places.insert(Where::Network);
            }
        }
    }
    places.into_iter().collect()
}

/// The zone `nodes` make up whole (every node of the inventory in that zone, and only those).
fn whole_zone<'a>(ctx: &Ctx<'a>, nodes: &[u32]) -> Option<&'a str> {
    let first = ctx
        .inv
        .nodes
        .get(*nodes.first()? as usize)?
        .zone
        .as_deref()?;
    let members = ctx
        .inv
        .nodes
        .iter()
        .filter(|n| n.zone.as_deref() == Some(first))
        .count();
    (members == nodes.len()
        && nodes
            .iter()
            .all(|&n| ctx.inv.nodes[n as usize].zone.as_deref() == Some(first)))
    .then_some(first)
}

/// The port a gap is on, as the summary names it: `udp/8472 (the overlay's VXLAN port)`,
/// `tcp/6443 (the API server)`, or the overlay's IP-in-IP.
fn port_text(ctx: &Ctx<'_>, udp: bool, port: u16, proto: Protocol) -> String {
    let overlay = udp == ctx.overlay_udp && ctx.overlay_port == Some(port);
    let what = if overlay && udp {
        format!(" (the overlay's {} port)", ctx.overlay_name)
    } else if !udp && ctx.api_backends.iter().any(|b| b.port == port) {
        " (the API server)".into()
    } else if !udp && port == 10250 {
        " (the kubelet)".into()
    } else {
        String::new()
    };
    // IP-in-IP has no port: its name stands where `proto/port` would.
    if proto == Protocol::Ipip {
        format!(
            "IP-in-IP (IP protocol 4{})",
            if overlay {
                ", the overlay's encapsulation"
            } else {
                ""
            }
        )
    } else {
        format!("{proto}/{port}{what}")
    }
}

/// The gap on `udp`/`port` over `families` from `from` to `to` (and back when `both`);
/// `only` when the other family's probes of the same pairs and port got through, which the
/// summary says ("blocked over IPv6 only ...; IPv4 works").
pub(super) fn gap_finding(
    ctx: &Ctx<'_>,
    (udp, port, families, only): (bool, u16, &[Family], bool),
    (from, to, both): (&[u32], &[u32], bool),
    reverse_ok: bool,
    ev: &[usize],
) -> Finding {
    let proto = Link {
        from: 0,
        to: 0,
        udp,
        port,
        family: Family::Ipv4,
    }
    .protocol();
    // One family in a run of both is named; blocked in both, or in a single-stack run, it is a
    // plain gap.
    let (blocked, works) = match families {
        [f] if only => (
            format!("is blocked over {f} only,"),
            format!("; {} works", f.other()),
        ),
        [f] if ctx.dual_stack => (format!("is blocked over {f}"), String::new()),
        _ => ("is blocked".to_string(), String::new()),
    };
    let (fn_, tn) = (list(ctx, from), list(ctx, to));
    // A side that is a whole zone is named by its zone.
    let side = |nodes: &[u32], names: &[String]| match whole_zone(ctx, nodes) {
        Some(z) => format!("zone {z} ({})", names_text(names)),
        None => names_text(names),
    };
    let what = port_text(ctx, udp, port, proto);
    let summary = if both && from == to {
        // A sample's "every pair" would claim pairs that were never probed.
        let scope = match (from.len() == ctx.inv.nodes.len(), ctx.sampled) {
            (true, false) => format!("everywhere: between every pair of the {} nodes", from.len()),
            (true, true) => format!("on every sampled pair of the {} nodes", from.len()),
            (false, false) => format!("between every pair of {}", names_text(&fn_)),
            (false, true) => format!("between every sampled pair of {}", names_text(&fn_)),
        };
        format!("{what} {blocked} {scope}, in both directions{works}")
    } else if both {
        format!(
            "{what} {blocked} between {} and {}, in both directions{works}",
            side(from, &fn_),
            side(to, &tn)
        )
    } else {
        let rev = if reverse_ok {
            "; the reverse direction works"
        } else {
            ""
        };
        format!(
            "{what} {blocked} from {} to {}{rev}{works}",
            side(from, &fn_),
            side(to, &tn)
        )
    };
    let summary = match rejected_by(ctx, ev) {
        Some(by) => format!("{summary} (rejected by {by}: ICMP administratively prohibited)"),
        None => summary,
    };
    let where_ = gap_where(ctx, ev);
    let hop = super::hop::gap_hop(ctx, ev, &where_, from);
    let summary = match &hop {
        Some(h) => format!(
            "{summary}{}",
            super::hop::summary_words(h, &names_text(&fn_))
        ),
        None => summary,
    };
    // Written once `where` is known: the lines go where the packets died.
    let fix = fix::lines(
        ctx,
        families,
        proto,
        port,
        (from, to),
        both,
        &where_,
        hop.as_ref(),
    );
    let notes = fix::notes(ctx.inv, (from, to), both, &where_);
    let mut f = Finding::new(
        FirewallGap {
            protocol: proto,
            port: (proto != Protocol::Ipip).then_some(port),
            from: fn_,
            to: tn,
            direction: if both {
                Direction::Both
            } else {
                Direction::One
            },
            where_,
            inferred: false,
            hop,
        },
        Severity::Error,
        summary,
    );
    f.fix = fix;
    f.notes = notes;
    f
}

/// The devices other than the receivers that rejected the evidence, for the summary.
fn rejected_by(ctx: &Ctx<'_>, ev: &[usize]) -> Option<String> {
    let by: BTreeSet<std::net::IpAddr> = ev
        .iter()
        .filter_map(|&i| {
            let r = ctx.results.at(i);
            named_rejection(&r).filter(|&a| a != r.to.address)
        })
        .collect();
    (!by.is_empty()).then(|| {
        by.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    })
}
