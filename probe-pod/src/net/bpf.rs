//! Classic BPF programs, so the kernel hands our raw and packet sockets only probe traffic: on a
//! busy node, copying every VXLAN frame or every ICMP reply to user space would cost real CPU.

use socket2::SockFilter;

use crate::proto::{MAGIC, VXLAN_MAGIC};

use super::encap::{
    GENEVE_MAGIC_OFFSET, IPIP_MAGIC_OFFSET, IPPROTO_IPIP, WIREGUARD_MAGIC_OFFSET, WIREGUARD_PORTS,
};
use super::packet::{ICMP_MAGIC_OFFSET, VXLAN_MAGIC_OFFSET};

const LD_H_ABS: u16 = 0x28;
const LD_B_ABS: u16 = 0x30;
const LD_W_IND: u16 = 0x40;
const LD_H_IND: u16 = 0x48;
const LD_B_IND: u16 = 0x50;
const LDX_B_MSH: u16 = 0xb1;
const LDX_IMM: u16 = 0x01;
const JEQ_K: u16 = 0x15;
const JSET_K: u16 = 0x45;
const RET_K: u16 = 0x06;
/// The ancillary load of the packet's protocol (`SKF_AD_OFF + SKF_AD_PROTOCOL`), in host order.
const SKF_AD_PROTOCOL: u32 = 0xffff_f000;
const ETH_P_IP: u32 = 0x0800;
const ETH_P_IPV6: u32 = 0x86dd;
/// The IPv6 header's length, and the offset of its next-header byte: a probe carries no
/// extension headers, so its TCP or UDP header follows at once.
const IPV6_HEADER: u32 = 40;
const IPV6_NEXT_HEADER: u32 = 6;
/// The UDP header's length: a plain UDP probe's magic follows it.
const UDP_HEADER: u32 = 8;
/// Offset of the flags byte in the TCP header, and the SYN bit.
const TCP_FLAGS_OFFSET: u32 = 13;
const TCP_SYN: u32 = 0x02;
/// The most TCP ports one program watches: each costs two instructions, and every jump must
/// stay within the 8 bits a classic BPF jump has.
pub const MAX_TCP_PORTS: usize = 48;
/// The most VXLAN ports, and the most Geneve ports, one program watches: one instruction each,
/// and all within the 8-bit jump over them.
pub const MAX_TUNNEL_PORTS: usize = 16;

