//! A crafted VXLAN datagram to a peer's VXLAN port. "Sent" here; "seen" is the peer sniffer's
//! word (`seen` probe on the peer). An ICMP error inside a short linger is reported at once.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use tokio::time::Instant;

use super::{Fail, udp};
use crate::net::errqueue::Failure;
use crate::net::packet::{VxlanProbe, vxlan_datagram};
use crate::net::random_u32;
use crate::proto::{Outcome, Probe, ProbeResult};

/// How long to wait for an ICMP error after sending. Silence is the normal case: the peer's
/// kernel VXLAN device never answers.
const LINGER: Duration = Duration::from_millis(300);

pub async fn probe(id: &str, probe: &Probe, deadline: Instant) -> ProbeResult {
    let Probe::Vxlan {
        address,
        port,
        vni,
        nonce,
        inner_source,
        inner_destination,
        destination_mac,
    } = probe
    else {
        unreachable!("dispatched by kind");
    };
    let start = Instant::now();
    let nonce = nonce.unwrap_or_else(random_u32);
    let addr = SocketAddr::from((*address, port.get()));
    let what = format!("vxlan {addr} vni {} nonce {nonce}", vni.get());
    let n = nonce.to_be_bytes();
    let datagram = vxlan_datagram(&VxlanProbe {
        vni: vni.get(),
        // Locally administered, and never the receiver's own MAC (the kernel drops those).
        source_mac: [0x02, 0x50, n[0], n[1], n[2], n[3]],
        destination_mac: destination_mac.map_or([0x02, 0, 0, 0, 0, 0], |m| m.0),
        inner_source: inner_source.unwrap_or(Ipv4Addr::UNSPECIFIED),
        inner_destination: inner_destination.unwrap_or(*address),
        nonce,
    });
    let sock = match udp::connected(addr) {
        Ok(s) => s,
        Err(f) => return with_nonce(f.into_result(id, &what, start.elapsed()), nonce),
    };
    if let Err(e) = sock.send(&datagram).await {
        let f = Fail::Net(Failure::with_queue(e.raw_os_error(), &sock));
        return with_nonce(f.into_result(id, &what, start.elapsed()), nonce);
    }
    let linger = deadline.min(Instant::now() + LINGER);
    let mut buf = [0u8; 64];
    let r = match udp::recv_matching(&sock, linger, &mut buf, |_| false).await {
        // Silence is the normal case: the peer's kernel VXLAN device never answers. Not a round
        // trip, so no rtt.
        Err(Fail::Timeout) => ProbeResult::new(
            id,
            Outcome::Ok,
            format!("{what}: sent; receipt is confirmed by the peer's sniffer"),
        ),
        Err(f) => f.into_result(id, &what, start.elapsed()),
        Ok(_) => unreachable!("no datagram matches"),
    };
    with_nonce(r, nonce)
}

fn with_nonce(mut r: ProbeResult, nonce: u32) -> ProbeResult {
    r.nonce = Some(nonce);
    r
}
