//! Asks the local `probe-pod serve` which probe nonces its sniffer saw: the receiving half of the
//! `vxlan` probe. Only loopback may ask. The answer is read page by page, so a full sightings
//! buffer is read whole, never truncated.

use std::net::{Ipv4Addr, SocketAddr};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use super::{Fail, tcp};
use crate::proto::{Flow, Outcome, Port, ProbeResult, Sighting, SightingKind, http1};
use crate::serve::{Page, SIGHTINGS_CAPACITY, SIGHTINGS_PAGE};

/// One page's body: `SIGHTINGS_PAGE` sightings of ~100 bytes each fit several times over.
const MAX_BODY: usize = 4 * 1024 * 1024;
/// Pages read at most: enough for a full sightings buffer (with room for new sightings arriving
/// while it is read), and a bound however the responder behaves.
const MAX_PAGES: usize = SIGHTINGS_CAPACITY / SIGHTINGS_PAGE * 2 + 2;

/// Sightings kept per asked nonce or flow: a probe's packet may be seen on a few interfaces, and
/// a SYN retransmitted, but the answer stays bounded by the question, however busy the node.
const PER_KEY: usize = 4;

/// What the coordinator asks about: nonces (crafted VXLAN and UDP probes) and flows (TCP SYNs).
/// Neither given: every sighting.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ask<'a> {
    pub nonces: Option<&'a [u32]>,
    pub flows: Option<&'a [Flow]>,
}

impl Ask<'_> {
    /// The key a sighting is kept under when it answers the question.
    fn key(&self, s: &Sighting) -> Option<(SightingKind, u32, Option<Flow>)> {
        if self.nonces.is_none() && self.flows.is_none() {
            return Some((s.kind, s.nonce, s.flow));
        }
        match s.kind {
            SightingKind::Tcp => {
                let f = s.flow?;
                self.flows?.contains(&f).then_some((s.kind, 0, Some(f)))
            }
            SightingKind::Vxlan | SightingKind::Udp => self
                .nonces?
                .contains(&s.nonce)
                .then_some((s.kind, s.nonce, None)),
        }
    }
}

/// What one page answered: a page, the legacy whole array, or an error message.
enum Answer {
    Page(Page),
    Refused(String),
}

/// Why the local agent's `/seen` could not be read; the probe's detail names the agent.
#[derive(Debug, thiserror::Error)]
enum SeenError {
    /// Connecting failed, in the words the probes use (`connection refused`, ...).
    #[error("{0}")]
    Connect(String),
    #[error("no answer")]
    NoAnswer,
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("an answer larger than {MAX_BODY} bytes")]
    TooLarge,
    #[error("malformed answer")]
    Malformed,
    #[error("bad answer: {0}")]
    Bad(#[from] serde_json::Error),
    /// The agent answered with an error status; its reason, at most 200 bytes.
    #[error("{0}")]
    Refused(String),
    #[error("the answer did not end after {0} page(s)")]
    Endless(usize),
}

/// One GET of `/seen` on the local agent.
async fn get_page(
    addr: SocketAddr,
    since_ms: u64,
    after: u64,
    deadline: Instant,
) -> Result<Answer, SeenError> {
    let (mut stream, _) = tcp::connect(addr, deadline).await.map_err(|f| match f {
        Fail::Net(n) => SeenError::Connect(n.classify().1),
        Fail::Timeout => SeenError::NoAnswer,
        Fail::Local(m) => SeenError::Connect(m),
    })?;
    let request = http1::request(
        "GET",
        &format!("/seen?since={since_ms}&after={after}&limit={SIGHTINGS_PAGE}"),
        &[("Host", "localhost"), ("Connection", "close")],
    )
    .map_err(|_| SeenError::Malformed)?;
    stream.write_all(&request).await?;
    let mut body = Vec::new();
    (&mut stream)
        .take(MAX_BODY as u64 + 1)
        .read_to_end(&mut body)
        .await?;
    if body.len() > MAX_BODY {
        return Err(SeenError::TooLarge);
    }
    let Some((head, body)) = http1::split(&body) else {
        return Err(SeenError::Malformed);
    };
    let body = String::from_utf8_lossy(body);
    let body = body.as_ref();
    if http1::status(head) != Some(200) {
        let mut reason = body.trim().to_string();
        probe_proto::util::truncate_at_char(&mut reason, 200);
        return Ok(Answer::Refused(reason));
    }
    if body.trim_start().starts_with('[') {
        // An older responder: everything in one array.
        let sightings: Vec<Sighting> = serde_json::from_str(body)?;
        return Ok(Answer::Page(Page {
            next: after,
            more: false,
            sightings,
            tcp_ports: None,
        }));
    }
    Ok(Answer::Page(serde_json::from_str(body)?))
}

