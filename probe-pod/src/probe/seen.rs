//! Asks the local `probe-pod serve` which probe nonces its sniffer saw: the receiving half of the
//! `vxlan` probe. Only loopback may ask. The answer is read page by page, so a full sightings
//! buffer is read whole, never truncated.

use std::net::{Ipv4Addr, SocketAddr};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use super::{Fail, tcp};
use crate::proto::{Outcome, Port, ProbeResult, Sighting};
use crate::serve::{Page, SIGHTINGS_CAPACITY, SIGHTINGS_PAGE};

/// One page's body: `SIGHTINGS_PAGE` sightings of ~100 bytes each fit several times over.
const MAX_BODY: usize = 4 * 1024 * 1024;
/// Pages read at most: enough for a full sightings buffer (with room for new sightings arriving
/// while it is read), and a bound however the responder behaves.
const MAX_PAGES: usize = SIGHTINGS_CAPACITY / SIGHTINGS_PAGE * 2 + 2;

/// What one page answered: a page, the legacy whole array, or an error message.
enum Answer {
    Page(Page),
    Refused(String),
}

/// One GET of `/seen` on the local agent.
async fn get_page(
    addr: SocketAddr,
    since_ms: u64,
    after: u64,
    deadline: Instant,
) -> Result<Answer, String> {
    let (mut stream, _) = tcp::connect(addr, deadline).await.map_err(|f| match f {
        Fail::Net(n) => n.classify().1,
        Fail::Timeout => "no answer".into(),
        Fail::Local(m) => m,
    })?;
    let request = format!(
        "GET /seen?since={since_ms}&after={after}&limit={SIGHTINGS_PAGE} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut body = Vec::new();
    (&mut stream)
        .take(MAX_BODY as u64 + 1)
        .read_to_end(&mut body)
        .await
        .map_err(|e| e.to_string())?;
    if body.len() > MAX_BODY {
        return Err(format!("an answer larger than {MAX_BODY} bytes"));
    }
    let text = String::from_utf8_lossy(&body);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return Err("malformed answer".into());
    };
    if !head.starts_with("HTTP/1.1 200") {
        let mut reason = body.trim().to_string();
        reason.truncate(200);
        return Ok(Answer::Refused(reason));
    }
    if body.trim_start().starts_with('[') {
        // An older responder: everything in one array.
        let sightings: Vec<Sighting> =
            serde_json::from_str(body).map_err(|e| format!("bad answer: {e}"))?;
        return Ok(Answer::Page(Page {
            next: after,
            more: false,
            sightings,
        }));
    }
    serde_json::from_str(body)
        .map(Answer::Page)
        .map_err(|e| format!("bad answer: {e}"))
}

pub async fn probe(
    id: &str,
    since_ms: u64,
    nonces: Option<&[u32]>,
    port: Port,
    deadline: Instant,
) -> ProbeResult {
    let start = Instant::now();
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port.get()));
    let what = format!("seen: ask the local agent at {addr}");
    // Only the wanted nonces are kept, so memory follows the question, not the buffer.
    let mut seen: Vec<Sighting> = Vec::new();
    let mut after = 0;
    let mut pages = 0;
    let read_all = async {
        loop {
            pages += 1;
            match get_page(addr, since_ms, after, deadline).await? {
                Answer::Refused(reason) => return Err(reason),
                Answer::Page(p) => {
                    let moved = p.next != after;
                    after = p.next;
                    seen.extend(
                        p.sightings
                            .into_iter()
                            .filter(|s| nonces.is_none_or(|w| w.contains(&s.nonce))),
                    );
                    if !p.more {
                        return Ok(());
                    }
                    if !moved || pages >= MAX_PAGES {
                        return Err(format!("the answer did not end after {pages} page(s)"));
                    }
                }
            }
        }
    };
    match tokio::time::timeout_at(deadline, read_all).await {
        Err(_) => return Fail::Timeout.into_result(id, &what, start.elapsed()),
        Ok(Err(e)) if pages <= 1 && seen.is_empty() => {
            // The local agent is not a network path under test: not reaching it is an error.
            let hint = if e.contains("refused") {
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
    r
}
