//! Probe payloads and the packets that carry them: ICMP and ICMPv6 echo, crafted VXLAN, and the
//! parser that finds a probe nonce in whatever the sniffer captured.

use std::net::{IpAddr, Ipv4Addr};

use pnet_packet::Packet;
use pnet_packet::ethernet::{EtherTypes, EthernetPacket, MutableEthernetPacket};
use pnet_packet::icmp::{IcmpPacket, IcmpTypes, MutableIcmpPacket};
use pnet_packet::ip::{IpNextHeaderProtocol, IpNextHeaderProtocols};
use pnet_packet::ipv4::{self, Ipv4Packet, MutableIpv4Packet};
use pnet_packet::ipv6::Ipv6Packet;
use pnet_packet::udp::UdpPacket;
use pnet_packet::vxlan::{MutableVxlanPacket, VxlanPacket};

use crate::proto::{MAGIC, VXLAN_MAGIC};

/// Bytes of magic + nonce at the start of every probe payload.
pub const PAYLOAD_HEADER: usize = 8;
const ICMP_HEADER: usize = 8;
/// ICMPv6 echo request and reply types (RFC 4443).
pub const ICMPV6_ECHO_REQUEST: u8 = 128;
pub const ICMPV6_ECHO_REPLY: u8 = 129;
const IPV4_HEADER: usize = 20;
const IPV6_HEADER: usize = 40;
const ETHERNET_HEADER: usize = 14;
const VXLAN_HEADER: usize = 8;
const UDP_HEADER: usize = 8;

/// Offset of the probe magic in a crafted VXLAN datagram, counted from the start of the outer UDP
/// header (used by the sniffer's BPF filter).
#[allow(clippy::cast_possible_truncation)] // a few dozen bytes
pub const VXLAN_MAGIC_OFFSET: u32 =
    (UDP_HEADER + VXLAN_HEADER + ETHERNET_HEADER + IPV4_HEADER + ICMP_HEADER) as u32;
/// Offset of the probe magic from the start of an ICMP header.
#[allow(clippy::cast_possible_truncation)]
pub const ICMP_MAGIC_OFFSET: u32 = ICMP_HEADER as u32;

/// `MAGIC`, the nonce, then zeros up to `len` bytes (at least the header).
#[must_use]
pub fn probe_payload(nonce: u32, len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len.max(PAYLOAD_HEADER)];
    p[..4].copy_from_slice(&MAGIC);
    p[4..8].copy_from_slice(&nonce.to_be_bytes());
    p
}

/// The inner payload of a crafted VXLAN probe: `VXLAN_MAGIC` and the nonce.
fn vxlan_payload(nonce: u32) -> Vec<u8> {
    let mut p = probe_payload(nonce, PAYLOAD_HEADER);
    p[..4].copy_from_slice(&VXLAN_MAGIC);
    p
}

/// The nonce of a probe payload, if `buf` is one.
#[must_use]
pub fn payload_nonce(buf: &[u8]) -> Option<u32> {
    if buf.len() < PAYLOAD_HEADER || buf[..4] != MAGIC {
        return None;
    }
    Some(u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]))
}

/// An ICMP echo request carrying `payload`, checksum filled in.
#[must_use]
pub fn echo_request(ident: u16, seq: u16, payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; ICMP_HEADER + payload.len()];
    buf[0] = 8;
    buf[4..6].copy_from_slice(&ident.to_be_bytes());
    buf[6..8].copy_from_slice(&seq.to_be_bytes());
    buf[ICMP_HEADER..].copy_from_slice(payload);
    let mut pkt = MutableIcmpPacket::new(&mut buf).expect("buffer holds an ICMP header");
    let sum = pnet_packet::icmp::checksum(&pkt.to_immutable());
    pkt.set_checksum(sum);
    buf
}

