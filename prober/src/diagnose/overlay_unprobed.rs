//! An overlay the plan could not probe on some nodes, because no tunnel endpoint is known for
//! them: said as a warning, so that a clean report never reads as "the overlay works" there.

use crate::plan::overlay::unprobed;

use super::context::{Ctx, names_text};
use super::finding::{Finding, Overlay, Severity};

/// One warning naming the nodes whose overlay was not probed for want of a tunnel endpoint.
pub fn overlay_unprobed(ctx: &Ctx<'_>, findings: &mut Vec<Finding>) {
    let names = unprobed(ctx.inv);
    if names.is_empty() {
        return;
    }
    let mode = ctx
        .inv
        .cluster
        .overlay
        .as_ref()
        .map_or("overlay", |o| o.mode().as_str());
    let mut f = Finding::new(
        Overlay {
            nodes: names.clone(),
        },
        Severity::Warning,
        format!(
            "overlay not probed on {}: no tunnel endpoint known ({mode}: the CNI publishes none \
             that discovery reads), so no crafted {mode} packet was sent there and a blocked \
             tunnel to {} would go unnoticed",
            names_text(&names),
            if names.len() == 1 { "it" } else { "them" },
        ),
    );
    f.fix.push(
        "give the inventory a vtep (address, and mac for VXLAN) for these nodes: Cilium publishes \
         it as the CiliumNode's CiliumInternalIP or the node annotation \
         network.cilium.io/ipv4-cilium-host, Calico as projectcalico.org/IPv4IPIPTunnelAddr or \
         IPv4VXLANTunnelAddr, flannel as the first address of the node's pod CIDR"
            .into(),
    );
    findings.push(f);
}
