//! A datagram carrying a nonce to a peer's `WireGuard` port. Without the keys nothing can be
//! decapsulated: "sent" here; arrival on the peer's NIC is the peer sniffer's word. An ICMP error
//! inside a short linger is reported at once.

use std::net::SocketAddr;

use tokio::time::Instant;

use super::crafted::Crafted;
use crate::net::encap::wireguard_payload;
use crate::proto::{self, ProbeResult};

pub async fn probe(id: &str, probe: &proto::WireguardProbe, deadline: Instant) -> ProbeResult {
    let proto::WireguardProbe {
        address,
        port,
        nonce,
    } = probe;
    let addr = SocketAddr::from((*address, port.get()));
    let c = Crafted::new(id, *nonce, |nonce| {
        format!("wireguard port {addr} nonce {nonce}")
    });
    c.send_udp(addr, &wireguard_payload(c.nonce()), deadline)
        .await
}
