//! Asks the local `probe-pod serve` which probe nonces its sniffer saw: the receiving half of the
//! `vxlan` probe. Only loopback may ask.

use std::net::{Ipv4Addr, SocketAddr};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use super::{Fail, tcp};
use crate::proto::{Outcome, Port, ProbeResult, Sighting};

const MAX_BODY: usize = 4 * 1024 * 1024;

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
    let (mut stream, _) = match tcp::connect(addr, deadline).await {
        Ok(s) => s,
        Err(f) => {
            // The local agent is not a network path under test: not reaching it is an error.
            let what = format!("{what} (is probe-pod serve running?)");
            let mut r = f.into_result(id, &what, start.elapsed());
            r.outcome = Outcome::Error;
            r.icmp = None;
            return r;
        }
    };
    let request = format!(
        "GET /seen?since={since_ms} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    );
    let exchange = async {
        stream.write_all(request.as_bytes()).await?;
        let mut body = Vec::new();
        (&mut stream)
            .take(MAX_BODY as u64)
            .read_to_end(&mut body)
            .await?;
        Ok::<_, std::io::Error>(body)
    };
    let response = match tokio::time::timeout_at(deadline, exchange).await {
        Err(_) => return Fail::Timeout.into_result(id, &what, start.elapsed()),
        Ok(Err(e)) => return ProbeResult::new(id, Outcome::Error, format!("{what}: {e}")),
        Ok(Ok(b)) => b,
    };
    let text = String::from_utf8_lossy(&response);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return ProbeResult::new(id, Outcome::Error, format!("{what}: malformed answer"));
    };
    if !head.starts_with("HTTP/1.1 200") {
        let reason = body.trim();
        return ProbeResult::new(id, Outcome::Error, format!("{what}: {reason}"));
    }
    let mut seen: Vec<Sighting> = match serde_json::from_str(body) {
        Ok(s) => s,
        Err(e) => return ProbeResult::new(id, Outcome::Error, format!("{what}: bad answer: {e}")),
    };
    if let Some(wanted) = nonces {
        seen.retain(|s| wanted.contains(&s.nonce));
    }
    let mut r = ProbeResult::new(
        id,
        Outcome::Ok,
        format!("{} sighting(s) since {since_ms}", seen.len()),
    );
    r.seen = Some(seen);
    r
}