/// An ICMPv6 echo request carrying `payload`, checksum zero: the kernel fills it in on every
/// ICMPv6 socket, raw or ping (it covers the IPv6 pseudo-header, whose source only the kernel
/// knows).
#[must_use]
pub fn echo_request_v6(ident: u16, seq: u16, payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; ICMP_HEADER + payload.len()];
    buf[0] = ICMPV6_ECHO_REQUEST;
    buf[4..6].copy_from_slice(&ident.to_be_bytes());
    buf[6..8].copy_from_slice(&seq.to_be_bytes());
    buf[ICMP_HEADER..].copy_from_slice(payload);
    buf
}

/// An echo reply: identifier, sequence, and the nonce from its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EchoReply {
    pub ident: u16,
    pub seq: u16,
    pub nonce: Option<u32>,
}

/// Parses an echo reply. Raw sockets deliver the IPv4 header first; ping sockets do not.
#[must_use]
pub fn parse_echo_reply(buf: &[u8], with_ip_header: bool) -> Option<EchoReply> {
    let icmp = if with_ip_header {
        let ip = Ipv4Packet::new(buf)?;
        let start = usize::from(ip.get_header_length()) * 4;
        buf.get(start..)?
    } else {
        buf
    };
    let pkt = IcmpPacket::new(icmp)?;
    if pkt.get_icmp_type() != IcmpTypes::EchoReply {
        return None;
    }
    echo_fields(icmp)
}

/// Parses an ICMPv6 echo reply. Every ICMPv6 socket, raw or ping, delivers it without the IPv6
/// header.
#[must_use]
pub fn parse_echo_reply_v6(icmp: &[u8]) -> Option<EchoReply> {
    if icmp.first() != Some(&ICMPV6_ECHO_REPLY) {
        return None;
    }
    echo_fields(icmp)
}

/// Identifier, sequence and nonce of an echo message, request or reply (the same layout in both
/// families).
#[must_use]
pub fn echo_fields(icmp: &[u8]) -> Option<EchoReply> {
    if icmp.len() < ICMP_HEADER {
        return None;
    }
    Some(EchoReply {
        ident: u16::from_be_bytes([icmp[4], icmp[5]]),
        seq: u16::from_be_bytes([icmp[6], icmp[7]]),
        nonce: payload_nonce(&icmp[ICMP_HEADER..]),
    })
}

/// What goes inside the crafted VXLAN datagram.
#[derive(Debug, Clone, Copy)]
pub struct VxlanProbe {
    pub vni: u32,
    pub source_mac: [u8; 6],
    pub destination_mac: [u8; 6],
    pub inner_source: Ipv4Addr,
    pub inner_destination: Ipv4Addr,
    pub nonce: u32,
}

/// The UDP payload of a VXLAN datagram: VXLAN header, inner Ethernet, IPv4, ICMP echo with nonce.
#[must_use]
pub fn vxlan_datagram(p: &VxlanProbe) -> Vec<u8> {
    let icmp = echo_request(
        u16::try_from(p.nonce >> 16).unwrap_or(0),
        u16::try_from(p.nonce & 0xffff).unwrap_or(0),
        &vxlan_payload(p.nonce),
    );
    let ip_len = IPV4_HEADER + icmp.len();
    let mut buf = vec![0u8; VXLAN_HEADER + ETHERNET_HEADER + ip_len];
    {
        let mut vx = MutableVxlanPacket::new(&mut buf).expect("room for VXLAN header");
        vx.set_flags(0x08);
        vx.set_vni(p.vni);
    }
    {
        let mut eth =
            MutableEthernetPacket::new(&mut buf[VXLAN_HEADER..]).expect("room for Ethernet");
        eth.set_destination(p.destination_mac.into());
        eth.set_source(p.source_mac.into());
        eth.set_ethertype(EtherTypes::Ipv4);
    }
    let ip_start = VXLAN_HEADER + ETHERNET_HEADER;
    {
        let mut ip = MutableIpv4Packet::new(&mut buf[ip_start..]).expect("room for IPv4");
        ip.set_version(4);
        ip.set_header_length(5);
        ip.set_total_length(u16::try_from(ip_len).expect("small packet"));
        ip.set_ttl(64);
        ip.set_flags(ipv4::Ipv4Flags::DontFragment);
        ip.set_next_level_protocol(IpNextHeaderProtocols::Icmp);
        ip.set_source(p.inner_source);
        ip.set_destination(p.inner_destination);
        ip.set_payload(&icmp);
        let sum = ipv4::checksum(&ip.to_immutable());
        ip.set_checksum(sum);
    }
    buf
}

