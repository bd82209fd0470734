//! Pure: a scenario becomes a lab layout (names, addresses) and the exact commands that build it —
//! `ip -batch` lines, `bridge -batch` lines and nftables rulesets per namespace, the programs to
//! start, the files to write and the inventory that describes it. Nothing here runs.

mod batch;
pub mod candidate;
mod faults;
mod hostfiles;
mod inventory;
mod layout;
mod nat;
mod processes;
mod routers;

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::lab::scenario::Scenario;

pub use batch::{NsSetup, overlay_device, overlay_device6, vni};
pub use hostfiles::{HostFiles, Tokens, host_files};
pub use inventory::inventory;
pub use layout::{LabNode, Layout, Pod, layout};
pub use processes::{Process, processes};

pub const AGENT_PORT: u16 = 9917;
pub const API_PORT: u16 = 6443;
pub const OVERLAY_MTU: u16 = 1450;
/// The overlay's MTU over the IPv6 underlay: VXLAN's outer IPv6 header is 40 bytes, not 20.
pub const OVERLAY_MTU6: u16 = 1430;
/// The lab tunnel device's MTU: room for the outer headers of Geneve (36 bytes, IPv4 inner) and
/// IP-in-IP (20) on a 1500-byte underlay.
pub const TUNNEL_MTU: u16 = 1460;
pub const API_SERVICE: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);
pub const DNS_SERVICE: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 10);
pub const POD_CIDR: &str = "10.244.0.0/16";
pub const SERVICE_CIDR: &str = "10.96.0.0/12";
/// The dual-stack lab's IPv6 twins of the four above.
pub const API_SERVICE6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x10, 0x96, 0, 0, 0, 0, 1);
pub const DNS_SERVICE6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x10, 0x96, 0, 0, 0, 0, 0xa);
pub const POD_CIDR6: &str = "fd00:10:244::/56";
pub const SERVICE_CIDR6: &str = "fd00:10:96::/112";

/// The commands that build the lab, namespace by namespace: the router(s) first, then each switch,
/// each node followed by its pods.
#[must_use]
pub fn setups(s: &Scenario, l: &Layout) -> Vec<NsSetup> {
    let mut router = batch::router(s, l);
    let mut router2 = routers::second(l, &mut router);
    let mut out = batch::switches(l, &mut router, router2.as_mut());
    for n in &l.nodes {
        out.push(batch::node_setup(s, l, n));
        for p in &n.pods {
            out.push(batch::pod_setup(s, p, n));
        }
        if l.nodes[l.dns_node].name == n.name {
            out.push(batch::pod_setup(s, &l.dns_pod, n));
        }
    }
    out.extend(l.candidate.iter().map(|c| candidate::setup(s, c)));
    faults::apply_faults(s, l, &mut out, (&mut router, router2.as_mut()));
    out.splice(0..0, std::iter::once(router).chain(router2));
    out
}

#[cfg(test)]
mod tests;
