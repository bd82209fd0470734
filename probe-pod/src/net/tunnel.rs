//! The lab's user-space tunnel (`probe-pod tunnel`): a stand-in for Calico's `tunl0` or Cilium's
//! Geneve device on kernels without them. Packets the node routes into a TUN device leave on the
//! underlay as real IP-in-IP (IP protocol 4) or Geneve (UDP 6081) packets to the peer owning the
//! inner destination; arriving ones are decapsulated into the TUN device. So the underlay's and
//! the hosts' firewalls act on the real outer packets, and pod traffic depends on them.

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsRawFd;
use std::sync::Arc;

use nix::sys::socket::SockaddrIn;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::encap::{IPPROTO_IPIP, geneve_inner, geneve_ip};

/// The encapsulation the tunnel speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encap {
    Ipip,
    /// Geneve framing on `port`: 6081, or the `WireGuard` port for the lab's plaintext stand-in
    /// of an encrypted overlay.
    Geneve {
        vni: u32,
        port: u16,
    },
}

/// A peer: the pod network behind it and its underlay address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    pub network: Ipv4Addr,
    pub prefix: u8,
    pub address: Ipv4Addr,
}

impl Peer {
    fn owns(&self, ip: Ipv4Addr) -> bool {
        let mask = u32::MAX
            .checked_shl(32 - u32::from(self.prefix.min(32)))
            .unwrap_or(0);
        u32::from(ip) & mask == u32::from(self.network) & mask
    }
}

/// A `--peer` that is not `NETWORK/PREFIX=ADDRESS`.
#[derive(Debug, thiserror::Error)]
#[error("peer {0:?}: expected NETWORK/PREFIX=ADDRESS, e.g. 10.244.2.0/24=192.168.56.11")]
pub struct BadPeer(pub String);

impl std::str::FromStr for Peer {
    type Err = BadPeer;
    fn from_str(s: &str) -> Result<Self, BadPeer> {
        let bad = || BadPeer(s.to_string());
        let (net, addr) = s.split_once('=').ok_or_else(bad)?;
        let (network, prefix) = net.split_once('/').ok_or_else(bad)?;
        let prefix: u8 = prefix.parse().ok().filter(|p| *p <= 32).ok_or_else(bad)?;
        Ok(Self {
            network: network.parse().map_err(|_| bad())?,
            prefix,
            address: addr.parse().map_err(|_| bad())?,
        })
    }
}

const TUNSETIFF: u64 = 0x4004_54ca;
const IFF_TUN: i16 = 0x0001;
const IFF_NO_PI: i16 = 0x1000;

/// Attaches to (or creates) the TUN device `name`: bare IPv4 packets, no packet-info header.
pub fn open_tun(name: &str) -> io::Result<File> {
    let file = File::options()
        .read(true)
        .write(true)
        .open("/dev/net/tun")?;
    // struct ifreq: the name (16 bytes, NUL-terminated), then the flags (a short).
    let mut ifr = [0u8; 40];
    if name.is_empty() || name.len() > 15 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("device name {name:?}: 1-15 bytes"),
        ));
    }
    ifr[..name.len()].copy_from_slice(name.as_bytes());
    ifr[16..18].copy_from_slice(&(IFF_TUN | IFF_NO_PI).to_ne_bytes());
    // Safety: TUNSETIFF reads and writes one `struct ifreq`, which `ifr` is large enough for
    // (40 bytes on 64-bit Linux); the descriptor is open for the whole call.
    #[allow(unsafe_code, clippy::cast_possible_truncation)]
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), TUNSETIFF as _, ifr.as_mut_ptr()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file)
}

/// The underlay socket: raw IP protocol 4 (the kernel writes the outer header), or UDP bound to
/// the Geneve port.
fn underlay(encap: Encap) -> io::Result<Socket> {
    match encap {
        Encap::Ipip => Socket::new(
            Domain::IPV4,
            Type::RAW,
            Some(Protocol::from(i32::from(IPPROTO_IPIP))),
        ),
        Encap::Geneve { port, .. } => {
            let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
            s.bind(&SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port).into())?;
            Ok(s)
        }
    }
}

