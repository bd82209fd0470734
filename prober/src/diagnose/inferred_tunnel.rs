//! A tunnel no crafted probe went through (no tunnel endpoint known, or an encapsulation the
//! agent could not craft toward that node) is still diagnosed from its pattern: the hosts reach
//! each other, every path that rides the overlay between exactly those node pairs fails, and the
//! pods on each side work. That is the overlay's encapsulation blocked between them (IP protocol
//! 4 for IP-in-IP, the UDP port for VXLAN and Geneve), a `firewall-gap` flagged `inferred`, with
//! the pod, service and DNS failures as its consequences.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use probe_proto::Outcome;

use crate::model::{Family, PathClass};

use super::context::{Ctx, IPIP_PORT, Link, PodsOk, failed};
use super::finding::{Detail, Finding};
use super::firewall::{gap_finding, zone_blocks};

pub(super) fn inferred_tunnels(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) {
    let Some(port) = ctx.overlay_port else {
        return;
    };
    let udp = ctx.overlay_udp;
    // Inferred, never probed: the tunnel over one underlay family.
    let tunnel = |from: u32, to: u32, family: Family| Link {
        from,
        to,
        udp,
        port,
        family,
    };
    let pods_ok = ctx.pods_ok();
    let Survey {
        probed,
        hosts_ok,
        riding,
    } = survey(ctx, &pods_ok, udp, port);
    // Per node pair (both ways): the tunnel families dead between them; per family, the pairs
    // whose tunnel the pattern could judge.
    let mut dead: BTreeMap<(u32, u32), Vec<Family>> = BTreeMap::new();
    let mut tried: BTreeMap<Family, BTreeSet<(u32, u32)>> = BTreeMap::new();
    let mut ev: BTreeMap<(u32, u32, Family), Vec<usize>> = BTreeMap::new();
    for (&((a, b), family), ride) in &riding {
        let unprobed = !probed.contains(&(a, b, family)) && !probed.contains(&(b, a, family));
        if !unprobed || !hosts_ok.contains(&(a, b, family)) {
            continue;
        }
        tried.entry(family).or_default().extend([(a, b), (b, a)]);
        // Dead both ways, and the pods on each side work in the families that failed: the
        // tunnel between them.
        let pods_fine = ride
            .pod_families
            .iter()
            .all(|&f| pods_ok.in_family(a, f) && pods_ok.in_family(b, f));
        if !ride.any_ok && !ride.fails.is_empty() && pods_fine {
            for pair in [(a, b), (b, a)] {
                dead.entry(pair).or_default().push(family);
            }
            ev.insert((a, b, family), ride.fails.clone());
        }
    }
    if dead.is_empty() {
        return;
    }
    // A tunnel dead in both families is one cause; dead in one, that family's.
    let mut by_families: BTreeMap<Vec<Family>, BTreeSet<(u32, u32)>> = BTreeMap::new();
    for (pair, mut fams) in dead {
        fams.sort_unstable();
        fams.dedup();
        by_families.entry(fams).or_default().insert(pair);
    }
    let zone = |n: u32| ctx.inv.nodes[n as usize].zone.as_deref();
    for (fams, pairs) in by_families {
        let tried_pairs: BTreeSet<(u32, u32)> = fams
            .iter()
            .filter_map(|f| tried.get(f))
            .flatten()
            .copied()
            .collect();
        for (from, to, both) in zone_blocks(&zone, &pairs, &tried_pairs) {
            let links: HashSet<Link> = from
                .iter()
                .flat_map(|&x| {
                    to.iter().flat_map({
                        let fams = &fams;
                        move |&y| {
                            fams.iter()
                                .flat_map(move |&f| [tunnel(x, y, f), tunnel(y, x, f)])
                        }
                    })
                })
                .collect();
            let cons: Vec<usize> = ev
                .iter()
                .filter(|((a, b, f), _)| links.contains(&tunnel(*a, *b, *f)))
                .flat_map(|(_, v)| v.iter().copied())
                .collect();
            // The same tunnel of the other family carries pods between these very nodes: the
            // cause is this family's alone.
            let other_ok = match fams[..] {
                [f] => links.iter().all(|l| {
                    riding
                        .get(&((l.from.min(l.to), l.from.max(l.to)), f.other()))
                        .is_some_and(|r| r.any_ok)
                }),
                _ => false,
            };
            emit_gap(
                ctx,
                findings,
                (&fams, other_ok),
                (&from, &to, both),
                &links,
                cons,
            );
        }
    }
}

