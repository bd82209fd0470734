//! The agent's tiny HTTP side: `/healthz` for readiness (answered before anything else), and
//! `/seen` (loopback only, however loopback is written) for the sniffer, paged so any number of
//! sightings can be read whole.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Sightings;
use super::admission::canonical;
use super::sniffer::PAGE;
use crate::proto::http1;

/// The largest request head read.
pub const MAX_HEAD: usize = 4096;

pub struct State {
    pub sightings: Arc<Sightings>,
    pub sniffing: Option<String>,
}

impl State {
    #[must_use]
    pub fn new(sightings: Arc<Sightings>, sniffing: Option<String>) -> Self {
        Self {
            sightings,
            sniffing,
        }
    }
}

#[must_use]
pub fn looks_like_http(first: &[u8]) -> bool {
    first.starts_with(b"GET ") || first.starts_with(b"HEAD ")
}

/// Whether `head` holds a complete request head.
#[must_use]
pub fn complete(head: &[u8]) -> bool {
    http1::head_end(head).is_some()
}

/// The query parameter `key` as a number.
fn number(query: &str, key: &str) -> Option<u64> {
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
}

/// Status and body for a request line's target, seen from `peer`.
#[must_use]
pub fn route(target: &str, peer: SocketAddr, state: &State) -> (u16, String) {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    match path {
        "/healthz" | "/readyz" => (200, "ok\n".into()),
        // `--listen ::` hands IPv4 peers over as ::ffff:a.b.c.d: the local agent is still local.
        "/seen" if !canonical(peer.ip()).is_loopback() => {
            (403, "only the local agent may ask\n".into())
        }
        "/seen" if state.sniffing.is_none() => {
            (404, "the sniffer is not running on this agent\n".into())
        }
        "/seen" => {
            let since = number(query, "since").unwrap_or(0);
            let after = number(query, "after").unwrap_or(0);
            let limit = number(query, "limit")
                .and_then(|l| usize::try_from(l).ok())
                .unwrap_or(PAGE)
                .clamp(1, PAGE);
            let page = state.sightings.page(since, after, limit);
            (
                200,
                serde_json::to_string(&page).unwrap_or_else(|_| "{}".into()),
            )
        }
        _ => (404, "not found\n".into()),
    }
}

/// Status and body for a complete request head (anything else is a 400).
#[must_use]
pub fn answer(head: &[u8], peer: SocketAddr, state: &State) -> (u16, String) {
    match http1::request_line(head) {
        Some(line) if matches!(line.method, "GET" | "HEAD") => route(line.target, peer, state),
        _ => (400, "bad request\n".into()),
    }
}

/// Writes the response to a request head and closes.
pub async fn respond(
    stream: &mut TcpStream,
    head: &[u8],
    peer: SocketAddr,
    state: &State,
) -> std::io::Result<()> {
    let (status, body) = answer(head, peer, state);
    let kind = if body.starts_with('{') {
        "application/json"
    } else {
        "text/plain"
    };
    let mut response = http1::response(
        status,
        &[
            ("Content-Type", kind),
            ("Content-Length", &body.len().to_string()),
            ("Connection", "close"),
        ],
    )
    .map_err(std::io::Error::other)?;
    response.extend_from_slice(body.as_bytes());
    stream.write_all(&response).await?;
    stream.shutdown().await
}

/// Reads the rest of a request head (the caller already read `len` bytes into `buf`) and answers.
/// The caller bounds the whole connection in time.
pub async fn handle(
    mut stream: TcpStream,
    peer: SocketAddr,
    mut buf: Vec<u8>,
    mut len: usize,
    state: &State,
) -> std::io::Result<()> {
    buf.resize(MAX_HEAD, 0);
    while !complete(&buf[..len]) {
        if len >= MAX_HEAD {
            return Ok(());
        }
        let n = stream.read(&mut buf[len..MAX_HEAD]).await?;
        if n == 0 {
            return Ok(());
        }
        len += n;
    }
    respond(&mut stream, &buf[..len], peer, state).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Sighting;
    use crate::serve::sniffer::Page;

    fn state() -> State {
        let state = State::new(Arc::new(Sightings::default()), Some("any".into()));
        for (nonce, at_ms) in [(1, 10), (2, 20)] {
            state.sightings.record(Sighting {
                nonce,
                interface: "eth0".into(),
                from: "10.0.0.1".parse().unwrap(),
                at_ms,
                decapsulated: nonce == 2,
                kind: crate::proto::SightingKind::Vxlan,
                flow: None,
                reply: false,
            });
        }
        state
    }

    #[test]
    fn routes() {
        let state = state();
        let local: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let remote: SocketAddr = "10.0.0.9:5000".parse().unwrap();
        assert_eq!(route("/healthz", remote, &state).0, 200);
        assert_eq!(route("/seen?since=0", remote, &state).0, 403);
        let (code, body) = route("/seen?since=15", local, &state);
        assert_eq!(code, 200);
        let page: Page = serde_json::from_str(&body).unwrap();
        assert_eq!(
            page.sightings.iter().map(|s| s.nonce).collect::<Vec<_>>(),
            [2]
        );
        assert_eq!(route("/nope", local, &state).0, 404);
        let off = State::new(Arc::new(Sightings::default()), None);
        assert_eq!(route("/seen", local, &off).0, 404);
    }

    #[test]
    fn loopback_however_written() {
        let state = state();
        for peer in [
            "[::ffff:127.0.0.1]:5000",
            "[::1]:5000",
            "127.0.0.1:5000",
            "127.9.9.9:1",
        ] {
            let peer: SocketAddr = peer.parse().unwrap();
            assert_eq!(route("/seen", peer, &state).0, 200, "{peer}");
        }
        for peer in [
            "[::ffff:10.0.0.1]:5000",
            "[fe80::1]:5000",
            "[::ffff:0.0.0.0]:1",
        ] {
            let peer: SocketAddr = peer.parse().unwrap();
            assert_eq!(route("/seen", peer, &state).0, 403, "{peer}");
        }
    }

    #[test]
    fn pages_follow_the_cursor() {
        let state = state();
        let local: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let (_, body) = route("/seen?since=0&limit=1", local, &state);
        let p: Page = serde_json::from_str(&body).unwrap();
        assert!(p.more && p.sightings.len() == 1);
        let (_, body) = route(
            &format!("/seen?since=0&after={}&limit=1", p.next),
            local,
            &state,
        );
        let p: Page = serde_json::from_str(&body).unwrap();
        assert!(!p.more && p.sightings[0].nonce == 2);
    }

    #[test]
    fn malformed_requests_are_400() {
        let state = state();
        let peer: SocketAddr = "10.0.0.9:1".parse().unwrap();
        for head in [
            &b"GET\r\n\r\n"[..],
            b"POST /healthz HTTP/1.1\r\n\r\n",
            b"GET /healthz\r\n\r\n",
            b"\xff\xfe /x HTTP/1.1\r\n\r\n",
            b"GET / x HTTP/1.1\r\n\r\n",
        ] {
            assert_eq!(answer(head, peer, &state).0, 400, "{head:?}");
        }
        assert_eq!(
            answer(b"GET /healthz HTTP/1.1\r\n\r\n", peer, &state).0,
            200
        );
    }
}
