//! Selective refusals: a TCP port that resets some senders while others connect to the very
//! same port is served; what refuses those senders is a firewall rule (`reject with tcp reset`),
//! a `firewall-gap`, never `not-listening`. Placed on the receiving host when its sniffer saw
//! the SYN arrive, on the network when the SYN never arrived, and left unknown without a
//! receipt (a reset carries the receiver's address whoever forged it).

use std::collections::{BTreeMap, BTreeSet};

use probe_proto::{Outcome, Receipt};

use crate::model::{Family, Protocol};

use super::context::{Ctx, Link, failed, list, names_text};
use super::finding::{Finding, FirewallGap, Severity, Where};
use super::fix;

/// A served port (receiver, port) and who it refused and who it let in.
#[derive(Default)]
struct Port {
    /// Refusing sender -> the refused results.
    refused: BTreeMap<u32, Vec<usize>>,
    connected: BTreeSet<u32>,
}

/// The families a set of senders is refused in by one port, who connect to it, and the refused
/// results.
type Cause = (Vec<Family>, BTreeSet<u32>, Vec<usize>);

pub(super) fn selective_refusals(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) {
    let pods_ok = ctx.pods_ok();
    // Per family: a sender reset over IPv6 while it connects over IPv4 is refused over IPv6.
    let mut ports: BTreeMap<(u32, u16, Family), Port> = BTreeMap::new();
    for (i, r) in ctx.results.iter().enumerate() {
        let Some(l) = ctx
            .direct(&r, &pods_ok)
            .filter(|l| l.protocol() == Protocol::Tcp)
        else {
            continue;
        };
        let p = ports.entry((l.to, l.port, l.family)).or_default();
        if r.result.outcome.is_ok() {
            p.connected.insert(l.from);
        } else if failed(&r) && r.result.outcome == Outcome::Refused && !ctx.explained.contains(&i)
        {
            p.refused.entry(l.from).or_default().push(i);
        }
    }
    // The same senders refused by the same port in both families is one cause.
    let mut causes: BTreeMap<(u32, u16, Vec<u32>), Cause> = BTreeMap::new();
    for ((to, port, family), p) in ports {
        // A sender refused on some probes and let in on others is not this rule's.
        let senders: Vec<u32> = p
            .refused
            .keys()
            .filter(|s| !p.connected.contains(s))
            .copied()
            .collect();
        if senders.is_empty() || p.connected.is_empty() {
            continue;
        }
        let ev: Vec<usize> = senders
            .iter()
            .flat_map(|s| p.refused.get(s).cloned().unwrap_or_default())
            .collect();
        let c = causes.entry((to, port, senders)).or_default();
        c.0.push(family);
        c.1.extend(p.connected);
        c.2.extend(ev);
    }
    for ((to, port, senders), (families, connected, ev)) in causes {
        let links: Vec<Link> = senders
            .iter()
            .flat_map(|&from| {
                families.iter().map(move |&family| Link {
                    from,
                    to,
                    udp: false,
                    port,
                    family,
                })
            })
            .collect();
        let cons: Vec<usize> = ctx
            .results
            .iter()
            .enumerate()
            .filter(|(i, r)| failed(r) && !ctx.explained.contains(i) && !ev.contains(i))
            .filter(|(_, r)| ctx.needs(r).iter().any(|l| links.contains(l)))
            .map(|(i, _)| i)
            .collect();
        let f = finding(ctx, (&senders, to, port, &families), &connected, &ev);
        ctx.emit(findings, f, &ev, &cons);
    }
}

fn finding(
    ctx: &Ctx<'_>,
    (senders, to, port, families): (&[u32], u32, u16, &[Family]),
    connected: &BTreeSet<u32>,
    ev: &[usize],
) -> Finding {
    let name = ctx.name(to).to_string();
    let from = list(ctx, senders);
    let ok = list(ctx, &connected.iter().copied().collect::<Vec<_>>());
    let what = if port == 10250 {
        " (the kubelet)"
    } else if ctx
        .api_backends
        .iter()
        .any(|b| b.node == to && b.port == port)
    {
        " (the API server)"
    } else {
        ""
    };
    let arrived = ev.iter().any(|&i| {
        matches!(
            ctx.results.at(i).result.receipt,
            Some(Receipt::Answered | Receipt::Delivered | Receipt::HostDropped)
        )
    });
    let lost = ev
        .iter()
        .any(|&i| ctx.results.at(i).result.receipt == Some(Receipt::NotArrived));
    // A reset carries the receiver's address whoever sent it: without the receiver's sniffer
    // saying whether the SYN arrived, the place stays unknown.
    let mut places = Vec::new();
    if arrived {
        places.push(Where::Host(name.clone()));
    }
    if lost {
        places.push(Where::Network);
    }
    let mut lines = Vec::new();
    if places.contains(&Where::Host(name.clone())) {
        lines.push(format!(
            "on {name}: find the rule that resets these senders (nft list ruleset | grep -n 'reject with tcp reset'; {}) and remove it, or accept them before it:",
            families
                .iter()
                .map(|f| match f {
                    Family::Ipv4 => "iptables -S | grep tcp-reset",
                    Family::Ipv6 => "ip6tables -S | grep tcp-reset",
                })
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    lines.extend(fix::lines(
        ctx,
        families,
        Protocol::Tcp,
        port,
        (senders, &[to]),
        false,
        &places,
        None,
    ));
    // Named only when the run probed both families and the resets are in one.
    let over = match families {
        [f] if ctx.dual_stack => format!(" over {f}"),
        _ => String::new(),
    };
    let summary = format!(
        "tcp/{port}{what} on {name} answers {}{over} with a TCP reset while {} connect: the service is up, a firewall rule rejects these senders",
        names_text(&from),
        names_text(&ok)
    );
    let notes = fix::notes(ctx.inv, (senders, &[to]), false, &places);
    let mut f = Finding::new(
        FirewallGap {
            protocol: Protocol::Tcp,
            port: Some(port),
            from,
            to: vec![name],
            direction: crate::model::Direction::One,
            where_: places,
            inferred: false,
            hop: None,
        },
        Severity::Error,
        summary,
    );
    f.fix = lines;
    f.notes = notes;
    f
}
