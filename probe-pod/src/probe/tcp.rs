//! TCP connect, telling a RST from a firewall's ICMP from silence; optionally proving the agent
//! answered by having it echo a nonce.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::{Fail, micros};
use crate::net::errqueue::{self, Failure};
use crate::net::packet::{PAYLOAD_HEADER, payload_nonce, probe_payload};
use crate::net::random_u32;
use crate::proto::{Outcome, ProbeResult};

/// Connects to `addr` before `deadline`, returning the stream and the handshake time.
pub async fn connect(addr: SocketAddr, deadline: Instant) -> Result<(TcpStream, Duration), Fail> {
    connect_from(addr, None, deadline, &mut None).await
}

/// As [`connect`], also writing the local address the SYN left from into `source` as soon as
/// the kernel chose it, so a failed connect can still be matched with the receiver's sniffer.
/// With `ttl`, the SYN may cross at most that many routers.
async fn connect_from(
    addr: SocketAddr,
    ttl: Option<u32>,
    deadline: Instant,
    source: &mut Option<SocketAddr>,
) -> Result<(TcpStream, Duration), Fail> {
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    sock.set_nonblocking(true)?;
    errqueue::enable(&sock, addr.is_ipv6())?;
    super::hop::limit(&sock, addr, ttl)?;
    let start = Instant::now();
    match sock.connect(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(Fail::Net(Failure::with_queue(e.raw_os_error(), &sock))),
    }
    *source = sock.local_addr().ok().and_then(|a| a.as_socket());
    let afd = crate::net::async_fd(sock, Interest::WRITABLE)?;
    loop {
        let mut guard = match tokio::time::timeout_at(deadline, afd.writable()).await {
            Ok(g) => g?,
            Err(_) => return Err(Fail::Timeout),
        };
        match afd.get_ref().take_error() {
            Ok(Some(e)) | Err(e) => {
                return Err(Fail::Net(Failure::with_queue(
                    e.raw_os_error(),
                    afd.get_ref(),
                )));
            }
            Ok(None) => {}
        }
        if afd.get_ref().peer_addr().is_ok() {
            break;
        }
        // Spurious wake-up: still connecting.
        guard.clear_ready();
    }
    let rtt = start.elapsed();
    let std: std::net::TcpStream = afd.into_inner().into();
    Ok((TcpStream::from_std(std)?, rtt))
}

pub async fn probe(
    id: &str,
    addr: SocketAddr,
    echo: bool,
    ttl: Option<u32>,
    deadline: Instant,
) -> ProbeResult {
    let start = Instant::now();
    let mut source = None;
    let mut r = probe_from(id, (addr, ttl), echo, deadline, start, &mut source).await;
    r.source = source;
    r
}

async fn probe_from(
    id: &str,
    (addr, ttl): (SocketAddr, Option<u32>),
    echo: bool,
    deadline: Instant,
    start: Instant,
    source: &mut Option<SocketAddr>,
) -> ProbeResult {
    let (mut stream, rtt) = match connect_from(addr, ttl, deadline, source).await {
        Ok(s) => s,
        Err(f) => return f.into_result(id, &format!("tcp connect {addr}"), start.elapsed()),
    };
    if !echo {
        let mut r = ProbeResult::new(id, Outcome::Ok, format!("tcp connect {addr}: connected"));
        r.rtt_micros = Some(micros(rtt));
        return r;
    }
    let nonce = random_u32();
    let what = format!("tcp echo {addr}");
    let exchange = async {
        stream
            .write_all(&probe_payload(nonce, PAYLOAD_HEADER))
            .await?;
        let mut back = [0u8; PAYLOAD_HEADER];
        stream.read_exact(&mut back).await?;
        Ok::<_, io::Error>(back)
    };
    let mut r = match tokio::time::timeout_at(deadline, exchange).await {
        Err(_) => {
            return Fail::Timeout.into_result(
                id,
                &format!("{what} (connected, no echo)"),
                start.elapsed(),
            );
        }
        Ok(Err(e)) => ProbeResult::new(
            id,
            Outcome::Error,
            format!(
                "{what}: connected, but the echo failed: {e} (is another service listening there?)"
            ),
        ),
        Ok(Ok(back)) if payload_nonce(&back) == Some(nonce) => {
            ProbeResult::new(id, Outcome::Ok, format!("{what}: nonce echoed"))
        }
        Ok(Ok(_)) => ProbeResult::new(
            id,
            Outcome::Error,
            format!(
                "{what}: connected, but the answer was not our nonce: another service listens there"
            ),
        ),
    };
    r.rtt_micros = Some(micros(rtt));
    r.nonce = Some(nonce);
    r
}