pub async fn probe(
    id: &str,
    since_ms: u64,
    ask: Ask<'_>,
    port: Port,
    deadline: Instant,
) -> ProbeResult {
    let start = Instant::now();
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port.get()));
    let what = format!("seen: ask the local agent at {addr}");
    // Only the wanted nonces are kept, so memory follows the question, not the buffer.
    let mut seen: Vec<Sighting> = Vec::new();
    let mut per_key: std::collections::HashMap<_, usize> = std::collections::HashMap::new();
    let mut watched: Option<Vec<u16>> = None;
    let mut after = 0;
    let mut pages = 0;
    let read_all = async {
        loop {
            pages += 1;
            match get_page(addr, since_ms, after, deadline).await? {
                Answer::Refused(reason) => return Err(SeenError::Refused(reason)),
                Answer::Page(p) => {
                    let moved = p.next != after;
                    after = p.next;
                    watched = p.tcp_ports.or(watched.take());
                    for s in p.sightings {
                        let Some(key) = ask.key(&s) else { continue };
                        let n = per_key.entry((key, s.decapsulated, s.reply)).or_insert(0);
                        if *n < PER_KEY {
                            *n += 1;
                            seen.push(s);
                        }
                    }
                    if !p.more {
                        return Ok(());
                    }
                    if !moved || pages >= MAX_PAGES {
                        return Err(SeenError::Endless(pages));
                    }
                }
            }
        }
    };
    match tokio::time::timeout_at(deadline, read_all).await {
        Err(_) => return Fail::Timeout.into_result(id, &what, start.elapsed()),
        Ok(Err(e)) if pages <= 1 && seen.is_empty() => {
            // The local agent is not a network path under test: not reaching it is an error.
            let hint = if matches!(&e, SeenError::Connect(m) if m.contains("refused")) {
                " (is probe-pod serve running?)"
            } else {
                ""
            };
            return ProbeResult::new(id, Outcome::Error, format!("{what}{hint}: {e}"));
        }
        Ok(Err(e)) => {
            return ProbeResult::new(id, Outcome::Error, format!("{what}: page {pages}: {e}"));
        }
        Ok(Ok(())) => {}
    }
    let mut r = ProbeResult::new(
        id,
        Outcome::Ok,
        format!(
            "{} sighting(s) since {since_ms} ({pages} page(s))",
            seen.len()
        ),
    );
    r.seen = Some(seen);
    r.watched_tcp_ports = watched;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sighting(kind: SightingKind, nonce: u32, flow: Option<Flow>) -> Sighting {
        Sighting {
            nonce,
            interface: "eth0".into(),
            from: "10.0.0.1".parse().unwrap(),
            decapsulated: false,
            at_ms: 1,
            kind,
            flow,
            reply: false,
        }
    }

    #[test]
    fn only_what_was_asked_answers() {
        let f = Flow {
            from: "10.0.0.1".parse().unwrap(),
            source_port: 40000,
            port: 10250,
        };
        let other = Flow {
            source_port: 40001,
            ..f
        };
        let ask = Ask {
            nonces: Some(&[7]),
            flows: Some(&[f]),
        };
        assert!(ask.key(&sighting(SightingKind::Vxlan, 7, None)).is_some());
        assert!(ask.key(&sighting(SightingKind::Udp, 7, None)).is_some());
        assert!(ask.key(&sighting(SightingKind::Udp, 8, None)).is_none());
        assert!(ask.key(&sighting(SightingKind::Tcp, 0, Some(f))).is_some());
        assert!(
            ask.key(&sighting(SightingKind::Tcp, 0, Some(other)))
                .is_none()
        );
        // A TCP sighting's nonce (0) never answers a nonce question.
        let zero = Ask {
            nonces: Some(&[0]),
            flows: None,
        };
        assert!(zero.key(&sighting(SightingKind::Tcp, 0, Some(f))).is_none());
        assert!(
            Ask::default()
                .key(&sighting(SightingKind::Tcp, 0, Some(f)))
                .is_some()
        );
    }
}
