//! ICMP and ICMPv6 echo: an unprivileged ping socket when `net.ipv4.ping_group_range` allows it
//! (the one sysctl governs both families), a raw socket (`CAP_NET_RAW`) otherwise; optionally
//! with DF set, for path-MTU probes.

use std::io::{self, Read};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::time::Instant;

use super::errqueue::{self, Failure};
use super::packet::{echo_request, echo_request_v6, parse_echo_reply, parse_echo_reply_v6};
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
    ipv6: bool,
}

impl EchoSocket {
    /// Opens and connects an echo socket to `dest` (ICMPv6 to an IPv6 address). With
    /// `dont_fragment`, every packet carries DF and the kernel's cached path MTU is ignored, so
    /// the size asked for is the size sent.
    pub fn open(dest: IpAddr, dont_fragment: bool) -> io::Result<Self> {
        let ipv6 = dest.is_ipv6();
        let (domain, protocol) = if ipv6 {
            (Domain::IPV6, Protocol::ICMPV6)
        } else {
            (Domain::IPV4, Protocol::ICMPV4)
        };
        let (sock, kind) = match Socket::new(domain, Type::DGRAM, Some(protocol)) {
            Ok(s) => (s, EchoKind::Ping),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) => (
                Socket::new(domain, Type::RAW, Some(protocol)).map_err(|e| {
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
            let program = if ipv6 {
                bpf::echo_reply_v6_program(ident)
            } else {
                bpf::echo_reply_program(ident)
            };
            sock.attach_filter(&bpf::to_filter(&program))?;
        }
        sock.set_nonblocking(true)?;
        errqueue::enable(&sock, ipv6)?;
        if dont_fragment {
            set_pmtu_probe(&sock)?;
        }
        sock.connect(&SockAddr::from(SocketAddr::new(dest, 0)))?;
        Ok(Self {
            fd: super::async_fd(sock, Interest::READABLE | Interest::WRITABLE)?,
            kind,
            ident,
            ipv6,
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
        let pkt = if self.ipv6 {
            echo_request_v6(self.ident, seq, payload)
        } else {
            echo_request(self.ident, seq, payload)
        };
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
                    let reply = if self.ipv6 {
                        parse_echo_reply_v6(&buf[..n])
                    } else {
                        parse_echo_reply(&buf[..n], self.kind == EchoKind::Raw)
                    };
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
