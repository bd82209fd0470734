//! `probe-pod serve`: the responders other agents probe (TCP and UDP echo on one port, `/healthz`
//! and `/seen` over HTTP on the same TCP port) and the sniffer that confirms crafted VXLAN receipt.

pub mod admission;
pub mod http;
mod sniffer;
mod standin;
mod tcp;
pub mod udp;

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, UdpSocket};

pub use sniffer::{CAPACITY as SIGHTINGS_CAPACITY, PAGE as SIGHTINGS_PAGE, Page, Sightings};

/// The TCP listen backlog. Every agent of a matrix starts probing at once, each with up to 1,024
/// probes in flight, and several may aim at this agent in the same round trip: connections that
/// completed their handshake wait here until the accept loop takes them, and a full queue turns
/// into silently dropped SYNs — false timeouts. 4,096 is also Linux's default
/// `net.core.somaxconn` (since 5.4), which caps whatever is asked for.
pub const LISTEN_BACKLOG: i32 = 4096;

/// The UDP echo socket, with a receive buffer for a matrix's burst: every peer's UDP probes may
/// arrive in the same millisecond, and a datagram that finds the buffer full is a false timeout.
fn udp_socket(addr: SocketAddr) -> std::io::Result<UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let sock = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        sock.set_only_v6(false)?;
    }
    // The kernel caps this at net.core.rmem_max; asking is free.
    let _ = sock.set_recv_buffer_size(4 << 20);
    sock.bind(&addr.into())?;
    sock.set_nonblocking(true)?;
    UdpSocket::from_std(sock.into())
}

/// A TCP listener with `LISTEN_BACKLOG` (tokio's own bind asks for 1,024).
fn tcp_listener(addr: SocketAddr) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    sock.set_reuse_address(true)?;
    if addr.is_ipv6() {
        // `--listen ::` serves IPv4 peers too (as ::ffff:a.b.c.d), as the std listener did.
        sock.set_only_v6(false)?;
    }
    sock.bind(&addr.into())?;
    sock.listen(LISTEN_BACKLOG)?;
    sock.set_nonblocking(true)?;
    TcpListener::from_std(sock.into())
}

/// Where to listen: `::` serves both families, but a kernel without IPv6 (booted with
/// `ipv6.disable=1`) has no IPv6 sockets at all, and there the agent serves IPv4 rather than fail.
fn listen_address(listen: IpAddr) -> IpAddr {
    use socket2::{Domain, Socket, Type};
    let no_ipv6 = || {
        matches!(Socket::new(Domain::IPV6, Type::DGRAM, None),
            Err(e) if e.raw_os_error() == Some(libc::EAFNOSUPPORT))
    };
    if listen == IpAddr::V6(Ipv6Addr::UNSPECIFIED) && no_ipv6() {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    } else {
        listen
    }
}

/// Whether to run the VXLAN receipt sniffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SniffMode {
    /// When `CAP_NET_RAW` is held, and a VXLAN device exists or TCP ports are to be watched.
    Auto,
    Always,
    Never,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub listen: IpAddr,
    pub port: u16,
    pub sniff: SniffMode,
    pub vxlan_ports: Vec<u16>,
    /// Geneve UDP ports the sniffer watches for crafted Geneve probes.
    pub geneve_ports: Vec<u16>,
    /// Exit by itself after this long, so a crashed coordinator cannot leave agents behind.
    pub ttl: Option<Duration>,
    /// More TCP ports to answer on (echo and HTTP), e.g. to stand in for a kubelet in a lab.
    pub extra_tcp_ports: Vec<u16>,
    /// UDP ports a plain socket takes to record crafted VXLAN probes (the preflight stand-in for
    /// an overlay that does not exist yet).
    pub standin_udp_ports: Vec<u16>,
    /// TCP ports whose arriving SYNs (and the SYN-ACKs answering them) the sniffer records, so a
    /// failed TCP probe says whether it reached this host; the agent's own ports are added.
    pub receipt_tcp_ports: Vec<u16>,
}

impl Config {
    /// The TCP ports the sniffer watches: the configured ones and every port this agent serves.
    fn watched_tcp_ports(&self) -> Vec<u16> {
        let mut v: Vec<u16> = std::iter::once(self.port)
            .chain(self.extra_tcp_ports.iter().copied())
            .chain(self.receipt_tcp_ports.iter().copied())
            .filter(|&p| p != 0)
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {proto} {addr}: {source}")]
    Listen {
        proto: &'static str,
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot start the sniffer: {0} (it needs CAP_NET_RAW; run without --sniff to skip it)")]
    Sniffer(std::io::Error),
}

impl ServeError {
    /// The typed line a port held by another process becomes (the coordinator reads it on the
    /// agent's standard output); `None` for any other failure.
    #[must_use]
    pub fn event(&self) -> Option<crate::proto::ServeEvent> {
        let Self::Listen {
            proto,
            addr,
            source,
        } = self
        else {
            return None;
        };
        let protocol = match *proto {
            "tcp" => crate::proto::Transport::Tcp,
            "udp" => crate::proto::Transport::Udp,
            _ => return None,
        };
        (source.kind() == std::io::ErrorKind::AddrInUse).then_some(
            crate::proto::ServeEvent::PortInUse {
                protocol,
                port: addr.port(),
            },
        )
    }
}

/// Why `run` returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    Signal,
    Ttl,
}

/// Serves until `shutdown` resolves or the TTL expires.
pub async fn run(
    config: Config,
    shutdown: impl Future<Output = ()>,
) -> Result<Stopped, ServeError> {
    let listen = listen_address(config.listen);
    let addr = SocketAddr::new(listen, config.port);
    let tcp = tcp_listener(addr).map_err(|source| ServeError::Listen {
        proto: "tcp",
        addr,
        source,
    })?;
    let udp = udp_socket(addr).map_err(|source| ServeError::Listen {
        proto: "udp",
        addr,
        source,
    })?;
    let mut extra = Vec::new();
    for &port in &config.extra_tcp_ports {
        let addr = SocketAddr::new(listen, port);
        extra.push(tcp_listener(addr).map_err(|source| ServeError::Listen {
            proto: "tcp",
            addr,
            source,
        })?);
    }
    let standins = standin::bind(listen, &config.standin_udp_ports).await?;
    let sightings = Arc::new(Sightings::default());
    standin::start(standins, &sightings);
    let sniffing = sniffer::start(
        config.sniff,
        &config.vxlan_ports,
        &config.geneve_ports,
        &config.watched_tcp_ports(),
        sightings.clone(),
    )?;
    // The stand-in's sockets answer `/seen` where no sniffer runs (a node that has not joined).
    let sniffing = sniffing.or_else(|| {
        (!config.standin_udp_ports.is_empty())
            .then(|| format!("{} udp {:?}", standin::INTERFACE, config.standin_udp_ports))
    });
    let state = Arc::new(http::State::new(sightings, sniffing.clone()));
    // One slot table for every TCP port of this agent: the caps are per agent, not per port.
    let admission = admission::Admission::default();
    for listener in extra {
        tokio::spawn(tcp::serve(listener, state.clone(), admission.clone()));
    }
    tracing::info!(%addr, sniffer = %sniffing.as_deref().unwrap_or("off"), "serving");
    let ttl = async {
        match config.ttl {
            Some(t) => tokio::time::sleep(t).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        () = tcp::serve(tcp, state, admission) => unreachable!("the accept loop never ends"),
        () = udp::serve(udp) => unreachable!("the receive loop never ends"),
        () = shutdown => Ok(Stopped::Signal),
        () = ttl => Ok(Stopped::Ttl),
    }
}
