//! TCP on the agent port: echo (bounded in bytes), or HTTP when the first bytes are a GET — one
//! port for both, so a firewall rule that opens the agent opens its health check. Every
//! connection has one deadline for its whole life (not per read, which a peer sending a byte
//! every few seconds could stretch forever), and takes a slot from `Admission`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::admission::{Admission, Slot, TRIAGE_PER_SOURCE, TRIAGE_SLOTS};
use super::http;

/// Echo at most this much per connection, then close.
const ECHO_LIMIT: usize = 64 * 1024;
/// A whole connection's life: an echo probe needs one round trip, a health check one request.
pub const CONNECTION_DEADLINE: Duration = Duration::from_secs(5);
/// How long a connection over the caps may take to show it is a health check.
pub const TRIAGE_DEADLINE: Duration = Duration::from_millis(300);

pub async fn serve(listener: TcpListener, state: Arc<http::State>, admission: Admission) {
    // Per source too: peers that reconnect as fast as they are closed cannot hold them all.
    // Soft: a lone flooding source keeps room for its own health check.
    let triage = Admission::soft(TRIAGE_SLOTS, TRIAGE_PER_SOURCE);
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            // EMFILE and friends: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let state = state.clone();
        if let Some(slot) = admission.admit(peer.ip()) {
            tokio::spawn(async move {
                let _ =
                    tokio::time::timeout(CONNECTION_DEADLINE, handle(stream, peer, &state)).await;
                drop(slot);
            });
        } else if let Some(permit) = triage_slot(&triage, peer.ip()).await {
            // Over a cap: still answer /healthz, so a flood from one peer cannot make the agent
            // look dead to its readiness probe; anything else is closed.
            tokio::spawn(async move {
                let _ =
                    tokio::time::timeout(TRIAGE_DEADLINE, health_only(stream, peer, &state)).await;
                drop(permit);
            });
        }
        // Otherwise the stream drops here: closed at once.
    }
}

/// Times the accept loop lets the runtime run before it gives up on a triage slot.
const TRIAGE_YIELDS: usize = 4;

/// A triage slot for `ip`, letting the tasks already spawned run first when none is free: behind
/// a backlog of flood connections the slots are held by tasks that free them at their first read,
/// and the accept loop, which outpaces them on a busy machine, must not drop a health check
/// queued behind them for want of a poll. A yield costs microseconds, so a flood that holds its
/// slots for real still has its connections closed at once.
async fn triage_slot(triage: &Admission, ip: std::net::IpAddr) -> Option<Slot> {
    for _ in 0..TRIAGE_YIELDS {
        if let Some(slot) = triage.admit(ip) {
            return Some(slot);
        }
        tokio::task::yield_now().await;
    }
    triage.admit(ip)
}

/// Whether `got` can still become a health check request.
fn may_be_health_check(got: &[u8]) -> bool {
    [&b"GET /healthz"[..], b"GET /readyz"].iter().any(|want| {
        let n = got.len().min(want.len());
        got[..n] == want[..n]
    })
}

/// Reads one request head; answers it only if it asks for `/healthz` or `/readyz`. Anything else
/// is closed as soon as its first bytes show it is not one, so a flood that sends bytes frees its
/// triage slots at once.
async fn health_only(
    mut stream: TcpStream,
    peer: SocketAddr,
    state: &http::State,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; http::MAX_HEAD];
    let mut len = 0;
    while !http::complete(&buf[..len]) && len < http::MAX_HEAD {
        let n = stream.read(&mut buf[len..]).await?;
        if n == 0 {
            return Ok(());
        }
        len += n;
        if !may_be_health_check(&buf[..len]) {
            return Ok(());
        }
    }
    let head = &buf[..len];
    if head.starts_with(b"GET /healthz") || head.starts_with(b"GET /readyz") {
        return http::respond(&mut stream, head, peer, state).await;
    }
    Ok(())
}

async fn handle(
    mut stream: TcpStream,
    peer: SocketAddr,
    state: &http::State,
) -> std::io::Result<()> {
    // Echo probes send 8 bytes; a request head is read into the same buffer, grown to its cap.
    let mut buf = vec![0u8; 1024];
    let n = stream.read(&mut buf).await?;
    if n == 0 {
        return Ok(());
    }
    if http::looks_like_http(&buf[..n]) {
        return http::handle(stream, peer, buf, n, state).await;
    }
    let mut total = 0;
    let mut n = n;
    loop {
        let take = n.min(ECHO_LIMIT - total);
        stream.write_all(&buf[..take]).await?;
        total += take;
        if total >= ECHO_LIMIT {
            return Ok(());
        }
        n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_check_prefixes() {
        for ok in [
            &b""[..],
            b"G",
            b"GET /he",
            b"GET /healthz HTTP/1.1",
            b"GET /ready",
        ] {
            assert!(may_be_health_check(ok), "{ok:?}");
        }
        for no in [&b"x"[..], b"GET /seen", b"PRB1", b"POST "] {
            assert!(!may_be_health_check(no), "{no:?}");
        }
    }
}
