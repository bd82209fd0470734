//! TCP on the agent port: echo (bounded in bytes and idle time), or HTTP when the first bytes are
//! a GET — one port for both, so a firewall rule that opens the agent opens its health check.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use super::http;

const MAX_CONNECTIONS: usize = 4096;
/// Echo at most this much per connection, then close.
const ECHO_LIMIT: usize = 64 * 1024;
const IDLE: Duration = Duration::from_secs(5);

pub async fn serve(listener: TcpListener, state: Arc<http::State>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            // EMFILE and friends: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            drop(stream); // over the limit: close at once
            continue;
        };
        let state = state.clone();
        tokio::spawn(async move {
            let _ = handle(stream, peer, &state).await;
            drop(permit);
        });
    }
}

async fn handle(
    mut stream: TcpStream,
    peer: SocketAddr,
    state: &http::State,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; 4096];
    let Ok(n) = tokio::time::timeout(IDLE, stream.read(&mut buf)).await? else {
        return Ok(());
    };
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
        n = match tokio::time::timeout(IDLE, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Err(_) => return Ok(()),
            Ok(r) => r?,
        };
    }
}