/// One instruction before jump targets are resolved.
#[derive(Debug, Clone, Copy)]
enum Ins {
    Stmt(u16, u32),
    Jump(u16, u32, Target, Target),
    Label(&'static str),
}

#[derive(Debug, Clone, Copy)]
enum Target {
    Next,
    To(&'static str),
}

/// A resolved instruction: (code, jt, jf, k), as the kernel's `struct sock_filter`.
pub type Insn = (u16, u8, u8, u32);

fn assemble(prog: &[Ins]) -> Vec<Insn> {
    let mut labels = std::collections::HashMap::new();
    let mut pc = 0usize;
    for ins in prog {
        match ins {
            Ins::Label(name) => {
                labels.insert(*name, pc);
            }
            _ => pc += 1,
        }
    }
    let mut out = Vec::with_capacity(pc);
    for ins in prog {
        let here = out.len();
        let off = |t: Target| -> u8 {
            match t {
                Target::Next => 0,
                Target::To(name) => {
                    let to = labels[name];
                    u8::try_from(to - here - 1).expect("BPF jump fits in 8 bits")
                }
            }
        };
        match *ins {
            Ins::Stmt(code, k) => out.push((code, 0, 0, k)),
            Ins::Jump(code, k, jt, jf) => out.push((code, off(jt), off(jf), k)),
            Ins::Label(_) => {}
        }
    }
    out
}

/// For a cooked (`SOCK_DGRAM`) packet socket, whose data starts at the IPv4 or IPv6 header (an
/// IPv6 packet's payload read as following its fixed header; one with extension headers, a
/// fragment among them, is dropped): accept crafted VXLAN datagrams to one of `vxlan_ports`, crafted Geneve datagrams to one of
/// `geneve_ports` (each list at most `MAX_TUNNEL_PORTS`; the rest are not watched),
/// WireGuard-port probes and IP-in-IP packets, and decapsulated probe ICMP echoes, all recognised
/// by the probe magic at a fixed offset; plain UDP probe datagrams (and their echoes), recognised
/// by the probe magic at the start of the payload; and TCP segments with SYN set to or from one of
/// `tcp_ports` (a probe's SYN, the receiver's SYN-ACK). Everything else is dropped in the kernel,
/// so a busy node's ordinary traffic never reaches user space.
#[must_use]
pub fn sniffer_program(vxlan_ports: &[u16], geneve_ports: &[u16], tcp_ports: &[u16]) -> Vec<Insn> {
    use Target::{Next, To};
    let magic = u32::from_be_bytes(VXLAN_MAGIC);
    let mut p = vec![
        // The socket takes every protocol (only `ETH_P_ALL` sockets see outgoing packets, and
        // the SYN-ACK leaving is evidence): IPv4 and IPv6 only from here. Either way, X holds
        // the IP header's length and A the protocol it carries.
        Ins::Stmt(LD_H_ABS, SKF_AD_PROTOCOL),
        Ins::Jump(JEQ_K, ETH_P_IPV6, To("ipv6"), Next),
        Ins::Jump(JEQ_K, ETH_P_IP, Next, To("drop")),
        Ins::Stmt(LD_H_ABS, 6),
        Ins::Jump(JSET_K, 0x1fff, To("drop"), Next),
        Ins::Stmt(LDX_B_MSH, 0),
        Ins::Stmt(LD_B_ABS, 9),
        Ins::Jump(JEQ_K, 0, To("protocol"), To("protocol")),
        Ins::Label("ipv6"),
        Ins::Stmt(LDX_IMM, IPV6_HEADER),
        Ins::Stmt(LD_B_ABS, IPV6_NEXT_HEADER),
        Ins::Label("protocol"),
        Ins::Jump(JEQ_K, 1, To("icmp"), Next),
        Ins::Jump(JEQ_K, 6, To("tcp"), Next),
        Ins::Jump(JEQ_K, u32::from(IPPROTO_IPIP), To("ipip"), Next),
        Ins::Jump(JEQ_K, 17, Next, To("drop")),
        // A plain UDP probe: the payload starts with the probe magic.
        Ins::Stmt(LD_W_IND, UDP_HEADER),
        Ins::Jump(JEQ_K, u32::from_be_bytes(MAGIC), To("accept"), Next),
        Ins::Stmt(LD_H_IND, 2),
    ];
    // Geneve's header is as long as VXLAN's: its magic sits at the same offset.
    debug_assert_eq!(GENEVE_MAGIC_OFFSET, VXLAN_MAGIC_OFFSET);
    for &port in &WIREGUARD_PORTS {
        p.push(Ins::Jump(JEQ_K, u32::from(port), To("wg_magic"), Next));
    }
    let vxlan_ports = &vxlan_ports[..vxlan_ports.len().min(MAX_TUNNEL_PORTS)];
    let geneve_ports = &geneve_ports[..geneve_ports.len().min(MAX_TUNNEL_PORTS)];
    for &port in vxlan_ports.iter().chain(geneve_ports) {
        p.push(Ins::Jump(JEQ_K, u32::from(port), To("udp_magic"), Next));
    }
    p.extend([
        Ins::Jump(JEQ_K, 0, To("drop"), To("drop")), // no port matched
        Ins::Label("udp_magic"),
        Ins::Stmt(LD_W_IND, VXLAN_MAGIC_OFFSET),
        Ins::Jump(JEQ_K, magic, To("accept"), To("drop")),
        Ins::Label("wg_magic"),
        Ins::Stmt(LD_W_IND, WIREGUARD_MAGIC_OFFSET),
        Ins::Jump(JEQ_K, magic, To("accept"), To("drop")),
        Ins::Label("ipip"),
        Ins::Stmt(LD_W_IND, IPIP_MAGIC_OFFSET),
        Ins::Jump(JEQ_K, magic, To("accept"), To("drop")),
        Ins::Label("icmp"),
        Ins::Stmt(LD_W_IND, ICMP_MAGIC_OFFSET),
        Ins::Jump(JEQ_K, magic, To("accept"), To("drop")),
        // TCP: only segments with SYN (a connection's first packet each way), to or from a
        // watched port.
        Ins::Label("tcp"),
        Ins::Stmt(LD_B_IND, TCP_FLAGS_OFFSET),
        Ins::Jump(JSET_K, TCP_SYN, Next, To("drop")),
        Ins::Stmt(LD_H_IND, 2),
    ]);
    for &port in tcp_ports {
        p.push(Ins::Jump(JEQ_K, u32::from(port), To("accept"), Next));
    }
    p.push(Ins::Stmt(LD_H_IND, 0));
    for &port in tcp_ports {
        p.push(Ins::Jump(JEQ_K, u32::from(port), To("accept"), Next));
    }
    p.extend([
        Ins::Jump(JEQ_K, 0, To("drop"), To("drop")), // no port matched
        Ins::Label("accept"),
        Ins::Stmt(RET_K, 0xffff),
        Ins::Label("drop"),
        Ins::Stmt(RET_K, 0),
    ]);
    assemble(&p)
}

/// For a raw `IPPROTO_ICMP` socket (data starts at the IPv4 header): accept only echo replies
/// carrying our identifier.
#[must_use]
pub fn echo_reply_program(ident: u16) -> Vec<Insn> {
    use Target::{Next, To};
    assemble(&[
        Ins::Stmt(LDX_B_MSH, 0),
        Ins::Stmt(LD_B_IND, 0),
        Ins::Jump(JEQ_K, 0, Next, To("drop")),
        Ins::Stmt(LD_H_IND, 4),
        Ins::Jump(JEQ_K, u32::from(ident), Next, To("drop")),
        Ins::Stmt(RET_K, 0xffff),
        Ins::Label("drop"),
        Ins::Stmt(RET_K, 0),
    ])
}

/// For a raw `IPPROTO_ICMPV6` socket (data starts at the ICMPv6 header: IPv6 raw sockets never
/// see the IP header): accept only echo replies carrying our identifier.
#[must_use]
pub fn echo_reply_v6_program(ident: u16) -> Vec<Insn> {
    use Target::{Next, To};
    assemble(&[
        Ins::Stmt(LD_B_ABS, 0),
        Ins::Jump(
            JEQ_K,
            u32::from(super::packet::ICMPV6_ECHO_REPLY),
            Next,
            To("drop"),
        ),
        Ins::Stmt(LD_H_ABS, 4),
        Ins::Jump(JEQ_K, u32::from(ident), Next, To("drop")),
        Ins::Stmt(RET_K, 0xffff),
        Ins::Label("drop"),
        Ins::Stmt(RET_K, 0),
    ])
}

/// The program as the kernel's filter array.
#[must_use]
pub fn to_filter(prog: &[Insn]) -> Vec<SockFilter> {
    prog.iter()
        .map(|&(code, jt, jf, k)| SockFilter::new(code, jt, jf, k))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::packet::{VxlanProbe, echo_request, probe_payload, vxlan_datagram};
    use std::net::Ipv4Addr;

    /// An IPv4 packet, as most tests send.
    fn run(prog: &[Insn], pkt: &[u8]) -> u32 {
        run_as(prog, ETH_P_IP, pkt)
    }

    /// Just enough of a cBPF interpreter for the instructions above, to check the jump layout.
    /// `protocol` is what the kernel answers to the ancillary protocol load: the frame's
    /// ethertype (`skb->protocol`).
    fn run_as(prog: &[Insn], protocol: u32, pkt: &[u8]) -> u32 {
        let (mut a, mut x, mut pc) = (0u32, 0u32, 0usize);
        let load = |off: usize, size: usize| -> Option<u32> {
            let b = pkt.get(off..off + size)?;
            Some(b.iter().fold(0u32, |acc, &v| (acc << 8) | u32::from(v)))
        };
        loop {
            let (code, jt, jf, k) = prog[pc];
            let ku = k as usize;
            pc += 1;
            let loaded = match code {
                LD_H_ABS if k == SKF_AD_PROTOCOL => Some(Some(protocol)),
                LD_H_ABS => Some(load(ku, 2)),
                LD_B_ABS => Some(load(ku, 1)),
                LD_W_IND => Some(load(x as usize + ku, 4)),
                LD_H_IND => Some(load(x as usize + ku, 2)),
                LD_B_IND => Some(load(x as usize + ku, 1)),
                _ => None,
            };
            match (code, loaded) {
                (_, Some(None)) => return 0, // out-of-bounds load aborts with 0, as the kernel does
                (_, Some(Some(v))) => a = v,
                (LDX_B_MSH, _) => x = u32::from(pkt[ku] & 0xf) * 4,
                (LDX_IMM, _) => x = k,
                (JEQ_K, _) => pc += usize::from(if a == k { jt } else { jf }),
                (JSET_K, _) => pc += usize::from(if a & k != 0 { jt } else { jf }),
                (RET_K, _) => return k,
                _ => panic!("unexpected opcode {code:#x}"),
            }
        }
    }

    fn ipv4(proto: u8, frag: u16, payload: &[u8]) -> Vec<u8> {
        let mut p = vec![
            0x45, 0, 0, 0, 0, 0, 0, 0, 64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        p[6..8].copy_from_slice(&frag.to_be_bytes());
        p.extend_from_slice(payload);
        p
    }

    fn crafted(port: u16) -> Vec<u8> {
        let inner = vxlan_datagram(&VxlanProbe {
            vni: 1,
            source_mac: [2, 0, 0, 0, 0, 1],
            destination_mac: [2, 0, 0, 0, 0, 2],
            inner_source: Ipv4Addr::new(10, 244, 1, 0),
            inner_destination: Ipv4Addr::new(10, 244, 2, 0),
            nonce: 5,
        });
        let mut udp = vec![0x9c, 0x40, 0, 0, 0, 0, 0, 0];
        udp[2..4].copy_from_slice(&port.to_be_bytes());
        udp.extend_from_slice(&inner);
        ipv4(17, 0, &udp)
    }

    #[test]
    fn sniffer_accepts_only_probe_traffic() {
        let prog = sniffer_program(&[8472, 4789], &[6081], &[]);
        assert_eq!(run(&prog, &crafted(8472)), 0xffff);
        assert_eq!(run(&prog, &crafted(4789)), 0xffff);
        assert_eq!(run(&prog, &crafted(53)), 0, "other port");
        // The decapsulated crafted probe passes; ordinary probe pings (VTEP, MTU) do not.
        let crafted_inner = ipv4(1, 0, &echo_request(1, 1, b"PRBV\0\0\0\x05"));
        assert_eq!(run(&prog, &crafted_inner), 0xffff);
        let probe_ping = ipv4(1, 0, &echo_request(1, 1, &probe_payload(5, 8)));
        assert_eq!(
            run(&prog, &probe_ping),
            0,
            "VTEP and MTU pings are not sniffed"
        );
        let plain_ping = ipv4(1, 0, &echo_request(1, 1, b"abcdefgh"));
        assert_eq!(run(&prog, &plain_ping), 0, "ping without magic");
        let mut frag = crafted(8472);
        frag[6..8].copy_from_slice(&0x0010u16.to_be_bytes());
        assert_eq!(run(&prog, &frag), 0, "non-first fragment");
        // Real VXLAN traffic (no magic where ours sits) is dropped in the kernel.
        let mut other = crafted(8472);
        let at = 20 + VXLAN_MAGIC_OFFSET as usize;
        other[at] = b'X';
        assert_eq!(run(&prog, &other), 0);
        assert_eq!(run(&prog, &ipv4(6, 0, &[0; 20])), 0, "tcp");
    }

    #[test]
    fn sniffer_drops_what_is_not_ip() {
        const ETH_P_ARP: u32 = 0x0806;
        let prog = sniffer_program(&[8472], &[6081], &[10250]);
        // Bytes the program would take as IPv4: only the frame's protocol tells them apart.
        for pkt in [crafted(8472), tcp(40000, 10250, 0x02)] {
            assert_eq!(run_as(&prog, ETH_P_IP, &pkt), 0xffff);
            assert_eq!(run_as(&prog, ETH_P_IPV6, &pkt), 0, "read as IPv6");
            assert_eq!(run_as(&prog, ETH_P_ARP, &pkt), 0, "ARP");
        }
    }

    /// An IPv6 packet (fixed header only) carrying `next` with `payload`.
    fn ipv6(next: u8, payload: &[u8]) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0, 0, 0, next, 64];
        p.extend_from_slice(&[0xfd, 0x77, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        p.extend_from_slice(&[0xfd, 0x77, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        let len = u16::try_from(payload.len()).unwrap();
        p[4..6].copy_from_slice(&len.to_be_bytes());
        p.extend_from_slice(payload);
        p
    }

    #[test]
    fn sniffer_takes_ipv6_syns_and_probe_datagrams_at_their_own_offsets() {
        let prog = sniffer_program(&[8472], &[6081], &[10250]);
        let v6 = |pkt: &[u8]| run_as(&prog, ETH_P_IPV6, pkt);
        let l4 = |pkt: Vec<u8>| pkt[20..].to_vec();
        assert_eq!(v6(&ipv6(6, &l4(tcp(40000, 10250, 0x02)))), 0xffff, "SYN in");
        assert_eq!(
            v6(&ipv6(6, &l4(tcp(10250, 40000, 0x12)))),
            0xffff,
            "SYN-ACK"
        );
        assert_eq!(v6(&ipv6(6, &l4(tcp(40000, 10250, 0x10)))), 0, "an ACK");
        assert_eq!(v6(&ipv6(6, &l4(tcp(40000, 443, 0x02)))), 0, "unwatched");
        let probe = l4(udp(9917, &probe_payload(5, 16)));
        assert_eq!(v6(&ipv6(17, &probe)), 0xffff, "a UDP probe");
        assert_eq!(v6(&ipv6(17, &l4(udp(9917, b"not a probe at all")))), 0);
        // Crafted VXLAN over an IPv6 underlay: the magic at the same offset past the UDP header.
        assert_eq!(v6(&ipv6(17, &l4(crafted(8472)))), 0xffff, "vxlan");
        assert_eq!(v6(&ipv6(17, &l4(crafted(53)))), 0, "vxlan, another port");
        // Behind a hop-by-hop header (next header 0) or a fragment header (44): not a probe.
        assert_eq!(v6(&ipv6(0, &probe)), 0, "extension header");
        assert_eq!(v6(&ipv6(44, &probe)), 0, "fragment");
        // The same bytes read as IPv4 are not taken.
        assert_eq!(run_as(&prog, ETH_P_IP, &ipv6(17, &probe)), 0);
    }

    fn tcp(sport: u16, dport: u16, flags: u8) -> Vec<u8> {
        let mut t = vec![0u8; 20];
        t[0..2].copy_from_slice(&sport.to_be_bytes());
        t[2..4].copy_from_slice(&dport.to_be_bytes());
        t[12] = 0x50;
        t[13] = flags;
        ipv4(6, 0, &t)
    }

    fn udp(dport: u16, payload: &[u8]) -> Vec<u8> {
        let mut u = vec![0x9c, 0x40, 0, 0, 0, 0, 0, 0];
        u[2..4].copy_from_slice(&dport.to_be_bytes());
        u.extend_from_slice(payload);
        ipv4(17, 0, &u)
    }

    #[test]
    fn sniffer_takes_only_syns_of_watched_ports_and_probe_datagrams() {
        let prog = sniffer_program(&[8472], &[6081], &[10250, 9917]);
        assert_eq!(run(&prog, &tcp(40000, 10250, 0x02)), 0xffff, "SYN in");
        assert_eq!(run(&prog, &tcp(10250, 40000, 0x12)), 0xffff, "SYN-ACK out");
        assert_eq!(run(&prog, &tcp(40000, 9917, 0x02)), 0xffff);
        assert_eq!(run(&prog, &tcp(40000, 10250, 0x10)), 0, "a plain ACK");
        assert_eq!(run(&prog, &tcp(40000, 10250, 0x18)), 0, "data");
        assert_eq!(run(&prog, &tcp(40000, 443, 0x02)), 0, "an unwatched port");
        assert_eq!(run(&prog, &tcp(40000, 10250, 0x04)), 0, "a RST");
        let mut syn_frag = tcp(40000, 10250, 0x02);
        syn_frag[6..8].copy_from_slice(&0x0010u16.to_be_bytes());
        assert_eq!(run(&prog, &syn_frag), 0, "non-first fragment");
        assert_eq!(run(&prog, &udp(9917, &probe_payload(5, 16))), 0xffff);
        assert_eq!(
            run(&prog, &udp(53, &probe_payload(5, 16))),
            0xffff,
            "any port"
        );
        assert_eq!(run(&prog, &udp(9917, b"not a probe at all")), 0);
        assert_eq!(run(&prog, &udp(9917, b"PR")), 0, "short");
        // The VXLAN branch still works next to it.
        assert_eq!(run(&prog, &crafted(8472)), 0xffff);
        // No TCP ports watched: no TCP at all.
        let none = sniffer_program(&[8472], &[6081], &[]);
        assert_eq!(run(&none, &tcp(40000, 10250, 0x02)), 0);
        // The most ports allowed still assemble (every jump within 8 bits); tunnel ports past the
        // most are not watched.
        let many: Vec<u16> = (1..=u16::try_from(MAX_TCP_PORTS).unwrap()).collect();
        let past = u16::try_from(MAX_TUNNEL_PORTS).unwrap();
        let vxlan: Vec<u16> = (20000..=20000 + past).collect();
        let geneve: Vec<u16> = (30000..=30000 + past).collect();
        let big = sniffer_program(&vxlan, &geneve, &many);
        assert_eq!(
            run(&big, &tcp(40000, many[MAX_TCP_PORTS - 1], 0x02)),
            0xffff
        );
        assert_eq!(run(&big, &udp(9917, &probe_payload(5, 16))), 0xffff);
        assert_eq!(run(&big, &crafted(20000 + past - 1)), 0xffff);
        assert_eq!(run(&big, &crafted(30000 + past - 1)), 0xffff);
        assert_eq!(run(&big, &crafted(20000 + past)), 0, "past the most");
        assert_eq!(run(&big, &crafted(30000 + past)), 0, "past the most");
    }

    #[test]
    fn sniffer_accepts_crafted_ipip_and_geneve() {
        use crate::net::encap::{geneve_datagram, probe_ipv4};
        let prog = sniffer_program(&[8472], &[6081], &[]);
        let inner = probe_ipv4(
            Ipv4Addr::new(10, 244, 1, 0),
            Ipv4Addr::new(10, 244, 2, 0),
            5,
        );
        assert_eq!(run(&prog, &ipv4(4, 0, &inner)), 0xffff, "ipip");
        let mut plain = inner.clone();
        plain[28] = b'X';
        assert_eq!(run(&prog, &ipv4(4, 0, &plain)), 0, "other ipip traffic");
        let mut udp = vec![0x9c, 0x40, 0x17, 0xc1, 0, 0, 0, 0];
        udp.extend_from_slice(&geneve_datagram(1, [2, 0, 0, 0, 0, 1], [2; 6], &inner));
        assert_eq!(run(&prog, &ipv4(17, 0, &udp)), 0xffff, "geneve");
        udp[2..4].copy_from_slice(&6082u16.to_be_bytes());
        assert_eq!(run(&prog, &ipv4(17, 0, &udp)), 0, "not the geneve port");
        let mut wg = vec![0x9c, 0x40, 0xca, 0x9f, 0, 0, 0, 0];
        wg.extend_from_slice(&crate::net::encap::wireguard_payload(5));
        assert_eq!(run(&prog, &ipv4(17, 0, &wg)), 0xffff, "wireguard 51871");
        wg[8] = 1;
        assert_eq!(run(&prog, &ipv4(17, 0, &wg)), 0, "real wireguard traffic");
        // What the kernel delivers on the tunnel device after decapsulation.
        assert_eq!(run(&prog, &inner), 0xffff, "decapsulated");
        // Geneve on another port is taken when that port is configured, and 6081 then is not.
        let elsewhere = sniffer_program(&[8472], &[7081], &[]);
        udp[2..4].copy_from_slice(&7081u16.to_be_bytes());
        assert_eq!(run(&elsewhere, &ipv4(17, 0, &udp)), 0xffff, "geneve 7081");
        assert_eq!(run(&prog, &ipv4(17, 0, &udp)), 0, "7081 not configured");
        udp[2..4].copy_from_slice(&6081u16.to_be_bytes());
        assert_eq!(
            run(&elsewhere, &ipv4(17, 0, &udp)),
            0,
            "6081 not configured"
        );
    }

    #[test]
    fn echo_v6_filter_matches_ident_on_bare_icmpv6() {
        use crate::net::packet::{ICMPV6_ECHO_REPLY, echo_request_v6};
        let prog = echo_reply_v6_program(0xbeef);
        let mut reply = echo_request_v6(0xbeef, 1, b"PRB1xxxx");
        reply[0] = ICMPV6_ECHO_REPLY;
        assert_eq!(run(&prog, &reply), 0xffff);
        let mut other = echo_request_v6(0xbeee, 1, b"PRB1xxxx");
        other[0] = ICMPV6_ECHO_REPLY;
        assert_eq!(run(&prog, &other), 0, "another identifier");
        assert_eq!(
            run(&prog, &echo_request_v6(0xbeef, 1, b"x")),
            0,
            "a request"
        );
        // A destination unreachable (type 1) raw ICMPv6 sockets also receive.
        assert_eq!(run(&prog, &[1, 4, 0, 0, 0xbe, 0xef, 0, 0]), 0);
    }

    #[test]
    fn echo_filter_matches_ident() {
        let prog = echo_reply_program(0xbeef);
        let mut reply = echo_request(0xbeef, 1, b"PRB1xxxx");
        reply[0] = 0;
        assert_eq!(run(&prog, &ipv4(1, 0, &reply)), 0xffff);
        let mut other = echo_request(0xbeee, 1, b"PRB1xxxx");
        other[0] = 0;
        assert_eq!(run(&prog, &ipv4(1, 0, &other)), 0);
        let request = echo_request(0xbeef, 1, b"PRB1xxxx");
        assert_eq!(run(&prog, &ipv4(1, 0, &request)), 0);
    }
}
