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
    // Inferred, never probed: the tunnel of either family.
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
    let mut dead: BTreeSet<(u32, u32)> = BTreeSet::new();
    let mut tried: BTreeSet<(u32, u32)> = BTreeSet::new();
    let mut ev: BTreeMap<(u32, u32), Vec<usize>> = BTreeMap::new();
    for (&(a, b), (fails, any_ok)) in &riding {
        let unprobed = !probed.contains(&(a, b)) && !probed.contains(&(b, a));
        if !unprobed || !hosts_ok.contains(&(a, b)) {
            continue;
        }
        tried.extend([(a, b), (b, a)]);
        // Dead both ways, and the pods on each side work: the tunnel between them.
        if !any_ok && !fails.is_empty() && pods_ok.contains(a) && pods_ok.contains(b) {
            dead.extend([(a, b), (b, a)]);
            ev.insert((a, b), fails.clone());
        }
    }
    if dead.is_empty() {
        return;
    }
    let zone = |n: u32| ctx.inv.nodes[n as usize].zone.as_deref();
    for (from, to, both) in zone_blocks(&zone, &dead, &tried) {
        let links: HashSet<Link> = from
            .iter()
            .flat_map(|&x| {
                to.iter().flat_map(move |&y| {
                    [Family::Ipv4, Family::Ipv6]
                        .into_iter()
                        .flat_map(move |f| [tunnel(x, y, f), tunnel(y, x, f)])
                })
            })
            .collect();
        let cons: Vec<usize> = ev
            .iter()
            .filter(|((a, b), _)| links.contains(&tunnel(*a, *b, Family::Ipv4)))
            .flat_map(|(_, v)| v.iter().copied())
            .collect();
        let mut fams: Vec<Family> = cons
            .iter()
            .map(|&i| ctx.results.at(i).to.family())
            .collect();
        fams.sort_unstable();
        fams.dedup();
        let mut f = gap_finding(
            ctx,
            (udp, port, &fams, false),
            (&from, &to, both),
            false,
            &[],
        );
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
}

/// What the run says about each node pair's tunnel.
struct Survey {
    /// Tunnels a crafted probe measured: those are the firewall rule's to judge. A probe that
    /// could not be sent (`error`) measured nothing.
    probed: HashSet<(u32, u32)>,
    /// Host pairs (lower index first) that reach each other on the underlay, either way.
    hosts_ok: HashSet<(u32, u32)>,
    /// Per unordered node pair: the unexplained failed results that ride the tunnel between
    /// them, and whether any such result got through.
    riding: BTreeMap<(u32, u32), (Vec<usize>, bool)>,
}

fn survey(ctx: &Ctx<'_>, pods_ok: &PodsOk, udp: bool, port: u16) -> Survey {
    // Tunnels a crafted probe measured: those are the firewall rule's to judge. A probe that
    // could not be sent (`error`) measured nothing.
    let mut probed: HashSet<(u32, u32)> = HashSet::new();
    // Host pairs that reach each other on the underlay, either way.
    let mut hosts_ok: HashSet<(u32, u32)> = HashSet::new();
    // Per unordered node pair: the results that ride the tunnel between them, and whether any
    // got through.
    let mut riding: BTreeMap<(u32, u32), (Vec<usize>, bool)> = BTreeMap::new();
    for (i, r) in ctx.results.iter().enumerate() {
        if let Some(l) = ctx.direct(&r, pods_ok) {
            if Ctx::is_vxlan(&r) {
                if r.result.outcome != Outcome::Error {
                    probed.insert((l.from, l.to));
                }
            } else if r.result.outcome.is_ok() {
                hosts_ok.insert((l.from.min(l.to), l.from.max(l.to)));
            }
            continue;
        }
        if Ctx::is_vxlan(&r) {
            continue;
        }
        let Some(a) = ctx.from(&r) else { continue };
        let pairs: BTreeSet<(u32, u32)> = ctx
            .needs(&r)
            .into_iter()
            .filter(|l| l.udp == udp && l.port == port)
            .map(|l| (l.from.min(l.to), l.from.max(l.to)))
            .collect();
        // Only a path that needs exactly one pair's tunnel speaks for that pair.
        let [pair] = pairs.into_iter().collect::<Vec<_>>()[..] else {
            continue;
        };
        if pair.0 != a && pair.1 != a {
            continue;
        }
        let e = riding.entry(pair).or_default();
        if r.result.outcome.is_ok() {
            e.1 = true;
        } else if failed(&r) && !ctx.explained.contains(&i) {
            e.0.push(i);
        }
    }
    Survey {
        probed,
        hosts_ok,
        riding,
    }
}