/// Runs the tunnel until an I/O error: one thread per direction. Blocking reads are the point
/// here (a forwarding loop, not a probe), so there is no deadline.
pub fn run(device: &str, encap: Encap, peers: Vec<Peer>) -> io::Result<()> {
    let tun = Arc::new(open_tun(device)?);
    let sock = Arc::new(underlay(encap)?);
    let peers = Arc::new(peers);
    let out = {
        let (tun, sock, peers) = (tun.clone(), sock.clone(), peers.clone());
        std::thread::spawn(move || encapsulate(&tun, &sock, encap, &peers))
    };
    let back = decapsulate(&tun, &sock, encap, &peers);
    let out = out
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("encapsulating thread panicked")));
    back.and(out)
}

/// TUN -> underlay: each packet to the peer that owns its destination; others are dropped, as a
/// tunnel device without a route for them would.
fn encapsulate(mut tun: &File, sock: &Socket, encap: Encap, peers: &[Peer]) -> io::Result<()> {
    let mut buf = vec![0u8; 65_536];
    loop {
        let n = tun.read(&mut buf)?;
        let pkt = &buf[..n];
        let Some(dst) = pkt.get(16..20) else { continue };
        let dst = Ipv4Addr::new(dst[0], dst[1], dst[2], dst[3]);
        let Some(peer) = peers.iter().find(|p| p.owns(dst)) else {
            continue;
        };
        let sent = match encap {
            Encap::Ipip => sock.send_to(pkt, &SockAddr::from(SocketAddrV4::new(peer.address, 0))),
            Encap::Geneve { vni, port } => sock.send_to(
                &geneve_ip(vni, pkt),
                &SockAddr::from(SocketAddrV4::new(peer.address, port)),
            ),
        };
        // A full queue or an unreachable peer loses this packet, as a kernel tunnel would.
        if let Err(e) = sent {
            tracing::debug!(error = %e, %dst, "tunnel: not sent");
        }
    }
}

/// Underlay -> TUN: only from known peers, as the kernel's tunnel devices only take packets for
/// their configured endpoints.
fn decapsulate(mut tun: &File, sock: &Socket, encap: Encap, peers: &[Peer]) -> io::Result<()> {
    let mut buf = vec![0u8; 65_536];
    loop {
        let (n, from) = nix::sys::socket::recvfrom::<SockaddrIn>(sock.as_raw_fd(), &mut buf)
            .map_err(io::Error::from)?;
        let pkt = &buf[..n.min(buf.len())];
        let Some(src) = from.map(|a| a.ip()) else {
            continue;
        };
        if !peers.iter().any(|p| p.address == src) {
            continue;
        }
        let inner = match encap {
            // A raw socket hands over the outer IPv4 header too.
            Encap::Ipip => pkt
                .first()
                .and_then(|b| pkt.get(usize::from(b & 0x0f) * 4..)),
            Encap::Geneve { .. } => geneve_inner(pkt),
        };
        let Some(inner) = inner.filter(|i| i.len() >= 20 && i[0] >> 4 == 4) else {
            continue;
        };
        if let Err(e) = tun.write(inner) {
            tracing::debug!(error = %e, "tunnel: not delivered");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_parse_and_own_their_network() {
        let p: Peer = "10.244.2.0/24=192.168.56.11".parse().unwrap();
        assert!(p.owns(Ipv4Addr::new(10, 244, 2, 7)));
        assert!(!p.owns(Ipv4Addr::new(10, 244, 3, 7)));
        assert_eq!(p.address, Ipv4Addr::new(192, 168, 56, 11));
        for bad in [
            "10.244.2.0/24",
            "10.244.2.0/33=1.2.3.4",
            "x/24=1.2.3.4",
            "10.0.0.0/8=y",
        ] {
            assert!(bad.parse::<Peer>().is_err(), "{bad}");
        }
        let all: Peer = "0.0.0.0/0=1.2.3.4".parse().unwrap();
        assert!(all.owns(Ipv4Addr::new(8, 8, 8, 8)));
    }
}
