//! UDP echo against a `probe-pod serve` responder: ICMP port unreachable is `refused`, a firewall's
//! ICMP is `rejected`, silence is `timeout`.

use std::net::SocketAddr;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::UdpSocket;
use tokio::time::Instant;

use super::{Fail, micros};
use crate::net::errqueue::{self, Failure};
use crate::net::packet::{payload_nonce, probe_payload};
use crate::net::random_u32;
use crate::proto::{Outcome, ProbeResult};

/// A connected UDP socket with the error queue enabled.
pub fn connected(addr: SocketAddr) -> Result<UdpSocket, Fail> {
    let sock = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    sock.set_nonblocking(true)?;
    errqueue::enable(&sock, addr.is_ipv6())?;
    sock.connect(&addr.into())
        .map_err(|e| Fail::Net(Failure::with_queue(e.raw_os_error(), &sock)))?;
    let std: std::net::UdpSocket = sock.into();
    Ok(UdpSocket::from_std(std)?)
}

/// Receives until `matches` accepts a datagram, an error arrives, or the deadline passes.
pub async fn recv_matching(
    sock: &UdpSocket,
    deadline: Instant,
    buf: &mut [u8],
    mut matches: impl FnMut(&[u8]) -> bool,
) -> Result<usize, Fail> {
    loop {
        match tokio::time::timeout_at(deadline, sock.recv(buf)).await {
            Err(_) => return Err(Fail::Timeout),
            Ok(Ok(n)) if matches(&buf[..n]) => return Ok(n),
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(Fail::Net(Failure::with_queue(e.raw_os_error(), sock))),
        }
    }
}

/// With `ttl`, the datagram may cross at most that many routers.
pub async fn probe(id: &str, addr: SocketAddr, ttl: Option<u32>, deadline: Instant) -> ProbeResult {
    let start = Instant::now();
    let what = format!("udp echo {addr}");
    let limited = connected(addr).and_then(|s| {
        super::hop::limit(&s, addr, ttl)?;
        Ok(s)
    });
    let sock = match limited {
        Ok(s) => s,
        Err(f) => return f.into_result(id, &what, start.elapsed()),
    };
    let source = sock.local_addr().ok();
    let nonce = random_u32();
    if let Err(e) = sock.send(&probe_payload(nonce, 16)).await {
        return Fail::Net(Failure::with_queue(e.raw_os_error(), &sock)).into_result(
            id,
            &what,
            start.elapsed(),
        );
    }
    let mut buf = [0u8; 64];
    let mut r = match recv_matching(&sock, deadline, &mut buf, |d| {
        payload_nonce(d) == Some(nonce)
    })
    .await
    {
        Ok(_) => {
            let mut r = ProbeResult::new(id, Outcome::Ok, format!("{what}: nonce echoed"));
            r.rtt_micros = Some(micros(start.elapsed()));
            r
        }
        Err(f) => f.into_result(id, &what, start.elapsed()),
    };
    r.nonce = Some(nonce);
    r.source = source;
    r
}