/// What a sniffer needs of an IPv4 or IPv6 packet: its addresses, the protocol it carries and
/// that protocol's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpView<'a> {
    pub source: IpAddr,
    pub destination: IpAddr,
    /// The IPv4 protocol, or the IPv6 header's next header.
    pub protocol: IpNextHeaderProtocol,
    pub payload: &'a [u8],
}

/// Reads an IPv4 packet, or an IPv6 packet whose payload follows its fixed header (no probe
/// carries extension headers, so a packet with them is not one: `protocol` is then theirs).
#[must_use]
pub fn ip_view(packet: &[u8]) -> Option<IpView<'_>> {
    match packet.first()? >> 4 {
        4 => {
            let ip = Ipv4Packet::new(packet)?;
            Some(IpView {
                source: ip.get_source().into(),
                destination: ip.get_destination().into(),
                protocol: ip.get_next_level_protocol(),
                payload: packet.get(usize::from(ip.get_header_length()) * 4..)?,
            })
        }
        6 => {
            let ip = Ipv6Packet::new(packet)?;
            Some(IpView {
                source: ip.get_source().into(),
                destination: ip.get_destination().into(),
                protocol: ip.get_next_header(),
                payload: packet.get(IPV6_HEADER..)?,
            })
        }
        _ => None,
    }
}

/// A probe nonce found in a captured IPv4 or IPv6 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Captured {
    pub nonce: u32,
    /// Source address of the outermost IP header.
    pub from: IpAddr,
    /// The bare inner ICMP echo (after the kernel decapsulated it), not the outer datagram.
    pub decapsulated: bool,
}

/// Finds a probe nonce in a captured IPv4 (or IPv6, the underlay's) packet: either a crafted
/// VXLAN datagram to one of
/// `vxlan_ports`, Geneve datagram to one of `geneve_ports`, `WireGuard`-port datagram or IP-in-IP
/// packet (as seen on the underlay) or the decapsulated inner ICMP echo (as seen on the tunnel
/// device).
#[must_use]
pub fn parse_captured(
    ip_packet: &[u8],
    vxlan_ports: &[u16],
    geneve_ports: &[u16],
) -> Option<Captured> {
    use super::encap::{WIREGUARD_PORTS, outer_nonce};
    let ip = ip_view(ip_packet)?;
    let (from, l4) = (ip.source, ip.payload);
    let (nonce, decapsulated) = match ip.protocol {
        // IP-in-IP: the crafted tunnel probe as seen on the underlay.
        IpNextHeaderProtocols::Ipv4 => (outer_nonce(ip_packet, geneve_ports)?, false),
        IpNextHeaderProtocols::Udp => {
            let port = UdpPacket::new(l4)?.get_destination();
            // A port may be both a Geneve and a VXLAN port: each parse in turn.
            let tunnel = (geneve_ports.contains(&port) || WIREGUARD_PORTS.contains(&port))
                .then(|| outer_nonce(ip_packet, geneve_ports))
                .flatten();
            let vxlan = || {
                vxlan_ports
                    .contains(&port)
                    .then(|| vxlan_udp_nonce(l4.get(UDP_HEADER..)?))
                    .flatten()
            };
            (tunnel.or_else(vxlan)?, false)
        }
        IpNextHeaderProtocols::Icmp => (icmp_nonce(l4)?, true),
        _ => return None,
    };
    Some(Captured {
        nonce,
        from,
        decapsulated,
    })
}

