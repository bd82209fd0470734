//! A datagram carrying a nonce to a peer's `WireGuard` port. Without the keys nothing can be
//! decapsulated: "sent" here; arrival on the peer's NIC is the peer sniffer's word. An ICMP error
//! inside a short linger is reported at once.

use std::net::SocketAddr;

use tokio::time::Instant;

use crate::net::encap::wireguard_payload;
use crate::net::random_u32;
use crate::proto::{Probe, ProbeResult};

pub async fn probe(id: &str, probe: &Probe, deadline: Instant) -> ProbeResult {
    let Probe::Wireguard {
        address,
        port,
        nonce,
    } = probe
    else {
        unreachable!("dispatched by kind");
    };
    let start = Instant::now();
    let nonce = nonce.unwrap_or_else(random_u32);
    let addr = SocketAddr::from((*address, port.get()));
    let what = format!("wireguard port {addr} nonce {nonce}");
    let mut r =
        super::geneve::send(id, &what, addr, &wireguard_payload(nonce), deadline, start).await;
    r.nonce = Some(nonce);
    r
}
