//! UDP echo: only well-formed probe datagrams, never a larger reply, rate-limited per source and in
//! total so the agent cannot be used as a reflector (spoofed sources each within their own budget
//! still meet the aggregate one).

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Instant;

use tokio::net::UdpSocket;

use crate::net::packet::payload_nonce;

/// Largest datagram echoed: one Ethernet MTU.
const MAX_DATAGRAM: usize = 1500;
const RATE_PER_SEC: f64 = 200.0;
const BURST: f64 = 400.0;
/// Sources tracked at once; beyond it the table starts over (a flood of spoofed sources resets
/// buckets rather than growing memory).
const MAX_SOURCES: usize = 16_384;
/// Replies per second from the whole agent, whatever the sources: at most ~7.5 MB/s of echo even
/// at full-size datagrams, far above what a matrix sends one agent (one datagram per peer and
/// probe) and far below a link's capacity.
const TOTAL_PER_SEC: f64 = 5000.0;
const TOTAL_BURST: f64 = 10_000.0;

/// One token bucket.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

impl Bucket {
    fn full(burst: f64, now: Instant) -> Self {
        Self {
            tokens: burst,
            last: now,
        }
    }

    fn refill(&mut self, now: Instant, rate: f64, burst: f64) {
        let refill = now.saturating_duration_since(self.last).as_secs_f64() * rate;
        self.tokens = (self.tokens + refill).min(burst);
        self.last = now;
    }
}

/// Token buckets per source address, and one for the agent as a whole.
#[derive(Debug)]
pub struct RateLimiter {
    buckets: HashMap<IpAddr, Bucket>,
    total: Bucket,
}

impl Default for RateLimiter {
    fn default() -> Self {
        Self {
            buckets: HashMap::new(),
            total: Bucket::full(TOTAL_BURST, Instant::now()),
        }
    }
}

impl RateLimiter {
    pub fn allow(&mut self, src: IpAddr, now: Instant) -> bool {
        let src = super::admission::source_key(src);
        if self.buckets.len() >= MAX_SOURCES && !self.buckets.contains_key(&src) {
            self.buckets.clear();
        }
        self.total.refill(now, TOTAL_PER_SEC, TOTAL_BURST);
        let mine = self
            .buckets
            .entry(src)
            .or_insert_with(|| Bucket::full(BURST, now));
        mine.refill(now, RATE_PER_SEC, BURST);
        if mine.tokens >= 1.0 && self.total.tokens >= 1.0 {
            mine.tokens -= 1.0;
            self.total.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The reply to a datagram, if it deserves one: the same bytes, never more.
#[must_use]
pub fn reply(datagram: &[u8]) -> Option<&[u8]> {
    (datagram.len() <= MAX_DATAGRAM && payload_nonce(datagram).is_some()).then_some(datagram)
}

pub async fn serve(sock: UdpSocket) {
    let mut limiter = RateLimiter::default();
    let mut buf = vec![0u8; MAX_DATAGRAM + 1];
    loop {
        let Ok((n, src)) = sock.recv_from(&mut buf).await else {
            continue;
        };
        let Some(answer) = reply(&buf[..n]) else {
            continue;
        };
        if limiter.allow(src.ip(), Instant::now()) {
            let _ = sock.send_to(answer, src).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::packet::probe_payload;
    use std::time::Duration;

    #[test]
    fn only_probe_datagrams_are_echoed() {
        let p = probe_payload(1, 16);
        assert_eq!(reply(&p), Some(&p[..]));
        assert_eq!(reply(b"GET / HTTP/1.1\r\n"), None);
        assert_eq!(reply(&probe_payload(1, MAX_DATAGRAM + 1)), None);
    }

    #[test]
    fn rate_limit_per_source() {
        let mut rl = RateLimiter::default();
        let t0 = Instant::now();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let burst = BURST as usize;
        assert_eq!((0..burst * 2).filter(|_| rl.allow(a, t0)).count(), burst);
        assert!(rl.allow(b, t0), "another source has its own bucket");
        assert!(!rl.allow(a, t0));
        assert!(
            rl.allow(a, t0 + Duration::from_millis(10)),
            "refills over time"
        );
    }

    #[test]
    fn rate_limit_in_total() {
        let mut rl = RateLimiter::default();
        let t0 = Instant::now();
        // Spoofed sources, each well within its own budget.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let total = TOTAL_BURST as usize;
        let allowed = (0..total * 2)
            .filter(|&i| {
                let src = IpAddr::from(std::net::Ipv4Addr::from(
                    0x0a00_0000 + u32::try_from(i).unwrap(),
                ));
                rl.allow(src, t0)
            })
            .count();
        assert_eq!(allowed, total, "the aggregate budget holds across sources");
        assert!(
            rl.allow("10.9.9.9".parse().unwrap(), t0 + Duration::from_millis(10)),
            "and refills"
        );
    }
}
