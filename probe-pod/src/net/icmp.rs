//! ICMP echo: an unprivileged ping socket when `net.ipv4.ping_group_range` allows it, a raw socket
//! (`CAP_NET_RAW`) otherwise; optionally with DF set, for path-MTU probes.

use std::io::{self, Read};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::time::Instant;

use super::errqueue::{self, Failure};
use super::packet::{echo_request, parse_echo_reply};
use super::{bpf, random_u32};

/// Which kind of socket carried the echo (reported in the probe detail).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EchoKind {
    Ping,
    Raw,
}

pub struct EchoSocket {
    fd: AsyncFd<Socket>,
    kind: EchoKind,
    ident: u16,
}

impl EchoSocket {
    /// Opens and connects an echo socket to `dest`. With `dont_fragment`, every packet carries DF
    /// and the kernel's cached path MTU is ignored, so the size asked for is the size sent.
    pub fn open(dest: Ipv4Addr, dont_fragment: bool) -> io::Result<Self> {
        let (sock, kind) = match Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::ICMPV4)) {
            Ok(s) => (s, EchoKind::Ping),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) => (
                Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::ICMPV4)).map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!(
                            "ICMP needs a ping socket (net.ipv4.ping_group_range) or CAP_NET_RAW: {e}"
                        ),
                    )
                })?,
                EchoKind::Raw,
            ),
            Err(e) => return Err(e),
        };
        let ident = u16::try_from(random_u32() & 0xffff).unwrap_or(1);
        if kind == EchoKind::Raw {
            sock.attach_filter(&bpf::to_filter(&bpf::echo_reply_program(ident)))?;
        }
        sock.set_nonblocking(true)?;
        errqueue::enable(&sock, false)?;
        if dont_fragment {
            set_pmtu_probe(&sock)?;
        }
        sock.connect(&SockAddr::from(SocketAddrV4::new(dest, 0)))?;
        Ok(Self {
            fd: super::async_fd(sock, Interest::READABLE | Interest::WRITABLE)?,
            kind,
            ident,
        })
    }

    #[must_use]
    pub fn kind(&self) -> EchoKind {
        self.kind
    }

    /// The kernel's path MTU towards the destination.
    #[must_use]
    pub fn path_mtu(&self) -> Option<u32> {
        nix::sys::socket::getsockopt(self.fd.get_ref(), nix::sys::socket::sockopt::IpMtu)
            .ok()
            .and_then(|m| u32::try_from(m).ok())
    }

    /// Sends one echo request with `payload` and waits until `deadline` for the matching reply.
    /// `Ok(None)` means silence.
    pub async fn ping(
        &self,
        seq: u16,
        payload: &[u8],
        nonce: u32,
        deadline: Instant,
    ) -> Result<Option<Duration>, Failure> {
        let pkt = echo_request(self.ident, seq, payload);
        let start = Instant::now();
        loop {
            let mut guard = match tokio::time::timeout_at(deadline, self.fd.writable()).await {
                Ok(g) => g.map_err(Failure::from_io)?,
                Err(_) => return Ok(None),
            };
            match guard.try_io(|s| s.get_ref().send(&pkt)) {
                Ok(Ok(_)) => break,
                Ok(Err(e)) => return Err(self.failure(&e)),
                Err(_would_block) => {}
            }
        }
        let mut buf = [0u8; 2048];
        // An ICMP error (a firewall's reject, a router's "no route") raises only EPOLLERR, which
        // readable interest alone never wakes for: wait for either, and let the read report it.
        let interest = Interest::READABLE | Interest::ERROR;
        loop {
            let ready = self.fd.ready(interest);
            let mut guard = match tokio::time::timeout_at(deadline, ready).await {
                Ok(g) => g.map_err(Failure::from_io)?,
                Err(_) => return Ok(None),
            };
            match guard.try_io(|s| s.get_ref().read(&mut buf)) {
                Ok(Ok(n)) => {
                    let reply = parse_echo_reply(&buf[..n], self.kind == EchoKind::Raw);
                    if let Some(r) = reply {
                        // Ping sockets rewrite the identifier, so match on sequence and nonce.
                        let ours = r.seq == seq
                            && r.nonce == Some(nonce)
                            && (self.kind == EchoKind::Ping || r.ident == self.ident);
                        if ours {
                            return Ok(Some(start.elapsed()));
                        }
                    }
                }
                Ok(Err(e)) => return Err(self.failure(&e)),
                Err(_would_block) => {}
            }
        }
    }

    fn failure(&self, e: &io::Error) -> Failure {
        Failure {
            errno: e.raw_os_error(),
            queued: errqueue::take(self.fd.get_ref()),
        }
    }
}

/// `IP_MTU_DISCOVER = IP_PMTUDISC_PROBE`: set DF and ignore the cached path MTU.
fn set_pmtu_probe<F: AsFd>(fd: &F) -> io::Result<()> {
    let value: libc::c_int = libc::IP_PMTUDISC_PROBE;
    let len = libc::socklen_t::try_from(std::mem::size_of::<libc::c_int>()).expect("small");
    // Safety: the fd is open for the duration of the call (borrowed), and we pass a pointer to a
    // live c_int together with its exact size, as IP_MTU_DISCOVER expects. Neither nix nor socket2
    // exposes this option.
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::setsockopt(
            fd.as_fd().as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            (&raw const value).cast(),
            len,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
