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

use super::errqueue::{self, Failure, QueuedError};
use super::packet::{
    echo_fields, echo_request, echo_request_v6, parse_echo_reply, parse_echo_reply_v6,
};
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
            set_pmtu_probe(&sock, ipv6)?;
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
        socket_mtu(self.fd.get_ref(), self.ipv6).ok()
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
                Ok(Err(e)) => return Err(self.failure(&e, seq).unwrap_or(Failure::from_io(e))),
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
                Ok(Err(e)) => {
                    if let Some(f) = self.failure(&e, seq) {
                        return Err(f);
                    }
                }
                Err(_would_block) => {}
            }
        }
    }

    /// The error behind `e` when it is this echo's own. A raw socket is handed every ICMP error
    /// its peer's address drew, also those other probes' packets drew (an MTU probe's Packet Too
    /// Big reaches the small echo beside it): an ICMP error is its own only when the echo request
    /// it quotes carries its identifier and sequence. `None`: another's; keep waiting.
    fn failure(&self, e: &io::Error, seq: u16) -> Option<Failure> {
        let raw = self.kind == EchoKind::Raw;
        let ours = |q: &QueuedError, sent: &[u8]| {
            !raw || q.is_local()
                || echo_fields(sent).is_some_and(|m| (m.ident, m.seq) == (self.ident, seq))
        };
        let queued = errqueue::take_matching(self.fd.get_ref(), ours);
        (!raw || queued.is_some()).then(|| Failure {
            errno: e.raw_os_error(),
            queued,
        })
    }
}

/// `IP_MTU_DISCOVER = IP_PMTUDISC_PROBE`: set DF and ignore the cached path MTU. On IPv6,
/// `IPV6_MTU_DISCOVER = IPV6_PMTUDISC_PROBE` and `IPV6_DONTFRAG`: routers never fragment IPv6,
/// and the sender must not either, so a packet larger than the interface's MTU fails with
/// `EMSGSIZE` as an IPv4 one with DF does.
fn set_pmtu_probe<F: AsFd>(fd: &F, ipv6: bool) -> io::Result<()> {
    if ipv6 {
        set_int(
            fd,
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
            libc::IPV6_PMTUDISC_PROBE,
        )?;
        nix::sys::socket::setsockopt(fd, nix::sys::socket::sockopt::Ipv6DontFrag, &true)
            .map_err(io::Error::from)
    } else {
        set_int(
            fd,
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_PROBE,
        )
    }
}

/// The MTU the kernel has for a connected socket's route (`IP_MTU`, `IPV6_MTU`).
fn socket_mtu<F: AsFd>(fd: &F, ipv6: bool) -> io::Result<u32> {
    let (level, name) = if ipv6 {
        (libc::IPPROTO_IPV6, libc::IPV6_MTU)
    } else {
        (libc::IPPROTO_IP, libc::IP_MTU)
    };
    let mut value: libc::c_int = 0;
    let mut len = libc::socklen_t::try_from(std::mem::size_of::<libc::c_int>()).expect("small");
    // Safety: the fd is open for the duration of the call (borrowed); we pass a pointer to a
    // live c_int and its exact size, which IP_MTU and IPV6_MTU fill in. nix has no IPV6_MTU.
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::getsockopt(
            fd.as_fd().as_raw_fd(),
            level,
            name,
            (&raw mut value).cast(),
            &raw mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    u32::try_from(value).map_err(|_| io::Error::other(format!("a negative MTU {value}")))
}

/// The MTU of the route toward `dest` as the kernel has it: a connected UDP socket's `IP_MTU`
/// (`IPV6_MTU`), which sends nothing.
pub fn route_mtu(dest: IpAddr) -> io::Result<u32> {
    let sock = Socket::new(
        Domain::for_address(SocketAddr::new(dest, 9)),
        Type::DGRAM,
        None,
    )?;
    sock.connect(&SocketAddr::new(dest, 9).into())?;
    socket_mtu(&sock, dest.is_ipv6())
}

/// `setsockopt` of an `int` option that neither nix nor socket2 exposes.
fn set_int<F: AsFd>(
    fd: &F,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    let len = libc::socklen_t::try_from(std::mem::size_of::<libc::c_int>()).expect("small");
    // Safety: the fd is open for the duration of the call (borrowed), and we pass a pointer to a
    // live c_int together with its exact size, as IP_MTU_DISCOVER and IPV6_MTU_DISCOVER expect.
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::setsockopt(
            fd.as_fd().as_raw_fd(),
            level,
            name,
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
