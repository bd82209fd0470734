//! TCP SYNs and plain UDP probe datagrams as the receiving host's sniffer sees them: the probe
//! arriving, or the host's answer (SYN-ACK, UDP echo) leaving. Together they say whether a failed
//! TCP or UDP probe died on the network or in the receiving host.

use pnet_packet::ip::IpNextHeaderProtocols;
use pnet_packet::tcp::{TcpFlags, TcpPacket};
use pnet_packet::udp::UdpPacket;

use super::packet::{ip_view, payload_nonce};
use crate::proto::{Flow, SightingKind};

/// One TCP or UDP probe packet, with its flow as seen from the probe's sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowCapture {
    pub kind: SightingKind,
    pub flow: Flow,
    /// The UDP probe's nonce (0 for TCP: a SYN carries none).
    pub nonce: u32,
    /// The receiver's answer leaving this host, not the probe arriving.
    pub reply: bool,
}

/// Parses a captured IPv4 or IPv6 packet as a probe's SYN arriving at one of `tcp_ports`, this host's
/// SYN-ACK leaving from one of them, or a plain UDP probe datagram arriving (or its echo leaving).
/// `outgoing`: the packet socket saw it leave this host. Anything else (this host's own outgoing
/// probes, the answers they get) is `None`.
#[must_use]
pub fn parse_flow(ip_packet: &[u8], outgoing: bool, tcp_ports: &[u16]) -> Option<FlowCapture> {
    let ip = ip_view(ip_packet)?;
    let l4 = ip.payload;
    let (src, dst) = (ip.source, ip.destination);
    // Loopback (the coordinator's own `/seen` questions) is never a probe between nodes.
    if src.is_loopback() || dst.is_loopback() {
        return None;
    }
    match ip.protocol {
        IpNextHeaderProtocols::Tcp => {
            let tcp = TcpPacket::new(l4)?;
            let flags = tcp.get_flags();
            let (syn, ack) = (flags & TcpFlags::SYN != 0, flags & TcpFlags::ACK != 0);
            let (sport, dport) = (tcp.get_source(), tcp.get_destination());
            let (reply, flow) = match (outgoing, syn, ack) {
                (false, true, false) if tcp_ports.contains(&dport) => (
                    false,
                    Flow {
                        from: src,
                        source_port: sport,
                        port: dport,
                    },
                ),
                (true, true, true) if tcp_ports.contains(&sport) => (
                    true,
                    Flow {
                        from: dst,
                        source_port: dport,
                        port: sport,
                    },
                ),
                _ => return None,
            };
            Some(FlowCapture {
                kind: SightingKind::Tcp,
                flow,
                nonce: 0,
                reply,
            })
        }
        IpNextHeaderProtocols::Udp => {
            let udp = UdpPacket::new(l4)?;
            let nonce = payload_nonce(l4.get(8..)?)?;
            let (sport, dport) = (udp.get_source(), udp.get_destination());
            let flow = if outgoing {
                Flow {
                    from: dst,
                    source_port: dport,
                    port: sport,
                }
            } else {
                Flow {
                    from: src,
                    source_port: sport,
                    port: dport,
                }
            };
            Some(FlowCapture {
                kind: SightingKind::Udp,
                flow,
                nonce,
                reply: outgoing,
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::packet::probe_payload;
    use std::net::Ipv4Addr;

    const A: [u8; 4] = [192, 168, 56, 10];
    const B: [u8; 4] = [192, 168, 56, 11];

    fn ip(proto: u8, src: [u8; 4], dst: [u8; 4], l4: &[u8]) -> Vec<u8> {
        let mut p = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, proto, 0, 0];
        p.extend_from_slice(&src);
        p.extend_from_slice(&dst);
        p.extend_from_slice(l4);
        p
    }

    fn tcp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, flags: u8) -> Vec<u8> {
        let mut t = vec![0u8; 20];
        t[0..2].copy_from_slice(&sport.to_be_bytes());
        t[2..4].copy_from_slice(&dport.to_be_bytes());
        t[12] = 0x50;
        t[13] = flags;
        ip(6, src, dst, &t)
    }

    fn flow(sport: u16, port: u16) -> Flow {
        Flow {
            from: Ipv4Addr::from(A).into(),
            source_port: sport,
            port,
        }
    }

    #[test]
    fn a_syn_in_and_its_syn_ack_out_name_the_same_flow() {
        let ports = [10250];
        let syn = parse_flow(&tcp(A, B, 40000, 10250, 0x02), false, &ports).unwrap();
        assert_eq!(
            (syn.kind, syn.flow, syn.reply),
            (SightingKind::Tcp, flow(40000, 10250), false)
        );
        let syn_ack = parse_flow(&tcp(B, A, 10250, 40000, 0x12), true, &ports).unwrap();
        assert_eq!((syn_ack.flow, syn_ack.reply), (flow(40000, 10250), true));
        // This host's own probes going out, and the answers they get, are not receipts.
        assert_eq!(
            parse_flow(&tcp(B, A, 40001, 10250, 0x02), true, &ports),
            None
        );
        assert_eq!(
            parse_flow(&tcp(A, B, 10250, 40001, 0x12), false, &ports),
            None
        );
        assert_eq!(
            parse_flow(&tcp(A, B, 40000, 443, 0x02), false, &ports),
            None
        );
        assert_eq!(
            parse_flow(&tcp(A, B, 40000, 10250, 0x10), false, &ports),
            None
        );
    }

    #[test]
    fn a_udp_probe_in_and_its_echo_out_carry_the_nonce() {
        let mut u = vec![0x9c, 0x40, 0x26, 0xad, 0, 0, 0, 0];
        u.extend_from_slice(&probe_payload(77, 16));
        let got = parse_flow(&ip(17, A, B, &u), false, &[]).unwrap();
        assert_eq!(
            (got.kind, got.nonce, got.flow, got.reply),
            (SightingKind::Udp, 77, flow(40000, 9901), false)
        );
        let mut back = vec![0x26, 0xad, 0x9c, 0x40, 0, 0, 0, 0];
        back.extend_from_slice(&probe_payload(77, 16));
        let echo = parse_flow(&ip(17, B, A, &back), true, &[]).unwrap();
        assert_eq!((echo.flow, echo.reply), (flow(40000, 9901), true));
        let mut other = vec![0x9c, 0x40, 0x26, 0xad, 0, 0, 0, 0];
        other.extend_from_slice(b"hello, not a probe");
        assert_eq!(parse_flow(&ip(17, A, B, &other), false, &[]), None);
        assert_eq!(parse_flow(&[0x45, 0], false, &[]), None);
    }

    /// An IPv6 packet (fixed header only) from `src` to `dst`.
    fn ip6(next: u8, src: &str, dst: &str, l4: &[u8]) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0, 0, 0, next, 64];
        for a in [src, dst] {
            p.extend_from_slice(&a.parse::<std::net::Ipv6Addr>().unwrap().octets());
        }
        p.extend_from_slice(l4);
        p
    }

    #[test]
    fn ipv6_syns_and_udp_probes_name_their_ipv6_flow() {
        let (a, b) = ("fd77:1::2", "fd77:2::2");
        let l4 = |pkt: Vec<u8>| pkt[20..].to_vec();
        let want = Flow {
            from: a.parse().unwrap(),
            source_port: 40000,
            port: 10250,
        };
        let syn = ip6(6, a, b, &l4(tcp(A, B, 40000, 10250, 0x02)));
        let got = parse_flow(&syn, false, &[10250]).unwrap();
        assert_eq!(
            (got.kind, got.flow, got.reply),
            (SightingKind::Tcp, want, false)
        );
        let syn_ack = ip6(6, b, a, &l4(tcp(B, A, 10250, 40000, 0x12)));
        let got = parse_flow(&syn_ack, true, &[10250]).unwrap();
        assert_eq!((got.flow, got.reply), (want, true));
        let mut u = vec![0x9c, 0x40, 0x26, 0xad, 0, 0, 0, 0];
        u.extend_from_slice(&probe_payload(77, 16));
        let got = parse_flow(&ip6(17, a, b, &u), false, &[]).unwrap();
        assert_eq!(
            (got.kind, got.nonce, got.flow.from),
            (SightingKind::Udp, 77, want.from)
        );
        // Loopback is never a probe between nodes, in either family.
        assert_eq!(parse_flow(&ip6(17, "::1", "::1", &u), false, &[]), None);
        // Behind an extension header: not read as a probe.
        assert_eq!(parse_flow(&ip6(0, a, b, &u), false, &[]), None);
    }
}
