//! IP-in-IP and Geneve: the crafted probes (an inner IPv4 ICMP echo carrying `VXLAN_MAGIC` and
//! a nonce, as in the crafted VXLAN probe) and the parsers that find their nonce in what the
//! sniffer captured. Every parser takes arbitrary bytes and returns `None` on anything else.

use std::net::Ipv4Addr;

use pnet_packet::ethernet::{EtherTypes, EthernetPacket};
use pnet_packet::ip::IpNextHeaderProtocols;
use pnet_packet::ipv4::{self, Ipv4Packet, MutableIpv4Packet};
use pnet_packet::udp::UdpPacket;
use pnet_packet::{MutablePacket, Packet};

use super::packet::{PAYLOAD_HEADER, echo_request};
use crate::proto::VXLAN_MAGIC;

/// IP protocol number of IP-in-IP (RFC 2003).
pub const IPPROTO_IPIP: u8 = 4;
/// `WireGuard`'s ports: Calico's and flannel's (IPv4, IPv6) and Cilium's.
pub const WIREGUARD_PORTS: [u16; 3] = [51820, 51821, 51871];
/// Offset of the probe magic in a `WireGuard`-port datagram from the start of the UDP header.
#[allow(clippy::cast_possible_truncation)]
pub const WIREGUARD_MAGIC_OFFSET: u32 = UDP_HEADER as u32;
const IPV4_HEADER: usize = 20;
const ICMP_HEADER: usize = 8;
const UDP_HEADER: usize = 8;
const ETHERNET_HEADER: usize = 14;
/// A Geneve header without options.
pub const GENEVE_HEADER: usize = 8;
/// Geneve's protocol type for an inner Ethernet frame (Cilium's) and for a bare IPv4 packet.
const ETH_BRIDGING: u16 = 0x6558;
const ETH_IPV4: u16 = 0x0800;

/// Offset of the probe magic in a crafted IP-in-IP packet, counted from the start of the outer
/// IPv4 payload (the inner header has no options: we craft it).
#[allow(clippy::cast_possible_truncation)] // a few dozen bytes
pub const IPIP_MAGIC_OFFSET: u32 = (IPV4_HEADER + ICMP_HEADER) as u32;
/// Offset of the probe magic in a crafted Geneve datagram from the start of the UDP header.
#[allow(clippy::cast_possible_truncation)]
pub const GENEVE_MAGIC_OFFSET: u32 =
    (UDP_HEADER + GENEVE_HEADER + ETHERNET_HEADER + IPV4_HEADER + ICMP_HEADER) as u32;

/// The inner packet of a crafted tunnel probe: IPv4, ICMP echo request, `VXLAN_MAGIC`, nonce.
#[must_use]
pub fn probe_ipv4(source: Ipv4Addr, destination: Ipv4Addr, nonce: u32) -> Vec<u8> {
    let mut payload = [0u8; PAYLOAD_HEADER];
    payload[..4].copy_from_slice(&VXLAN_MAGIC);
    payload[4..].copy_from_slice(&nonce.to_be_bytes());
    let icmp = echo_request(
        u16::try_from(nonce >> 16).unwrap_or(0),
        u16::try_from(nonce & 0xffff).unwrap_or(0),
        &payload,
    );
    let mut buf = vec![0u8; IPV4_HEADER + icmp.len()];
    let len = u16::try_from(buf.len()).expect("small packet");
    let mut ip = MutableIpv4Packet::new(&mut buf).expect("room for IPv4");
    ip.set_version(4);
    ip.set_header_length(5);
    ip.set_total_length(len);
    ip.set_ttl(64);
    ip.set_flags(ipv4::Ipv4Flags::DontFragment);
    ip.set_next_level_protocol(IpNextHeaderProtocols::Icmp);
    ip.set_source(source);
    ip.set_destination(destination);
    ip.payload_mut().copy_from_slice(&icmp);
    let sum = ipv4::checksum(&ip.to_immutable());
    ip.set_checksum(sum);
    buf
}

/// A Geneve header (no options) for `protocol` and `vni`.
fn geneve_header(protocol: u16, vni: u32) -> [u8; GENEVE_HEADER] {
    let v = vni.to_be_bytes();
    let p = protocol.to_be_bytes();
    [0, 0, p[0], p[1], v[1], v[2], v[3], 0]
}