/// The inferred gap of the tunnel `links` over `fams` (`only`: the other family's works), with
/// `cons` (the pod paths riding it) and everything else that needs it.
fn emit_gap(
    ctx: &mut Ctx<'_>,
    findings: &mut Vec<Finding>,
    (fams, only): (&[Family], bool),
    (from, to, both): (&[u32], &[u32], bool),
    links: &HashSet<Link>,
    cons: Vec<usize>,
) {
    let (udp, port) = (ctx.overlay_udp, ctx.overlay_port.unwrap_or_default());
    let mut f = gap_finding(ctx, (udp, port, fams, only), (from, to, both), false, &[]);
    let what = if port == IPIP_PORT && !udp {
        "IP protocol 4".to_string()
    } else {
        format!("udp/{port}")
    };
    f.summary = format!(
        "{} — inferred, not probed: no crafted {} packet could be sent between these nodes; the hosts reach each other, every pod path between them fails and the pods on each side work, so {what} is what is blocked",
        f.summary, ctx.overlay_name
    );
    if let Detail::FirewallGap(gap) = &mut f.detail {
        gap.inferred = true;
    }
    // The underlay family of the tunnel is the cause's, whatever the pods' own.
    if let ([family], true) = (fams, ctx.dual_stack) {
        f.family = Some(*family);
    }
    // The rest that rides those tunnels (DNS to a pod there, the Service's pods) follows.
    let mut all: Vec<usize> = cons;
    for (i, r) in ctx.results.iter().enumerate() {
        if failed(&r)
            && !ctx.explained.contains(&i)
            && !all.contains(&i)
            && r.path != PathClass::NodeConfig
            && ctx.needs(&r).iter().any(|l| links.contains(l))
        {
            all.push(i);
        }
    }
    // The pods' own paths across the pair are the pattern that proves it; the rest follows.
    let (ev, rest): (Vec<usize>, Vec<usize>) = all.into_iter().partition(|&i| {
        matches!(
            ctx.results.at(i).path,
            PathClass::PodToPod | PathClass::NodeToPod
        )
    });
    ctx.emit(findings, f, &ev, &rest);
}

/// What the run says about each node pair's tunnel, per underlay family: a tunnel open over
/// IPv4 says nothing of the same tunnel over IPv6.
struct Survey {
    /// Tunnels (sender, receiver, family) a crafted probe measured: those are the firewall
    /// rule's to judge. A probe that could not be sent (`error`) measured nothing.
    probed: HashSet<(u32, u32, Family)>,
    /// Host pairs (lower index first) that reach each other on the underlay of a family,
    /// either way.
    hosts_ok: HashSet<(u32, u32, Family)>,
    /// Per unordered node pair and tunnel family: what rides that tunnel.
    riding: BTreeMap<((u32, u32), Family), Riding>,
}

/// The paths that ride one tunnel between two nodes.
#[derive(Default)]
struct Riding {
    /// The unexplained failed results.
    fails: Vec<usize>,
    /// Whether any of them got through.
    any_ok: bool,
    /// The families of the failed results' own addresses (the pods'), which may differ from
    /// the tunnel's.
    pod_families: BTreeSet<Family>,
}

fn survey(ctx: &Ctx<'_>, pods_ok: &PodsOk, udp: bool, port: u16) -> Survey {
    let mut probed: HashSet<(u32, u32, Family)> = HashSet::new();
    let mut hosts_ok: HashSet<(u32, u32, Family)> = HashSet::new();
    let mut riding: BTreeMap<((u32, u32), Family), Riding> = BTreeMap::new();
    for (i, r) in ctx.results.iter().enumerate() {
        if let Some(l) = ctx.direct(&r, pods_ok) {
            if Ctx::is_vxlan(&r) {
                if r.result.outcome != Outcome::Error {
                    probed.insert((l.from, l.to, l.family));
                }
            } else if r.result.outcome.is_ok() {
                hosts_ok.insert((l.from.min(l.to), l.from.max(l.to), l.family));
            }
            continue;
        }
        if Ctx::is_vxlan(&r) {
            continue;
        }
        let Some(a) = ctx.from(&r) else { continue };
        let tunnels: BTreeSet<((u32, u32), Family)> = ctx
            .needs(&r)
            .into_iter()
            .filter(|l| l.udp == udp && l.port == port)
            .map(|l| ((l.from.min(l.to), l.from.max(l.to)), l.family))
            .collect();
        // Only a path that needs exactly one pair's tunnel speaks for that pair.
        let [key] = tunnels.into_iter().collect::<Vec<_>>()[..] else {
            continue;
        };
        let (pair, _) = key;
        if pair.0 != a && pair.1 != a {
            continue;
        }
        let e = riding.entry(key).or_default();
        if r.result.outcome.is_ok() {
            e.any_ok = true;
        } else if failed(&r) && !ctx.explained.contains(&i) {
            e.fails.push(i);
            e.pod_families.insert(r.to.family());
        }
    }
    Survey {
        probed,
        hosts_ok,
        riding,
    }
}
