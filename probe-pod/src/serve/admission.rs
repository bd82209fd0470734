//! Who gets a connection slot: at most `MAX_CONNECTIONS` at once, at most `PER_SOURCE` of them from
//! one address, so one unauthenticated peer cannot take every slot; and a few short "triage" slots
//! for connections over the caps, which may only ask for `/healthz`.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Connections served at once. Each costs a task and a small buffer (a few KiB).
pub const MAX_CONNECTIONS: usize = 4096;
/// Connections one source (an IPv4 address, an IPv6 /64) may hold at once. An agent probes with
/// up to 1,024 probes in flight (the plan's default concurrency), all of which may target this
/// agent: a legitimate burst from one peer fits; one peer never holds more than a quarter of the
/// slots.
pub const PER_SOURCE: usize = 1024;
/// Connections over the caps that are still read briefly, to answer `/healthz`.
pub const TRIAGE_SLOTS: usize = 256;
/// Triage slots one source may hold: sources that keep reconnecting can take at most this many
/// each, so a health check from anywhere else always finds one (8 flooding sources once took
/// all 256, and 8 of 10 health checks were reset).
pub const TRIAGE_PER_SOURCE: usize = 16;
/// Slots only loopback may take: the agent's own checks and a local reader are never locked out
/// by peers, however many.
pub const LOOPBACK_RESERVE: usize = 32;

/// The address as the peer means it: `::ffff:a.b.c.d` is the IPv4 address a.b.c.d.
#[must_use]
pub fn canonical(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

/// The unit a per-source cap counts: an IPv4 address, or an IPv6 /64 (one host usually holds a
/// whole /64, and could otherwise pose as 2^64 sources).
#[must_use]
pub fn source_key(ip: IpAddr) -> IpAddr {
    match canonical(ip) {
        IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & !u128::from(u64::MAX)).into()),
        v4 @ IpAddr::V4(_) => v4,
    }
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    per_source: HashMap<IpAddr, usize>,
}

/// The slot table, shared by every listener of one agent.
#[derive(Debug, Clone)]
pub struct Admission {
    counts: Arc<Mutex<Counts>>,
    max_total: usize,
    max_per_source: usize,
    /// The per-source cap only once the table is half full: a lone source (a flood and its own
    /// health check) keeps the whole table, several flooding sources are held to their share.
    soft: bool,
}

/// A held slot; dropping it frees the slot.
#[derive(Debug)]
pub struct Slot {
    counts: Arc<Mutex<Counts>>,
    source: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut c) = self.counts.lock() {
            c.total = c.total.saturating_sub(1);
            if let Some(n) = c.per_source.get_mut(&self.source) {
                *n -= 1;
                if *n == 0 {
                    c.per_source.remove(&self.source);
                }
            }
        }
    }
}

impl Default for Admission {
    fn default() -> Self {
        Self::new(MAX_CONNECTIONS, PER_SOURCE)
    }
}

impl Admission {
    #[must_use]
    pub fn new(max_total: usize, max_per_source: usize) -> Self {
        Self {
            counts: Arc::default(),
            max_total,
            max_per_source,
            soft: false,
        }
    }

    /// A table whose per-source cap applies only under contention (half full or more).
    #[must_use]
    pub fn soft(max_total: usize, max_per_source: usize) -> Self {
        Self {
            soft: true,
            ..Self::new(max_total, max_per_source)
        }
    }

    /// A slot for a connection from `source`, or `None` when a cap is reached. The last
    /// [`LOOPBACK_RESERVE`] slots (of a table that large) are loopback's alone.
    #[must_use]
    pub fn admit(&self, source: IpAddr) -> Option<Slot> {
        let loopback = canonical(source).is_loopback();
        let source = source_key(source);
        let mut c = self.counts.lock().ok()?;
        let mine = c.per_source.get(&source).copied().unwrap_or(0);
        let reserve = if loopback || self.max_total <= LOOPBACK_RESERVE {
            0
        } else {
            LOOPBACK_RESERVE
        };
        let contended = !self.soft || 2 * c.total >= self.max_total;
        if c.total + reserve >= self.max_total || (contended && mine >= self.max_per_source) {
            return None;
        }
        c.total += 1;
        *c.per_source.entry(source).or_insert(0) += 1;
        Some(Slot {
            counts: self.counts.clone(),
            source,
        })
    }

    /// Connections held by `source` now.
    #[must_use]
    pub fn held_by(&self, source: IpAddr) -> usize {
        self.counts.lock().map_or(0, |c| {
            c.per_source.get(&source_key(source)).copied().unwrap_or(0)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_soft_table_caps_a_source_only_once_half_full() {
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let adm = Admission::soft(8, 2);
        let held: Vec<Slot> = (0..4).map(|_| adm.admit(a).unwrap()).collect();
        assert!(adm.admit(a).is_none(), "half full: the cap applies");
        assert!(adm.admit(b).is_some(), "another source still has its share");
        drop(held);
        assert!(adm.admit(a).is_some());
    }

    #[test]
    fn caps_per_source_and_in_total() {
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let adm = Admission::new(5, 3);
        let held: Vec<Slot> = (0..3).map(|_| adm.admit(a).unwrap()).collect();
        assert!(adm.admit(a).is_none(), "per-source cap");
        assert!(
            adm.admit(mapped).is_none(),
            "the v4-mapped form is the same source"
        );
        let b1 = adm.admit(b).unwrap();
        let _b2 = adm.admit(b).unwrap();
        assert!(adm.admit(b).is_none(), "total cap");
        drop(b1);
        assert!(adm.admit(b).is_some(), "a freed slot is reusable");
        assert_eq!(adm.held_by(mapped), 3);
        drop(held);
        assert_eq!(adm.held_by(a), 0);
        let v6: Vec<IpAddr> = ["fd00::1", "fd00::2:3", "fd00::ffff:1:2:3"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let _held6: Vec<Slot> = v6.iter().filter_map(|ip| adm.admit(*ip)).collect();
        assert!(
            adm.admit("fd00::9".parse().unwrap()).is_none(),
            "one /64 is one source"
        );
        assert!(
            !adm.counts.lock().unwrap().per_source.contains_key(&a),
            "no leak per source"
        );
    }

    #[test]
    fn loopback_keeps_its_reserve_when_peers_take_the_rest() {
        let adm = Admission::new(LOOPBACK_RESERVE + 4, 100);
        let peers: Vec<Slot> = (1..=10u8)
            .filter_map(|i| adm.admit(IpAddr::from([10, 0, 0, i])))
            .collect();
        assert_eq!(peers.len(), 4, "peers stop short of the reserve");
        let local: Vec<Slot> = (0..LOOPBACK_RESERVE)
            .filter_map(|_| adm.admit("127.0.0.1".parse().unwrap()))
            .collect();
        assert_eq!(local.len(), LOOPBACK_RESERVE);
        assert!(adm.admit("::1".parse().unwrap()).is_none(), "then full");
    }
}