/// The UDP payload of a crafted Geneve probe: Geneve header, inner Ethernet (as Cilium carries
/// it), the probe's IPv4 packet.
#[must_use]
pub fn geneve_datagram(
    vni: u32,
    source_mac: [u8; 6],
    destination_mac: [u8; 6],
    inner: &[u8],
) -> Vec<u8> {
    let mut buf = Vec::with_capacity(GENEVE_HEADER + ETHERNET_HEADER + inner.len());
    buf.extend_from_slice(&geneve_header(ETH_BRIDGING, vni));
    buf.extend_from_slice(&destination_mac);
    buf.extend_from_slice(&source_mac);
    buf.extend_from_slice(&ETH_IPV4.to_be_bytes());
    buf.extend_from_slice(inner);
    buf
}

/// A Geneve datagram carrying a bare IPv4 packet (the lab's layer-3 tunnel).
#[must_use]
pub fn geneve_ip(vni: u32, inner: &[u8]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(GENEVE_HEADER + inner.len());
    buf.extend_from_slice(&geneve_header(ETH_IPV4, vni));
    buf.extend_from_slice(inner);
    buf
}

/// The inner IPv4 packet of a Geneve UDP payload (options skipped; an inner Ethernet frame
/// unwrapped), if it carries one.
#[must_use]
pub fn geneve_inner(udp_payload: &[u8]) -> Option<&[u8]> {
    let first = *udp_payload.first()?;
    // Version 0 only; the low six bits count the options in 4-byte words.
    if first >> 6 != 0 {
        return None;
    }
    let start = GENEVE_HEADER + usize::from(first & 0x3f) * 4;
    let protocol = u16::from_be_bytes([*udp_payload.get(2)?, *udp_payload.get(3)?]);
    let inner = udp_payload.get(start..)?;
    match protocol {
        ETH_IPV4 => Some(inner),
        ETH_BRIDGING => {
            let eth = EthernetPacket::new(inner)?;
            (eth.get_ethertype() == EtherTypes::Ipv4).then(|| inner.get(ETHERNET_HEADER..))?
        }
        _ => None,
    }
}

/// The nonce of a crafted probe's inner IPv4 packet (an ICMP echo request with the magic).
#[must_use]
pub fn inner_nonce(ip_packet: &[u8]) -> Option<u32> {
    let ip = Ipv4Packet::new(ip_packet)?;
    if ip.get_version() != 4 || ip.get_next_level_protocol() != IpNextHeaderProtocols::Icmp {
        return None;
    }
    let icmp = ip_packet.get(usize::from(ip.get_header_length()) * 4..)?;
    // Type 8 (echo request), code 0.
    if icmp.len() < ICMP_HEADER + PAYLOAD_HEADER || icmp[0] != 8 || icmp[1] != 0 {
        return None;
    }
    let payload = &icmp[ICMP_HEADER..];
    if payload[..4] != VXLAN_MAGIC {
        return None;
    }
    Some(u32::from_be_bytes([
        payload[4], payload[5], payload[6], payload[7],
    ]))
}

/// The payload of a `WireGuard`-port probe: `VXLAN_MAGIC`, the nonce, zeros. Its first byte is no
/// `WireGuard` message type (1-4), so a `WireGuard` device drops it.
#[must_use]
pub fn wireguard_payload(nonce: u32) -> Vec<u8> {
    let mut p = vec![0u8; 32];
    p[..4].copy_from_slice(&VXLAN_MAGIC);
    p[4..8].copy_from_slice(&nonce.to_be_bytes());
    p
}

/// The nonce of a `WireGuard`-port probe's UDP payload.
#[must_use]
pub fn wireguard_nonce(udp_payload: &[u8]) -> Option<u32> {
    if udp_payload.len() < PAYLOAD_HEADER || udp_payload[..4] != VXLAN_MAGIC {
        return None;
    }
    Some(u32::from_be_bytes([
        udp_payload[4],
        udp_payload[5],
        udp_payload[6],
        udp_payload[7],
    ]))
}

