//! A tcptraceroute step: the same TCP SYN or UDP datagram as a blocked path's probe, allowed to
//! cross only `ttl` routers, so the router where it expires names itself (ICMP time exceeded,
//! read from the socket's error queue like every other ICMP error).

use std::io;
use std::net::SocketAddr;

use socket2::SockRef;
use tokio::time::Instant;

use super::{tcp, udp};
use crate::proto::{HopProbe, ProbeResult, Transport};

/// Sends `p` with its TTL (its hop limit on IPv6). The outcome is the plain probe's: a router's
/// time exceeded is `unreachable` with `icmp` type 11 naming that router; silence is `timeout`.
pub async fn probe(id: &str, p: &HopProbe, deadline: Instant) -> ProbeResult {
    let addr = SocketAddr::new(p.address, p.port.get());
    let ttl = Some(u32::from(p.ttl.get()));
    let mut r = match p.protocol {
        Transport::Tcp => tcp::probe(id, addr, false, ttl, deadline).await,
        Transport::Udp => udp::probe(id, addr, ttl, deadline).await,
    };
    r.detail = format!("ttl {}: {}", p.ttl, r.detail);
    r
}

/// Limits how many routers what `sock` sends may cross; `None` leaves the system's default.
pub(super) fn limit<'a>(
    sock: impl Into<SockRef<'a>>,
    addr: SocketAddr,
    ttl: Option<u32>,
) -> io::Result<()> {
    let Some(ttl) = ttl else { return Ok(()) };
    let sock = sock.into();
    if addr.is_ipv4() {
        sock.set_ttl_v4(ttl)
    } else {
        sock.set_unicast_hops_v6(ttl)
    }
}
