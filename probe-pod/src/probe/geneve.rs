//! A crafted Geneve datagram to a peer's Geneve port (UDP 6081): inner Ethernet, IPv4 and an ICMP
//! echo carrying a nonce, as Cilium's tunnel carries pod packets. "Sent" here; "seen" is the
//! peer sniffer's word. An ICMP error inside a short linger is reported at once.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use tokio::time::Instant;

use super::{Fail, udp};
use crate::net::encap::{geneve_datagram, probe_ipv4};
use crate::net::errqueue::Failure;
use crate::net::random_u32;
use crate::proto::{Outcome, Probe, ProbeResult};

/// How long to wait for an ICMP error after sending; silence is the normal case.
const LINGER: Duration = Duration::from_millis(300);

pub async fn probe(id: &str, probe: &Probe, deadline: Instant) -> ProbeResult {
    let Probe::Geneve {
        address,
        port,
        vni,
        nonce,
        inner_source,
        inner_destination,
    } = probe
    else {
        unreachable!("dispatched by kind");
    };
    let start = Instant::now();
    let nonce = nonce.unwrap_or_else(random_u32);
    let addr = SocketAddr::from((*address, port.get()));
    let what = format!("geneve {addr} vni {} nonce {nonce}", vni.get());
    let n = nonce.to_be_bytes();
    let inner = probe_ipv4(
        inner_source.unwrap_or(Ipv4Addr::UNSPECIFIED),
        inner_destination.unwrap_or(*address),
        nonce,
    );
    // Locally administered MACs; the receiver's device takes any destination in its tunnel.
    let datagram = geneve_datagram(
        vni.get(),
        [0x02, 0x50, n[0], n[1], n[2], n[3]],
        [0x02, 0, 0, 0, 0, 0],
        &inner,
    );
    let r = send(id, &what, addr, &datagram, deadline, start).await;
    let mut r = r;
    r.nonce = Some(nonce);
    r
}

/// Sends the datagram and lingers for an ICMP error (also the `WireGuard`-port probe's send).
pub(super) async fn send(
    id: &str,
    what: &str,
    addr: SocketAddr,
    datagram: &[u8],
    deadline: Instant,
    start: Instant,
) -> ProbeResult {
    let sock = match udp::connected(addr) {
        Ok(s) => s,
        Err(f) => return f.into_result(id, what, start.elapsed()),
    };
    if let Err(e) = sock.send(datagram).await {
        return Fail::Net(Failure::with_queue(e.raw_os_error(), &sock)).into_result(
            id,
            what,
            start.elapsed(),
        );
    }
    let linger = deadline.min(Instant::now() + LINGER);
    let mut buf = [0u8; 64];
    match udp::recv_matching(&sock, linger, &mut buf, |_| false).await {
        Err(Fail::Timeout) => ProbeResult::new(
            id,
            Outcome::Ok,
            format!("{what}: sent; receipt is confirmed by the peer's sniffer"),
        ),
        Err(f) => f.into_result(id, what, start.elapsed()),
        Ok(_) => unreachable!("no datagram matches"),
    }
}
