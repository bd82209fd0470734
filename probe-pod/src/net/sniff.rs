//! `AF_PACKET` capture of probe nonces on every interface of the namespace, filtered in the kernel by
//! a BPF program: a crafted VXLAN, Geneve or IP-in-IP packet seen on the underlay but not on the
//! tunnel device means the host's own stack (its firewall, or a VNI mismatch) dropped it.

use std::collections::HashMap;
use std::io;

use nix::sys::socket::{LinkAddr, recvfrom};
use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::unix::AsyncFd;

use super::bpf;
use super::flow::{FlowCapture, parse_flow};
use super::packet::{Captured, parse_captured};

const PACKET_OUTGOING: u8 = 4;

pub struct Sniffer {
    fd: AsyncFd<Socket>,
    vxlan_ports: Vec<u16>,
    geneve_ports: Vec<u16>,
    tcp_ports: Vec<u16>,
    names: HashMap<usize, String>,
}

/// One capture: the nonce, where it came from, and the interface it was seen on; for a TCP or
/// UDP probe packet, also its flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capture {
    pub captured: Captured,
    pub interface: String,
    pub flow: Option<FlowCapture>,
}

impl Sniffer {
    /// Opens a cooked packet socket on all interfaces, IPv4 and IPv6, taking crafted VXLAN probes to
    /// `vxlan_ports`, crafted Geneve probes to `geneve_ports` (at most `bpf::MAX_TUNNEL_PORTS`
    /// each), the other crafted tunnel probes, plain UDP probes, and SYNs to (and SYN-ACKs from)
    /// `tcp_ports` (at most `bpf::MAX_TCP_PORTS`; the rest are not watched). Needs `CAP_NET_RAW`.
    pub fn open(vxlan_ports: &[u16], geneve_ports: &[u16], tcp_ports: &[u16]) -> io::Result<Self> {
        // Parse what the filter lets through, no more.
        let vxlan_ports = &vxlan_ports[..vxlan_ports.len().min(bpf::MAX_TUNNEL_PORTS)];
        let geneve_ports = &geneve_ports[..geneve_ports.len().min(bpf::MAX_TUNNEL_PORTS)];
        let tcp_ports = &tcp_ports[..tcp_ports.len().min(bpf::MAX_TCP_PORTS)];
        // `ETH_P_ALL`, not `ETH_P_IP`: only such sockets see the packets this host sends (the
        // SYN-ACK that proves it answered); the BPF program keeps IPv4 and IPv6 only.
        let eth_p_all = u16::try_from(libc::ETH_P_ALL).expect("3");
        let proto = Protocol::from(i32::from(eth_p_all.to_be()));
        let sock = Socket::new(Domain::PACKET, Type::DGRAM, Some(proto))?;
        sock.attach_filter(&bpf::to_filter(&bpf::sniffer_program(
            vxlan_ports,
            geneve_ports,
            tcp_ports,
        )))?;
        // Bursts of receipts (one per peer) must not overflow the queue; the kernel caps this at
        // net.core.rmem_max.
        let _ = sock.set_recv_buffer_size(4 << 20);
        sock.set_nonblocking(true)?;
        Ok(Self {
            fd: super::async_fd(sock, tokio::io::Interest::READABLE)?,
            vxlan_ports: vxlan_ports.to_vec(),
            geneve_ports: geneve_ports.to_vec(),
            tcp_ports: tcp_ports.to_vec(),
            names: HashMap::new(),
        })
    }

    /// Waits for the next incoming probe packet.
    pub async fn next(&mut self) -> io::Result<Capture> {
        let mut buf = [0u8; 2048];
        loop {
            let mut guard = self.fd.readable().await?;
            let got = guard.try_io(|s| {
                recvfrom::<LinkAddr>(std::os::fd::AsRawFd::as_raw_fd(s.get_ref()), &mut buf)
                    .map_err(io::Error::from)
            });
            let Ok(res) = got else { continue };
            let (n, addr) = res?;
            let Some(addr) = addr else { continue };
            let pkt = &buf[..n.min(buf.len())];
            let outgoing = addr.pkttype() == PACKET_OUTGOING;
            // Crafted VXLAN probes count only arriving; TCP and UDP probes also by the answer
            // leaving, which tells "the host dropped it" from "its answer was lost".
            let crafted = if outgoing {
                None
            } else {
                parse_captured(pkt, &self.vxlan_ports, &self.geneve_ports)
            };
            let (captured, flow) = match crafted {
                Some(c) => (c, None),
                None => match parse_flow(pkt, outgoing, &self.tcp_ports) {
                    Some(f) => (
                        Captured {
                            nonce: f.nonce,
                            from: f.flow.from,
                            decapsulated: false,
                        },
                        Some(f),
                    ),
                    None => continue,
                },
            };
            let interface = self.name(addr.ifindex());
            return Ok(Capture {
                captured,
                interface,
                flow,
            });
        }
    }

    fn name(&mut self, ifindex: usize) -> String {
        if let Some(n) = self.names.get(&ifindex) {
            return n.clone();
        }
        let name = u32::try_from(ifindex)
            .ok()
            .and_then(|i| nix::net::if_::if_indextoname(i).ok())
            .map_or_else(
                || format!("if{ifindex}"),
                |c| c.to_string_lossy().into_owned(),
            );
        // Interface indexes are reused after deletion; a bounded cache keeps names mostly right
        // without a netlink watch.
        if self.names.len() > 256 {
            self.names.clear();
        }
        self.names.insert(ifindex, name.clone());
        name
    }
}

/// Names of overlay tunnel devices in this namespace: VXLAN and Geneve devices (sysfs `DEVTYPE`),
/// IP-in-IP devices (link type 768, `ARPHRD_TUNNEL`), and Calico's `tunl0` by name (the lab's
/// user-space stand-in for it is a TUN device).
#[must_use]
// sysfs attributes: small kernel-made files, never FIFOs or user paths.
#[allow(clippy::disallowed_methods)]
pub fn vxlan_devices() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/sys/class/net") else {
        return Vec::new();
    };
    let mut out: Vec<String> = dir
        .filter_map(Result::ok)
        .filter(|e| {
            let tunnel_type = std::fs::read_to_string(e.path().join("uevent")).is_ok_and(|u| {
                u.lines()
                    .any(|l| l == "DEVTYPE=vxlan" || l == "DEVTYPE=geneve")
            });
            let ipip =
                std::fs::read_to_string(e.path().join("type")).is_ok_and(|t| t.trim() == "768");
            tunnel_type || ipip || e.file_name() == "tunl0"
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}
