//! `probe-pod serve`: the responders other agents probe (TCP and UDP echo on one port, `/healthz`
//! and `/seen` over HTTP on the same TCP port) and the sniffer that confirms crafted VXLAN receipt.

mod http;
mod sniffer;
mod standin;
mod tcp;
mod udp;

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, UdpSocket};

pub use sniffer::Sightings;

/// Whether to run the VXLAN receipt sniffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SniffMode {
    /// When `CAP_NET_RAW` is held and a VXLAN device exists.
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
    /// Exit by itself after this long, so a crashed coordinator cannot leave agents behind.
    pub ttl: Option<Duration>,
    /// More TCP ports to answer on (echo and HTTP), e.g. to stand in for a kubelet in a lab.
    pub extra_tcp_ports: Vec<u16>,
    /// UDP ports a plain socket takes to record crafted VXLAN probes (the preflight stand-in for
    /// an overlay that does not exist yet).
    pub standin_udp_ports: Vec<u16>,
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
    let addr = SocketAddr::new(config.listen, config.port);
    let tcp = TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Listen {
            proto: "tcp",
            addr,
            source,
        })?;
    let udp = UdpSocket::bind(addr)
        .await
        .map_err(|source| ServeError::Listen {
            proto: "udp",
            addr,
            source,
        })?;
    let mut extra = Vec::new();
    for &port in &config.extra_tcp_ports {
        let addr = SocketAddr::new(config.listen, port);
        extra.push(
            TcpListener::bind(addr)
                .await
                .map_err(|source| ServeError::Listen {
                    proto: "tcp",
                    addr,
                    source,
                })?,
        );
    }
    let standins = standin::bind(config.listen, &config.standin_udp_ports).await?;
    let sightings = Arc::new(Sightings::default());
    standin::start(standins, &sightings);
    let sniffing = sniffer::start(config.sniff, &config.vxlan_ports, sightings.clone())?;
    // The stand-in's sockets answer `/seen` where no sniffer runs (a node that has not joined).
    let sniffing = sniffing.or_else(|| {
        (!config.standin_udp_ports.is_empty())
            .then(|| format!("{} udp {:?}", standin::INTERFACE, config.standin_udp_ports))
    });
    let state = Arc::new(http::State {
        sightings,
        sniffing: sniffing.clone(),
    });
    tracing::info!(%addr, sniffer = %sniffing.as_deref().unwrap_or("off"), "serving");
    let ttl = async {
        match config.ttl {
            Some(t) => tokio::time::sleep(t).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        () = tcp::serve(tcp, state) => unreachable!("the accept loop never ends"),
        () = udp::serve(udp) => unreachable!("the receive loop never ends"),
        () = shutdown => Ok(Stopped::Signal),
        () = ttl => Ok(Stopped::Ttl),
    }
}
