//! The hop where a firewall gap's packets died on the network: the last router that answered
//! the TTL-limited probes of its evidence (`trace`, recorded by the run), named in the finding,
//! its summary and the fix line for the network.

use super::context::Ctx;
use super::finding::{Hop, Where};

/// The hop where the evidence's packets died on their way from `from` (a gap both ways is
/// traced from its first side: the other side's packets meet the same router at its other
/// address), when they died on the network alone and every path traced from there names the
/// same last hop (the fewest hops from a sender, when senders are at different distances from
/// it). Paths that name different hops name no one.
pub(super) fn gap_hop(ctx: &Ctx<'_>, ev: &[usize], where_: &[Where], from: &[u32]) -> Option<Hop> {
    if where_ != [Where::Network] {
        return None;
    }
    let mut traces = ev.iter().filter_map(|&i| {
        let r = ctx.results.at(i);
        ctx.from(&r)
            .filter(|a| from.contains(a))
            .and(r.result.trace)
    });
    let first = traces.next()?;
    // A gap in both families is traced in each: the same router answers at an address of
    // each, so the first trace's family speaks for the hop.
    let v6 = first.after.is_ipv6();
    traces
        .filter(|t| t.after.is_ipv6() == v6)
        .try_fold(first.hops, |hops, t| {
            (t.after == first.after).then_some(hops.min(t.hops))
        })
        .map(|hops| Hop {
            after: first.after,
            hops,
        })
}

/// The place the network fix line names: the device at or just after the last hop that
/// answered, or any device on the way when it is not known.
pub(super) fn device(hop: Option<&Hop>) -> String {
    match hop {
        Some(h) => format!(
            "on the firewall after {} (the last hop that answered, {} from the sender; the packets die there or at the next device)",
            h.after,
            hops_text(h.hops)
        ),
        None => "on the firewall, router or security group".into(),
    }
}

/// What the summary adds about the hop, traced from `senders`.
pub(super) fn summary_words(h: &Hop, senders: &str) -> String {
    format!(
        "; dropped after {} ({} from {senders})",
        h.after,
        hops_text(h.hops)
    )
}

fn hops_text(hops: u8) -> String {
    if hops == 1 {
        "1 hop".into()
    } else {
        format!("{hops} hops")
    }
}
