//! The preflight stand-in for the overlay port: before a node joins, no VXLAN device owns UDP 8472,
//! so a plain socket takes it and records the nonces of crafted VXLAN probes for `/seen`, as the
//! sniffer would on a member node.

use std::net::{IpAddr, SocketAddr};

use std::sync::Arc;

use tokio::net::UdpSocket;

use super::{ServeError, Sightings};
use crate::net::packet::vxlan_udp_nonce;
use crate::net::unix_ms;
use crate::proto::{Sighting, SightingKind};

/// The name sightings carry, so a report says the stand-in (not a VXLAN device) saw it.
pub const INTERFACE: &str = "standin";

/// Binds every stand-in UDP port now, so a port already taken fails the start (a port conflict).
pub async fn bind(listen: IpAddr, ports: &[u16]) -> Result<Vec<UdpSocket>, ServeError> {
    let mut out = Vec::new();
    for &port in ports {
        let addr = SocketAddr::new(listen, port);
        out.push(
            UdpSocket::bind(addr)
                .await
                .map_err(|source| ServeError::Listen {
                    proto: "udp",
                    addr,
                    source,
                })?,
        );
    }
    Ok(out)
}

/// Records every crafted VXLAN probe each socket receives; never answers.
pub fn start(sockets: Vec<UdpSocket>, sightings: &Arc<Sightings>) {
    for sock in sockets {
        let sightings = sightings.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 2048];
            loop {
                let Ok((n, src)) = sock.recv_from(&mut buf).await else {
                    continue;
                };
                let Some(nonce) = vxlan_udp_nonce(&buf[..n]) else {
                    continue;
                };
                // A socket on `::` hands IPv4 peers over as ::ffff:a.b.c.d.
                let from = src.ip().to_canonical();
                // Received by the socket that will belong to the overlay: as good as decapsulated.
                sightings.record(Sighting {
                    nonce,
                    interface: INTERFACE.into(),
                    from,
                    decapsulated: true,
                    at_ms: unix_ms(),
                    kind: SightingKind::Vxlan,
                    flow: None,
                    reply: false,
                });
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::packet::{VxlanProbe, vxlan_datagram};

    #[tokio::test]
    async fn a_crafted_datagram_is_recorded_and_other_traffic_is_not() {
        let socks = bind("127.0.0.1".parse().unwrap(), &[0]).await.unwrap();
        let addr = socks[0].local_addr().unwrap();
        let sightings = Arc::new(Sightings::default());
        start(socks, &sightings);
        let tx = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        tx.send_to(b"not vxlan", addr).await.unwrap();
        let probe = VxlanProbe {
            vni: 1,
            source_mac: [2, 0, 0, 0, 0, 1],
            destination_mac: [2, 0, 0, 0, 0, 2],
            inner_source: "10.244.1.0".parse().unwrap(),
            inner_destination: "10.244.2.0".parse().unwrap(),
            nonce: 0xfeed_beef,
        };
        tx.send_to(&vxlan_datagram(&probe), addr).await.unwrap();
        for _ in 0..50 {
            if !sightings.since(0).is_empty() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let seen = sightings.since(0);
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert_eq!(seen[0].nonce, 0xfeed_beef);
        assert!(seen[0].decapsulated);
    }
}
