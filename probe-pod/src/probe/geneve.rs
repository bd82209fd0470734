//! A crafted Geneve datagram to a peer's Geneve port (UDP 6081 by default): inner Ethernet, IPv4
//! and an ICMP echo carrying a nonce, as Cilium's tunnel carries pod packets. "Sent" here; "seen"
//! is the peer sniffer's word. An ICMP error inside a short linger is reported at once.

use std::net::{Ipv4Addr, SocketAddr};

use tokio::time::Instant;

use super::crafted::Crafted;
use crate::net::encap::{geneve_datagram, probe_ipv4};
use crate::proto::{self, ProbeResult};

pub async fn probe(id: &str, probe: &proto::GeneveProbe, deadline: Instant) -> ProbeResult {
    let proto::GeneveProbe {
        address,
        port,
        vni,
        nonce,
        inner_source,
        inner_destination,
    } = probe;
    let addr = SocketAddr::from((*address, port.get()));
    let c = Crafted::new(id, *nonce, |nonce| {
        format!("geneve {addr} vni {} nonce {nonce}", vni.get())
    });
    let n = c.nonce().to_be_bytes();
    let inner = probe_ipv4(
        inner_source.unwrap_or(Ipv4Addr::UNSPECIFIED),
        inner_destination.unwrap_or(*address),
        c.nonce(),
    );
    // Locally administered MACs; the receiver's device takes any destination in its tunnel.
    let datagram = geneve_datagram(
        vni.get(),
        [0x02, 0x50, n[0], n[1], n[2], n[3]],
        [0x02, 0, 0, 0, 0, 0],
        &inner,
    );
    c.send_udp(addr, &datagram, deadline).await
}
