//! Keeps the probe packets the packet sniffer saw (crafted VXLAN nonces, TCP SYNs and SYN-ACKs of
//! the watched ports, plain UDP probes and their echoes), for `/seen`. Bounded: a busy node's
//! SYNs can only push the oldest sightings out, never grow memory.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use super::{ServeError, SniffMode};
use crate::net::sniff::{Sniffer, vxlan_devices};
use crate::net::unix_ms;
use crate::proto::{Sighting, SightingKind};
use serde::{Deserialize, Serialize};

/// Bounded memory: the oldest sightings go first.
pub const CAPACITY: usize = 65_536;
/// Sightings per `/seen` page: about 100 bytes each in JSON, so a page stays well under the
/// reader's body limit however full the buffer is.
pub const PAGE: usize = 4096;

/// The sightings, each numbered in arrival order so a reader can page through them; and the TCP
/// ports the sniffer watches, once it runs.
#[derive(Debug, Default)]
pub struct Sightings(
    Mutex<(u64, VecDeque<(u64, Sighting)>)>,
    std::sync::OnceLock<Vec<u16>>,
);

/// One page of sightings: those numbered after the cursor the reader gave.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page {
    pub sightings: Vec<Sighting>,
    /// The cursor for the next page (the number of the last sighting here).
    pub next: u64,
    /// More sightings follow.
    pub more: bool,
    /// The TCP ports whose SYNs the sniffer records (absent from older agents): a SYN to any
    /// other port is not looked for, so its absence says nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_ports: Option<Vec<u16>>,
}

impl Sightings {
    pub fn record(&self, s: Sighting) {
        if let Ok(mut g) = self.0.lock() {
            let (counter, q) = &mut *g;
            *counter += 1;
            if q.len() == CAPACITY {
                q.pop_front();
            }
            q.push_back((*counter, s));
        }
    }

    /// Up to `limit` sightings seen at or after `since_ms`, numbered after `after`.
    #[must_use]
    pub fn page(&self, since_ms: u64, after: u64, limit: usize) -> Page {
        let Ok(g) = self.0.lock() else {
            return Page {
                sightings: Vec::new(),
                next: after,
                more: false,
                tcp_ports: self.1.get().cloned(),
            };
        };
        let q = &g.1;
        // Numbers rise along the queue: skip straight to the first one after the cursor.
        let start = q.partition_point(|(n, _)| *n <= after);
        let mut matching = q
            .range(start..)
            .filter(|(_, s)| s.at_ms >= since_ms)
            .map(|(n, s)| (*n, s));
        let sightings: Vec<(u64, Sighting)> = matching
            .by_ref()
            .take(limit)
            .map(|(n, s)| (n, s.clone()))
            .collect();
        let more = matching.next().is_some();
        Page {
            next: sightings.last().map_or(after, |(n, _)| *n),
            sightings: sightings.into_iter().map(|(_, s)| s).collect(),
            more,
            tcp_ports: self.1.get().cloned(),
        }
    }

    /// Every sighting at or after `since_ms` (for tests and small buffers).
    #[must_use]
    pub fn since(&self, since_ms: u64) -> Vec<Sighting> {
        self.page(since_ms, 0, CAPACITY).sightings
    }
}

fn joined(ports: &[u16]) -> String {
    ports
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Starts the sniffer when asked to (or, with `Auto`, when it has TCP ports to watch or finds a
/// tunnel device, and holds the capability). Returns a description of what it sniffs, or `None`
/// when it does not run.
pub fn start(
    mode: SniffMode,
    ports: &[u16],
    geneve_ports: &[u16],
    tcp_ports: &[u16],
    sightings: Arc<Sightings>,
) -> Result<Option<String>, ServeError> {
    let devices = vxlan_devices();
    let wanted = !devices.is_empty() || !tcp_ports.is_empty();
    if mode == SniffMode::Never || (mode == SniffMode::Auto && !wanted) {
        return Ok(None);
    }
    let mut sniffer = match Sniffer::open(ports, geneve_ports, tcp_ports) {
        Ok(s) => s,
        Err(e) if mode == SniffMode::Auto && devices.is_empty() => {
            tracing::info!(error = %e, "no packet socket; sniffer off (receipts unknown)");
            return Ok(None);
        }
        Err(e) if mode == SniffMode::Auto => {
            tracing::warn!(error = %e, "tunnel device present but no packet socket; sniffer off");
            return Ok(None);
        }
        Err(e) => return Err(ServeError::Sniffer(e)),
    };
    let watched = &tcp_ports[..tcp_ports.len().min(crate::net::bpf::MAX_TCP_PORTS)];
    let _ = sightings.1.set(watched.to_vec());
    let what = format!(
        "all interfaces, udp {} and probe datagrams, geneve {}, wireguard ports, ip protocol 4, \
         tcp SYNs to {} (tunnel devices: {})",
        joined(ports),
        joined(geneve_ports),
        joined(watched),
        if devices.is_empty() {
            "none yet".to_string()
        } else {
            devices.join(",")
        }
    );
    tokio::spawn(async move {
        loop {
            match sniffer.next().await {
                Ok(c) => sightings.record(Sighting {
                    nonce: c.captured.nonce,
                    interface: c.interface,
                    from: c.captured.from,
                    decapsulated: c.captured.decapsulated,
                    at_ms: unix_ms(),
                    kind: c.flow.map_or(SightingKind::Vxlan, |f| f.kind),
                    flow: c.flow.map(|f| f.flow),
                    reply: c.flow.is_some_and(|f| f.reply),
                }),
                Err(e) => {
                    tracing::error!(error = %e, "sniffer stopped");
                    return;
                }
            }
        }
    });
    Ok(Some(what))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sighting(nonce: u32, at_ms: u64) -> Sighting {
        Sighting {
            nonce,
            interface: "eth0".into(),
            from: "10.0.0.1".parse().unwrap(),
            decapsulated: false,
            at_ms,
            kind: SightingKind::Vxlan,
            flow: None,
            reply: false,
        }
    }

    #[test]
    fn a_full_buffer_reads_whole_page_by_page() {
        let s = Sightings::default();
        for i in 0..u32::try_from(CAPACITY).unwrap() + 10 {
            s.record(sighting(i, 1000));
        }
        let mut after = 0;
        let mut got = Vec::new();
        loop {
            let p = s.page(0, after, PAGE);
            assert!(p.sightings.len() <= PAGE);
            got.extend(p.sightings.iter().map(|x| x.nonce));
            after = p.next;
            if !p.more {
                break;
            }
        }
        assert_eq!(got.len(), CAPACITY, "every kept sighting, once");
        assert_eq!(got.first(), Some(&10), "the oldest ten were dropped");
        assert!(got.windows(2).all(|w| w[0] + 1 == w[1]));
    }

    #[test]
    fn since_filters_and_cursor_moves() {
        let s = Sightings::default();
        s.record(sighting(1, 10));
        s.record(sighting(2, 20));
        s.record(sighting(3, 30));
        let p = s.page(15, 0, 1);
        assert_eq!((p.sightings[0].nonce, p.more), (2, true));
        let p = s.page(15, p.next, 1);
        assert_eq!((p.sightings[0].nonce, p.more), (3, false));
        let p = s.page(15, p.next, 1);
        assert!(p.sightings.is_empty() && !p.more);
    }
}
