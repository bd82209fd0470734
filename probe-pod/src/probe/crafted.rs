//! What the crafted probes (VXLAN, Geneve, `WireGuard` port, IP-in-IP) share: one send, then a
//! short linger for an ICMP error. "Sent" here; "seen" is the peer sniffer's word.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::time::Instant;

use super::{Fail, udp};
use crate::net::errqueue::Failure;
use crate::net::random_u32;
use crate::proto::{Outcome, ProbeResult};

/// How long to wait for an ICMP error after sending. Silence is the normal case: the peer's
/// kernel tunnel device never answers.
const LINGER: Duration = Duration::from_millis(300);

/// One crafted probe under way: its id, what it sends (for the result's detail), its nonce and
/// when it began.
pub struct Crafted<'a> {
    id: &'a str,
    what: String,
    nonce: u32,
    start: Instant,
}

impl<'a> Crafted<'a> {
    /// Starts the clock; the nonce is the plan's, or a random one. `what` names the probe given
    /// the nonce, e.g. `geneve 10.0.0.2:6081 vni 2 nonce 7`.
    pub fn new(id: &'a str, nonce: Option<u32>, what: impl FnOnce(u32) -> String) -> Self {
        let start = Instant::now();
        let nonce = nonce.unwrap_or_else(random_u32);
        Self {
            id,
            what: what(nonce),
            nonce,
            start,
        }
    }

    #[must_use]
    pub fn nonce(&self) -> u32 {
        self.nonce
    }

    /// The packet left: no round trip, so no rtt.
    #[must_use]
    pub fn sent(&self) -> ProbeResult {
        self.with_nonce(ProbeResult::new(
            self.id,
            Outcome::Ok,
            format!(
                "{}: sent; receipt is confirmed by the peer's sniffer",
                self.what
            ),
        ))
    }

    #[must_use]
    pub fn failed(&self, f: Fail) -> ProbeResult {
        self.with_nonce(f.into_result(self.id, &self.what, self.start.elapsed()))
    }

    fn with_nonce(&self, mut r: ProbeResult) -> ProbeResult {
        r.nonce = Some(self.nonce);
        r
    }

    /// Sends `datagram` to `addr` on a connected UDP socket and lingers (until `deadline` at the
    /// latest) for an ICMP error, which is reported at once; silence is `sent`.
    pub async fn send_udp(
        &self,
        addr: SocketAddr,
        datagram: &[u8],
        deadline: Instant,
    ) -> ProbeResult {
        let sock = match udp::connected(addr) {
            Ok(s) => s,
            Err(f) => return self.failed(f),
        };
        if let Err(e) = sock.send(datagram).await {
            return self.failed(Fail::Net(Failure::with_queue(e.raw_os_error(), &sock)));
        }
        let linger = deadline.min(Instant::now() + LINGER);
        let mut buf = [0u8; 64];
        match udp::recv_matching(&sock, linger, &mut buf, |_| false).await {
            Err(Fail::Timeout) => self.sent(),
            Err(f) => self.failed(f),
            Ok(_) => unreachable!("no datagram matches"),
        }
    }
}
