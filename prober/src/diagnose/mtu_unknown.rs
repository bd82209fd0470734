//! Pod MTU probes that could not be sent: the pod agents, left to use their own interface MTU
//! (the inventory gave the overlay none), could not read it. The report says the MTU was not
//! probed, in a warning, rather than staying silent or calling it a network failure.

use probe_proto::Outcome;

use super::context::Ctx;
use super::finding::{Finding, Mtu, Severity};

pub(super) fn mtu_unknown(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) {
    let unsent: Vec<usize> = ctx
        .results
        .iter()
        .enumerate()
        .filter(|(i, r)| {
            Ctx::is_mtu(r)
                && !r.is_unknown()
                && r.result.outcome == Outcome::Error
                && r.result.packet_size.is_none()
                && !ctx.explained.contains(i)
        })
        .map(|(i, _)| i)
        .collect();
    if unsent.is_empty() {
        return;
    }
    let mut nodes: Vec<String> = unsent
        .iter()
        .map(|&i| ctx.results.at(i).from.node.clone())
        .collect();
    nodes.sort();
    nodes.dedup();
    let mut f = Finding::new(
        Mtu {
            nodes: nodes.clone(),
        },
        Severity::Warning,
        format!(
            "MTU not probed from {}: the inventory gives the overlay no mtu and the pod agent could not read its own interface's ({}), so an MTU black hole between pods would go unnoticed",
            nodes.join(", "),
            ctx.results.at(unsent[0]).result.detail
        ),
    );
    f.fix.push(
        "give the inventory's overlay its mtu (the pods' interface MTU: ip link show eth0 in a pod) so full-size packets are sent between pods".into(),
    );
    ctx.emit(findings, f, &unsent, &[]);
}
