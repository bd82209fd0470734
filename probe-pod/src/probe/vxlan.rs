//! A crafted VXLAN datagram to a peer's VXLAN port, over either family's underlay. "Sent" here;
//! "seen" is the peer sniffer's word (`seen` probe on the peer). An ICMP error inside a short
//! linger is reported at once.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use tokio::time::Instant;

use super::crafted::Crafted;
use crate::net::packet::{VxlanProbe, vxlan_datagram};
use crate::proto::{self, ProbeResult};

pub async fn probe(id: &str, probe: &proto::VxlanProbe, deadline: Instant) -> ProbeResult {
    let proto::VxlanProbe {
        address,
        port,
        vni,
        nonce,
        inner_source,
        inner_destination,
        destination_mac,
    } = probe;
    let addr = SocketAddr::new(*address, port.get());
    let c = Crafted::new(id, *nonce, |nonce| {
        format!("vxlan {addr} vni {} nonce {nonce}", vni.get())
    });
    let n = c.nonce().to_be_bytes();
    let datagram = vxlan_datagram(&VxlanProbe {
        vni: vni.get(),
        // Locally administered, and never the receiver's own MAC (the kernel drops those).
        source_mac: [0x02, 0x50, n[0], n[1], n[2], n[3]],
        destination_mac: destination_mac.map_or([0x02, 0, 0, 0, 0, 0], |m| m.0),
        inner_source: inner_source.unwrap_or(Ipv4Addr::UNSPECIFIED),
        // The inner packet is IPv4 whatever the underlay: toward the peer itself when it has an
        // IPv4 address and no other was asked for.
        inner_destination: inner_destination.unwrap_or(match *address {
            IpAddr::V4(a) => a,
            IpAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
        }),
        nonce: c.nonce(),
    });
    c.send_udp(addr, &datagram, deadline).await
}
