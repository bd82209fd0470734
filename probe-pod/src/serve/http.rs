//! The agent's tiny HTTP side: `/healthz` for readiness, `/seen` (loopback only) for the sniffer.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Sightings;

const MAX_HEAD: usize = 4096;
const READ_HEAD: Duration = Duration::from_secs(5);

pub struct State {
    pub sightings: Arc<Sightings>,
    pub sniffing: Option<String>,
}

#[must_use]
pub fn looks_like_http(first: &[u8]) -> bool {
    first.starts_with(b"GET ") || first.starts_with(b"HEAD ")
}

/// Status and body for a request line's target, seen from `peer`.
#[must_use]
pub fn route(target: &str, peer: SocketAddr, state: &State) -> (u16, String) {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    match path {
        "/healthz" | "/readyz" => (200, "ok\n".into()),
        "/seen" if !peer.ip().is_loopback() => (403, "only the local agent may ask\n".into()),
        "/seen" if state.sniffing.is_none() => {
            (404, "the sniffer is not running on this agent\n".into())
        }
        "/seen" => {
            let since = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("since="))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let list = state.sightings.since(since);
            (
                200,
                serde_json::to_string(&list).unwrap_or_else(|_| "[]".into()),
            )
        }
        _ => (404, "not found\n".into()),
    }
}

pub async fn handle(
    mut stream: TcpStream,
    peer: SocketAddr,
    mut buf: Vec<u8>,
    mut len: usize,
    state: &State,
) -> std::io::Result<()> {
    while !buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
        if len >= MAX_HEAD {
            return Ok(());
        }
        let n = match tokio::time::timeout(READ_HEAD, stream.read(&mut buf[len..MAX_HEAD])).await {
            Ok(Ok(0)) | Err(_) => return Ok(()),
            Ok(r) => r?,
        };
        len += n;
    }
    let head = String::from_utf8_lossy(&buf[..len]);
    let target = head.split(' ').nth(1).unwrap_or("/");
    let (status, body) = route(target, peer, state);
    let reason = match status {
        200 => "OK",
        403 => "Forbidden",
        _ => "Not Found",
    };
    let kind = if body.starts_with('[') {
        "application/json"
    } else {
        "text/plain"
    };
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Sighting;

    #[test]
    fn routes() {
        let state = State {
            sightings: Arc::new(Sightings::default()),
            sniffing: Some("any".into()),
        };
        state.sightings.record(Sighting {
            nonce: 1,
            interface: "eth0".into(),
            from: "10.0.0.1".parse().unwrap(),
            at_ms: 10,
            decapsulated: false,
        });
        state.sightings.record(Sighting {
            nonce: 2,
            interface: "eth0".into(),
            from: "10.0.0.1".parse().unwrap(),
            at_ms: 20,
            decapsulated: true,
        });
        let local: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let remote: SocketAddr = "10.0.0.9:5000".parse().unwrap();
        assert_eq!(route("/healthz", remote, &state).0, 200);
        assert_eq!(route("/seen?since=0", remote, &state).0, 403);
        let (code, body) = route("/seen?since=15", local, &state);
        assert_eq!(code, 200);
        let list: Vec<Sighting> = serde_json::from_str(&body).unwrap();
        assert_eq!(list.iter().map(|s| s.nonce).collect::<Vec<_>>(), [2]);
        assert_eq!(route("/nope", local, &state).0, 404);
        let off = State {
            sightings: Arc::new(Sightings::default()),
            sniffing: None,
        };
        assert_eq!(route("/seen", local, &off).0, 404);
    }
}
