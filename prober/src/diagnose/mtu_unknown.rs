//! An overlay whose MTU neither the inventory says nor its encapsulation implies: no MTU probe
//! was planned, and the report says so in a warning rather than staying silent.

use crate::plan::pod_mtu;

use super::context::Ctx;
use super::finding::{Finding, Mtu, Severity};

pub(super) fn mtu_unknown(ctx: &Ctx<'_>, findings: &mut Vec<Finding>) {
    let Some(ov) = &ctx.inv.cluster.overlay else {
        return;
    };
    let pods = ctx
        .inv
        .nodes
        .iter()
        .filter(|n| n.agents.pod.is_some())
        .count();
    if pod_mtu(ov).is_some() || pods < 2 {
        return;
    }
    let mut f = Finding::new(
        Mtu::default(),
        Severity::Warning,
        format!(
            "MTU not probed: the inventory gives the overlay ({}) no mtu and its encapsulation implies none, so an MTU black hole between pods would go unnoticed",
            ov.mode()
        ),
    );
    f.fix.push(
        "give the inventory's overlay its mtu (the pods' interface MTU: ip link show eth0 in a pod) so full-size packets are sent between pods".into(),
    );
    findings.push(f);
}
