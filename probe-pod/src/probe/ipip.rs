//! A crafted IP-in-IP packet to a peer host: outer IP protocol 4 (a raw socket, the kernel writes
//! the outer header), inner IPv4 ICMP echo carrying a nonce. "Sent" here; "seen" is the peer
//! sniffer's word: on its NIC, then decapsulated on its tunnel device.

use std::net::{Ipv4Addr, SocketAddrV4};

use super::Fail;
use super::crafted::Crafted;
use crate::net::encap::{IPPROTO_IPIP, probe_ipv4};
use crate::net::errqueue::Failure;
use crate::proto::{self, ProbeResult};
use socket2::{Domain, Protocol, Socket, Type};

/// Sends at once (no waiting: ICMP errors for protocol 4 are not collected), so it needs no
/// deadline.
#[must_use]
pub fn probe(id: &str, probe: &proto::IpipProbe) -> ProbeResult {
    let proto::IpipProbe {
        address,
        nonce,
        inner_source,
        inner_destination,
    } = probe;
    let c = Crafted::new(id, *nonce, |nonce| format!("ipip {address} nonce {nonce}"));
    let packet = probe_ipv4(
        inner_source.unwrap_or(Ipv4Addr::UNSPECIFIED),
        inner_destination.unwrap_or(*address),
        c.nonce(),
    );
    match send(*address, &packet) {
        Ok(()) => c.sent(),
        Err(f) => c.failed(f),
    }
}

/// One non-blocking send on a raw IP protocol 4 socket: it returns at once (or fails, e.g. with
/// no route), so it needs no deadline of its own.
fn send(address: Ipv4Addr, packet: &[u8]) -> Result<(), Fail> {
    let sock = Socket::new(
        Domain::IPV4,
        Type::RAW,
        Some(Protocol::from(i32::from(IPPROTO_IPIP))),
    )
    .map_err(|e| Fail::Local(format!("raw IP protocol 4 socket (needs CAP_NET_RAW): {e}")))?;
    sock.set_nonblocking(true)?;
    sock.send_to(packet, &SocketAddrV4::new(address, 0).into())
        .map_err(|e| Fail::Net(Failure::with_queue(e.raw_os_error(), &sock)))?;
    Ok(())
}
