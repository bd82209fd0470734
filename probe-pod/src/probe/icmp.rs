//! ICMP echo, ICMPv6 to an IPv6 address (also used for VXLAN tunnel endpoints), and the DF-set
//! echo that finds MTU black holes.

use std::net::IpAddr;

use tokio::time::Instant;

use super::{Fail, micros};
use crate::net::icmp::{EchoKind, EchoSocket};
use crate::net::packet::probe_payload;
use crate::net::random_u32;
use crate::proto::{Outcome, ProbeResult};

/// The headers an `mtu` probe's size counts besides its payload: IPv4 and ICMP, or IPv6 and
/// ICMPv6.
fn headers(addr: IpAddr) -> usize {
    if addr.is_ipv6() { 48 } else { 28 }
}

pub async fn echo(id: &str, addr: IpAddr, deadline: Instant) -> ProbeResult {
    send(id, addr, None, deadline).await
}

/// Echo of exactly `size` bytes of IP packet with DF set (never fragmented, on IPv6); without a
/// size, of the MTU of this side's own route toward `addr` (its interface's), which the result
/// reports.
pub async fn mtu(id: &str, addr: IpAddr, size: Option<u16>, deadline: Instant) -> ProbeResult {
    let start = Instant::now();
    let size = match size {
        Some(s) => s,
        None => match route_mtu(addr) {
            Ok(s) => s,
            Err(e) => {
                let what = format!("{} echo {addr} at this side's MTU", icmp_name(addr));
                return Fail::Local(e).into_result(id, &what, start.elapsed());
            }
        },
    };
    let mut r = send(id, addr, Some(size), deadline).await;
    r.packet_size = Some(size);
    r
}

/// The MTU of the route toward `addr` as the kernel has it, which sends nothing.
fn route_mtu(addr: IpAddr) -> Result<u16, String> {
    let mtu = crate::net::icmp::route_mtu(addr)
        .map_err(|e| format!("cannot read the MTU of the route toward {addr}: {e}"))?;
    u16::try_from(mtu)
        .ok()
        .filter(|&m| usize::from(m) > headers(addr))
        .ok_or_else(|| format!("the route toward {addr} has an MTU of {mtu}, too small to probe"))
}

fn icmp_name(addr: IpAddr) -> &'static str {
    if addr.is_ipv6() { "icmpv6" } else { "icmp" }
}

async fn send(id: &str, addr: IpAddr, size: Option<u16>, deadline: Instant) -> ProbeResult {
    let start = Instant::now();
    let icmp = icmp_name(addr);
    let what = match size {
        Some(s) => format!("{icmp} echo {addr} size {s} DF"),
        None => format!("{icmp} echo {addr}"),
    };
    let sock = match EchoSocket::open(addr, size.is_some()) {
        Ok(s) => s,
        Err(e) => return Fail::Local(e.to_string()).into_result(id, &what, start.elapsed()),
    };
    let nonce = random_u32();
    let len = size.map_or(16, |s| usize::from(s).saturating_sub(headers(addr)));
    let seq = u16::try_from(nonce & 0xffff).unwrap_or(1);
    let via = match sock.kind() {
        EchoKind::Ping => "ping socket",
        EchoKind::Raw => "raw socket",
    };
    let mut r = match sock
        .ping(seq, &probe_payload(nonce, len), nonce, deadline)
        .await
    {
        Ok(Some(rtt)) => {
            let mut r = ProbeResult::new(id, Outcome::Ok, format!("{what}: reply ({via})"));
            r.rtt_micros = Some(micros(rtt));
            r
        }
        Ok(None) => Fail::Timeout.into_result(id, &what, start.elapsed()),
        Err(f) => Fail::Net(f).into_result(id, &what, start.elapsed()),
    };
    r.nonce = Some(nonce);
    if size.is_some() {
        r.path_mtu = sock.path_mtu();
    }
    r
}
