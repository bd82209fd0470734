//! The fix lines for a firewall gap: the network firewall's rule when the packets died on the
//! network, then each receiving host's rule in nftables, iptables and firewalld syntax.

use crate::model::Protocol;

use super::context::Ctx;

fn addrs(ctx: &Ctx<'_>, nodes: &[u32]) -> Vec<String> {
    nodes
        .iter()
        .map(|&n| ctx.inv.nodes[n as usize].address.to_string())
        .collect()
}

/// At most this many receiving nodes get their own fix lines.
const FIX_NODES: usize = 5;

/// The fix lines that open `proto`/`port` from `from` to `to` (and back when `both`); `network`
/// when the packets died on the network rather than on a host.
pub(super) fn firewall(
    ctx: &Ctx<'_>,
    proto: Protocol,
    port: u16,
    from: &[u32],
    to: &[u32],
    both: bool,
    network: bool,
) -> Vec<String> {
    let mut fix = Vec::new();
    let mut receivers: Vec<(u32, Vec<u32>)> = to.iter().map(|&t| (t, from.to_vec())).collect();
    if both {
        receivers.extend(from.iter().map(|&t| (t, to.to_vec())));
    }
    if network {
        fix.push(format!(
            "on the network firewall between them: allow {proto}/{port} from {} to {}{}",
            addrs(ctx, from).join(", "),
            addrs(ctx, to).join(", "),
            if both { " and back" } else { "" }
        ));
    }
    for (recv, srcs) in receivers.iter().take(FIX_NODES) {
        let name = ctx.name(*recv);
        let src = addrs(ctx, srcs);
        fix.push(format!("on {name} (nftables): nft insert rule inet filter input ip saddr {{ {} }} {proto} dport {port} accept", src.join(", ")));
        fix.push(format!(
            "on {name} (iptables): iptables -I INPUT -p {proto} -s {} --dport {port} -j ACCEPT",
            src.join(",")
        ));
        fix.push(format!("on {name} (firewalld): firewall-cmd --permanent --add-port={port}/{proto} && firewall-cmd --reload"));
    }
    if receivers.len() > FIX_NODES {
        fix.push(format!(
            "... and the same on {} more nodes",
            receivers.len() - FIX_NODES
        ));
    }
    fix
}
