//! Keeps the nonces the packet sniffer saw, for `/seen`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use super::{ServeError, SniffMode};
use crate::net::sniff::{Sniffer, vxlan_devices};
use crate::net::unix_ms;
use crate::proto::Sighting;

/// Bounded memory: the oldest sightings go first.
const CAPACITY: usize = 65_536;

#[derive(Debug, Default)]
pub struct Sightings(Mutex<VecDeque<Sighting>>);

impl Sightings {
    pub fn record(&self, s: Sighting) {
        if let Ok(mut q) = self.0.lock() {
            if q.len() == CAPACITY {
                q.pop_front();
            }
            q.push_back(s);
        }
    }

    #[must_use]
    pub fn since(&self, since_ms: u64) -> Vec<Sighting> {
        self.0
            .lock()
            .map(|q| q.iter().filter(|s| s.at_ms >= since_ms).cloned().collect())
            .unwrap_or_default()
    }
}

/// Starts the sniffer when asked to (or when `Auto` finds a VXLAN device and the capability).
/// Returns a description of what it sniffs, or `None` when it does not run.
pub fn start(
    mode: SniffMode,
    ports: &[u16],
    sightings: Arc<Sightings>,
) -> Result<Option<String>, ServeError> {
    let devices = vxlan_devices();
    if mode == SniffMode::Never || (mode == SniffMode::Auto && devices.is_empty()) {
        return Ok(None);
    }
    let mut sniffer = match Sniffer::open(ports) {
        Ok(s) => s,
        Err(e) if mode == SniffMode::Auto => {
            tracing::warn!(error = %e, "VXLAN device present but no packet socket; sniffer off");
            return Ok(None);
        }
        Err(e) => return Err(ServeError::Sniffer(e)),
    };
    let what = format!(
        "all interfaces, udp {} (vxlan devices: {})",
        ports
            .iter()
            .map(u16::to_string)
            .collect::<Vec<_>>()
            .join(","),
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