/// The nonce of a crafted VXLAN probe, given the UDP payload a plain socket received (the
/// preflight stand-in, where no VXLAN device owns the port yet).
#[must_use]
pub fn vxlan_udp_nonce(udp_payload: &[u8]) -> Option<u32> {
    let vx = VxlanPacket::new(udp_payload)?;
    let eth = EthernetPacket::new(vx.payload())?;
    if eth.get_ethertype() != EtherTypes::Ipv4 {
        return None;
    }
    inner_icmp_nonce(eth.payload())
}

fn inner_icmp_nonce(ip_packet: &[u8]) -> Option<u32> {
    let ip = Ipv4Packet::new(ip_packet)?;
    if ip.get_next_level_protocol() != IpNextHeaderProtocols::Icmp {
        return None;
    }
    icmp_nonce(ip_packet.get(usize::from(ip.get_header_length()) * 4..)?)
}

fn icmp_nonce(icmp: &[u8]) -> Option<u32> {
    let pkt = IcmpPacket::new(icmp)?;
    if pkt.get_icmp_type() != IcmpTypes::EchoRequest {
        return None;
    }
    let payload = icmp.get(ICMP_HEADER..)?;
    if payload.len() < PAYLOAD_HEADER || payload[..4] != VXLAN_MAGIC {
        return None;
    }
    Some(u32::from_be_bytes([
        payload[4], payload[5], payload[6], payload[7],
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn probe() -> VxlanProbe {
        VxlanProbe {
            vni: 1,
            source_mac: [0x02, 0, 0, 0, 0, 0x01],
            destination_mac: [0x02, 0, 0, 0, 0, 0x02],
            inner_source: Ipv4Addr::new(10, 244, 1, 0),
            inner_destination: Ipv4Addr::new(10, 244, 2, 0),
            nonce: 0xdead_beef,
        }
    }

    #[test]
    fn vxlan_datagram_bytes() {
        let got = vxlan_datagram(&probe());
        let want = hex("08 000000 000001 00 \
             020000000002 020000000001 0800 \
             45 00 0024 0000 4000 40 01 21f2 0af40100 0af40200 \
             08 00 2a1c dead beef 50524256 deadbeef");
        assert_eq!(got, want);
        // The checksums verify.
        let ip = Ipv4Packet::new(&got[22..]).unwrap();
        assert_eq!(ipv4::checksum(&ip), ip.get_checksum());
        let icmp = IcmpPacket::new(&got[42..]).unwrap();
        assert_eq!(pnet_packet::icmp::checksum(&icmp), icmp.get_checksum());
    }

    #[test]
    fn captured_vxlan_on_underlay_yields_nonce() {
        // Outer IPv4 + UDP 8472 around the crafted payload.
        let inner = vxlan_datagram(&probe());
        let mut pkt = hex("45000000 0000 0000 40 11 0000 c0a83865 c0a83866 d431 2118 0000 0000");
        pkt.extend_from_slice(&inner);
        let c = parse_captured(&pkt, &[8472], &[6081]).unwrap();
        assert_eq!(
            c,
            Captured {
                nonce: 0xdead_beef,
                from: Ipv4Addr::new(192, 168, 56, 101).into(),
                decapsulated: false,
            }
        );
        assert_eq!(parse_captured(&pkt, &[4789], &[6081]), None, "other port");
        assert_eq!(VXLAN_MAGIC_OFFSET as usize + 20, 20 + 8 + 8 + 14 + 20 + 8);
        assert_eq!(&pkt[20 + VXLAN_MAGIC_OFFSET as usize..][..4], b"PRBV");
    }

    #[test]
    fn captured_geneve_counts_on_the_configured_ports_only() {
        use crate::net::encap::{geneve_datagram, probe_ipv4};
        let inner = probe_ipv4(
            Ipv4Addr::new(10, 244, 1, 0),
            Ipv4Addr::new(10, 244, 2, 0),
            0xdead_beef,
        );
        let mut pkt = hex("45000000 0000 0000 40 11 0000 c0a83865 c0a83866 d431 1ba9 0000 0000");
        pkt.extend_from_slice(&geneve_datagram(2, [2, 0, 0, 0, 0, 1], [2; 6], &inner));
        // UDP 7081.
        let c = parse_captured(&pkt, &[8472], &[7081]).unwrap();
        assert_eq!((c.nonce, c.decapsulated), (0xdead_beef, false));
        assert_eq!(
            parse_captured(&pkt, &[8472], &[6081]),
            None,
            "not configured"
        );
        // A port both lists name: the Geneve parse finds it, and VXLAN's still works there.
        assert!(parse_captured(&pkt, &[7081], &[7081]).is_some());
        let mut vx = hex("45000000 0000 0000 40 11 0000 c0a83865 c0a83866 d431 1ba9 0000 0000");
        vx.extend_from_slice(&vxlan_datagram(&probe()));
        assert!(parse_captured(&vx, &[7081], &[7081]).is_some());
    }

    #[test]
    fn captured_inner_icmp_on_vxlan_device_yields_nonce() {
        let inner = vxlan_datagram(&probe());
        let ip = &inner[22..];
        let c = parse_captured(ip, &[8472], &[6081]).unwrap();
        assert_eq!(c.nonce, 0xdead_beef);
        assert_eq!(c.from, Ipv4Addr::new(10, 244, 1, 0));
        assert!(c.decapsulated);
    }

    #[test]
    fn foreign_packets_are_ignored() {
        // A normal ping (payload without magic).
        let mut ping = hex("45000024 0000 0000 40 01 0000 0a000001 0a000002");
        ping.extend_from_slice(&echo_request(1, 1, b"abcdefgh"));
        assert_eq!(parse_captured(&ping, &[8472], &[6081]), None);
        // Truncated garbage.
        assert_eq!(parse_captured(&[0x45, 0, 0], &[8472], &[6081]), None);
        assert_eq!(parse_captured(&[], &[8472], &[6081]), None);
    }

    #[test]
    fn echo_reply_parse_with_and_without_ip_header() {
        let mut reply = echo_request(0x1234, 7, &probe_payload(42, 16));
        reply[0] = 0; // type echo reply
        assert_eq!(
            parse_echo_reply(&reply, false),
            Some(EchoReply {
                ident: 0x1234,
                seq: 7,
                nonce: Some(42)
            })
        );
        let mut with_ip = hex("45000000 0000 0000 40 01 0000 0a000002 0a000001");
        with_ip.extend_from_slice(&reply);
        assert_eq!(parse_echo_reply(&with_ip, true).unwrap().seq, 7);
        // A request is not a reply.
        assert_eq!(parse_echo_reply(&echo_request(1, 1, b"x"), false), None);
    }

    #[test]
    fn icmpv6_echo_request_and_reply() {
        let req = echo_request_v6(0x1234, 7, &probe_payload(42, 16));
        assert_eq!(&req[..8], &[128, 0, 0, 0, 0x12, 0x34, 0, 7]);
        assert_eq!(req.len(), 8 + 16);
        assert_eq!(parse_echo_reply_v6(&req), None, "a request is not a reply");
        let mut reply = req.clone();
        reply[0] = ICMPV6_ECHO_REPLY;
        assert_eq!(
            parse_echo_reply_v6(&reply),
            Some(EchoReply {
                ident: 0x1234,
                seq: 7,
                nonce: Some(42)
            })
        );
        // An ICMPv4 echo reply (type 0) is not an ICMPv6 one, nor is a truncated reply.
        assert_eq!(parse_echo_reply_v6(&[0, 0, 0, 0, 0x12, 0x34, 0, 7]), None);
        assert_eq!(parse_echo_reply_v6(&reply[..6]), None);
    }

    #[test]
    fn payload_round_trip() {
        let p = probe_payload(9, 3);
        assert_eq!(p.len(), PAYLOAD_HEADER);
        assert_eq!(payload_nonce(&p), Some(9));
        assert_eq!(payload_nonce(b"PRB"), None);
        assert_eq!(payload_nonce(b"XXXX\0\0\0\x01"), None);
    }
}