/// The nonce of a crafted tunnel probe in a captured outer IPv4 packet: IP protocol 4, or UDP to
/// one of `geneve_ports` or to a `WireGuard` port.
#[must_use]
pub fn outer_nonce(ip_packet: &[u8], geneve_ports: &[u16]) -> Option<u32> {
    let ip = super::packet::ip_view(ip_packet)?;
    let l4 = ip.payload;
    match ip.protocol.0 {
        IPPROTO_IPIP => inner_nonce(l4),
        17 => {
            let udp = UdpPacket::new(l4)?;
            if WIREGUARD_PORTS.contains(&udp.get_destination()) {
                return wireguard_nonce(udp.payload());
            }
            if !geneve_ports.contains(&udp.get_destination()) {
                return None;
            }
            inner_nonce(geneve_inner(udp.payload())?)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GENEVE: &[u16] = &[crate::proto::DEFAULT_GENEVE_PORT];

    fn outer(proto: u8, payload: &[u8]) -> Vec<u8> {
        let mut p = vec![
            0x45, 0, 0, 0, 0, 0, 0, 0, 64, proto, 0, 0, 192, 168, 56, 10, 192, 168, 57, 12,
        ];
        p.extend_from_slice(payload);
        p
    }

    fn inner() -> Vec<u8> {
        probe_ipv4(
            Ipv4Addr::new(10, 244, 1, 0),
            Ipv4Addr::new(10, 244, 3, 0),
            0xdead_beef,
        )
    }

    #[test]
    fn crafted_ipip_carries_the_nonce_at_the_filter_offset() {
        let pkt = outer(IPPROTO_IPIP, &inner());
        assert_eq!(outer_nonce(&pkt, GENEVE), Some(0xdead_beef));
        assert_eq!(
            inner_nonce(&inner()),
            Some(0xdead_beef),
            "after decapsulation"
        );
        assert_eq!(&pkt[20 + IPIP_MAGIC_OFFSET as usize..][..4], b"PRBV");
        let ip = Ipv4Packet::new(&pkt[20..]).unwrap();
        assert_eq!(ipv4::checksum(&ip), ip.get_checksum());
        assert_eq!(
            outer_nonce(&outer(41, &inner()), GENEVE),
            None,
            "IPv6-in-IPv4"
        );
    }

    #[test]
    fn crafted_geneve_carries_the_nonce_at_the_filter_offset() {
        let g = geneve_datagram(2, [2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], &inner());
        assert_eq!(&g[..8], &[0, 0, 0x65, 0x58, 0, 0, 2, 0]);
        let mut udp = vec![0x9c, 0x40, 0x17, 0xc1, 0, 0, 0, 0];
        udp.extend_from_slice(&g);
        let pkt = outer(17, &udp);
        assert_eq!(outer_nonce(&pkt, GENEVE), Some(0xdead_beef));
        assert_eq!(&pkt[20 + GENEVE_MAGIC_OFFSET as usize..][..4], b"PRBV");
        // Another port is not Geneve, unless it is configured as Geneve's.
        let mut other = pkt.clone();
        other[22..24].copy_from_slice(&7081u16.to_be_bytes());
        assert_eq!(outer_nonce(&other, GENEVE), None);
        assert_eq!(outer_nonce(&other, &[6081, 7081]), Some(0xdead_beef));
        // The lab's layer-3 form decapsulates to the same packet.
        assert_eq!(geneve_inner(&geneve_ip(2, &inner())), Some(&inner()[..]));
    }

    #[test]
    fn geneve_options_are_skipped_and_other_versions_refused() {
        let mut g = geneve_ip(2, &inner());
        g[0] = 1; // one 4-byte option word
        g.splice(8..8, [0xaa; 4]);
        assert_eq!(geneve_inner(&g), Some(&inner()[..]));
        g[0] = 0x41; // version 1
        assert_eq!(geneve_inner(&g), None);
        assert_eq!(geneve_inner(&[0, 0, 0x08]), None, "truncated");
    }

    #[test]
    fn wireguard_port_probes_carry_the_nonce_after_the_udp_header() {
        for port in WIREGUARD_PORTS {
            let mut udp = vec![0x9c, 0x40, 0, 0, 0, 0, 0, 0];
            udp[2..4].copy_from_slice(&port.to_be_bytes());
            udp.extend_from_slice(&wireguard_payload(7));
            let pkt = outer(17, &udp);
            assert_eq!(outer_nonce(&pkt, GENEVE), Some(7), "{port}");
            assert_eq!(&pkt[20 + WIREGUARD_MAGIC_OFFSET as usize..][..4], b"PRBV");
        }
        // A real WireGuard handshake initiation (type 1) is not ours.
        let mut udp = vec![0x9c, 0x40, 0xca, 0x6c, 0, 0, 0, 0, 1, 0, 0, 0];
        udp.extend_from_slice(&[0; 144]);
        assert_eq!(outer_nonce(&outer(17, &udp), GENEVE), None);
    }

    #[test]
    fn ordinary_pings_are_not_probes() {
        let mut ping = inner();
        ping[28..32].copy_from_slice(b"abcd");
        assert_eq!(inner_nonce(&ping), None);
        assert_eq!(outer_nonce(&outer(IPPROTO_IPIP, &ping), GENEVE), None);
        assert_eq!(outer_nonce(&[], GENEVE), None);
    }
}
