//! `IP_RECVERR` and `IPV6_RECVERR`: the socket error queue, where the kernel keeps the ICMP or
//! ICMPv6 error (type, code, and the address that sent it) behind a failed connect or send — what
//! tells a firewall's "no" from a RST. Each family's codes map to the same outcomes.

use std::io::IoSliceMut;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsFd, AsRawFd};

use nix::errno::Errno;
use nix::sys::socket::{
    ControlMessageOwned, MsgFlags, SockaddrStorage, recvmsg, setsockopt, sockopt,
};

use crate::proto::{IcmpInfo, Outcome};

const SO_EE_ORIGIN_LOCAL: u8 = 1;
const SO_EE_ORIGIN_ICMP: u8 = 2;
const SO_EE_ORIGIN_ICMP6: u8 = 3;

/// One entry of the error queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueuedError {
    pub errno: i32,
    pub origin: u8,
    pub icmp_type: u8,
    pub code: u8,
    /// For "fragmentation needed" and "packet too big", the next-hop MTU.
    pub info: u32,
    pub offender: Option<IpAddr>,
}

impl QueuedError {
    /// Whether the local stack raised it (a packet larger than the interface's MTU, ...), not an
    /// ICMP message.
    #[must_use]
    pub fn is_local(&self) -> bool {
        self.origin == SO_EE_ORIGIN_LOCAL
    }

    /// Whether an ICMP (IPv4) or ICMPv6 message caused it, not the local stack.
    #[must_use]
    pub fn is_icmp(&self) -> bool {
        matches!(self.origin, SO_EE_ORIGIN_ICMP | SO_EE_ORIGIN_ICMP6)
    }

    /// The ICMP part, when the error came from an ICMP or ICMPv6 message: its type and code as
    /// that family numbers them (the address it came from tells which).
    #[must_use]
    pub fn icmp(&self) -> Option<IcmpInfo> {
        self.is_icmp().then_some(IcmpInfo {
            icmp_type: self.icmp_type,
            code: self.code,
            from: self.offender,
        })
    }

    /// The outcome and the words for it.
    fn judge(&self) -> (Outcome, String) {
        let (outcome, what) = if self.origin == SO_EE_ORIGIN_ICMP6 {
            (
                classify_icmp6(self.icmp_type, self.code),
                icmp6_text(self.icmp_type, self.code, self.info),
            )
        } else {
            (
                classify_icmp(self.icmp_type, self.code),
                icmp_text(self.icmp_type, self.code, self.info),
            )
        };
        let by = self
            .offender
            .map_or_else(String::new, |a| format!(" from {a}"));
        (outcome, format!("{what}{by}"))
    }
}

/// A failed socket operation: the errno it returned and the ICMP error behind it, if queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    pub errno: Option<i32>,
    pub queued: Option<QueuedError>,
}

impl Failure {
    #[must_use]
    #[allow(clippy::needless_pass_by_value)] // used as `map_err(Failure::from_io)`
    pub fn from_io(e: std::io::Error) -> Self {
        Self {
            errno: e.raw_os_error(),
            queued: None,
        }
    }

    /// Reads the error queue of `fd` to complete an errno.
    pub fn with_queue<F: AsFd>(errno: Option<i32>, fd: &F) -> Self {
        Self {
            errno,
            queued: take(fd),
        }
    }

    #[must_use]
    pub fn classify(&self) -> (Outcome, String) {
        classify(self.errno, self.queued.as_ref())
    }

    #[must_use]
    pub fn icmp(&self) -> Option<IcmpInfo> {
        self.queued.as_ref().and_then(QueuedError::icmp)
    }
}

/// Asks the kernel to queue ICMP errors (ICMPv6 ones on an IPv6 socket) on this socket, and to
/// report non-fatal ones.
pub fn enable<F: AsFd>(fd: &F, ipv6: bool) -> std::io::Result<()> {
    if ipv6 {
        setsockopt(fd, sockopt::Ipv6RecvErr, &true)
    } else {
        setsockopt(fd, sockopt::Ipv4RecvErr, &true)
    }
    .map_err(std::io::Error::from)
}

/// Takes the most recent ICMP error from the queue, if any, without blocking.
pub fn take<F: AsFd>(fd: &F) -> Option<QueuedError> {
    take_matching(fd, |_, _| true)
}

/// As [`take`], keeping only the errors `ours` accepts given the start of the packet that caused
/// each (as the kernel returns it: for a raw ICMP socket, the ICMP header it sent). A raw socket
/// is handed every ICMP error about its protocol to its peer, also those caused by another
/// socket's packets.
pub fn take_matching<F: AsFd>(
    fd: &F,
    ours: impl Fn(&QueuedError, &[u8]) -> bool,
) -> Option<QueuedError> {
    let mut last = None;
    // Drain: several errors may be queued (e.g. retransmitted SYNs); the last is the freshest.
    for _ in 0..16 {
        let mut data = [0u8; 512];
        let mut iov = [IoSliceMut::new(&mut data)];
        let mut cmsg = nix::cmsg_space!(libc::sock_extended_err, libc::sockaddr_in6);
        let Ok(msg) = recvmsg::<SockaddrStorage>(
            fd.as_fd().as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_ERRQUEUE | MsgFlags::MSG_DONTWAIT,
        ) else {
            break;
        };
        let len = msg.bytes;
        let Ok(cmsgs) = msg.cmsgs() else { break };
        let errors: Vec<QueuedError> = cmsgs.filter_map(|c| queued(&c)).collect();
        let packet = &data[..len.min(data.len())];
        if let Some(q) = errors.into_iter().rfind(|q| ours(q, packet)) {
            last = Some(q);
        }
    }
    last
}

/// The queued error a control message carries, if it is one.
fn queued(c: &ControlMessageOwned) -> Option<QueuedError> {
    let (ee, offender) = match *c {
        ControlMessageOwned::Ipv4RecvErr(ee, addr) => (
            ee,
            addr.map(|a| IpAddr::V4(Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)))),
        ),
        ControlMessageOwned::Ipv6RecvErr(ee, addr) => (
            ee,
            addr.map(|a| IpAddr::V6(Ipv6Addr::from(a.sin6_addr.s6_addr))),
        ),
        _ => return None,
    };
    Some(QueuedError {
        errno: i32::try_from(ee.ee_errno).unwrap_or(0),
        origin: ee.ee_origin,
        icmp_type: ee.ee_type,
        code: ee.ee_code,
        info: ee.ee_info,
        // An IPv4 sender of an error on a dual-stack socket is still an IPv4 address.
        offender: offender.map(|a| a.to_canonical()),
    })
}

/// Classifies an ICMP destination-unreachable/time-exceeded error (RFC 792, RFC 1812 codes).
#[must_use]
pub fn classify_icmp(icmp_type: u8, code: u8) -> Outcome {
    match (icmp_type, code) {
        // Protocol and port unreachable: the host is there and said nothing listens.
        (3, 2 | 3) => Outcome::Refused,
        // Communication administratively prohibited (net 9, host 10, filter 13),
        // host precedence violation (14), precedence cutoff (15).
        (3, 9 | 10 | 13 | 14 | 15) => Outcome::Rejected,
        // Net/host unreachable, fragmentation needed, source route failed, unknown net/host,
        // isolated host, unreachable for TOS; and TTL exceeded in transit (a routing loop).
        (3 | 11, _) => Outcome::Unreachable,
        _ => Outcome::Error,
    }
}

/// Classifies an ICMPv6 error (RFC 4443 codes) as its IPv4 twin is: port unreachable and an
/// unrecognised next header are `refused`; administratively prohibited, a failed source-address
/// policy and a reject route are `rejected`; no route, address unreachable, beyond scope, packet
/// too big and hop limit exceeded are `unreachable`.
#[must_use]
pub fn classify_icmp6(icmp_type: u8, code: u8) -> Outcome {
    match (icmp_type, code) {
        (1, 4) | (4, 1) => Outcome::Refused,
        (1, 1 | 5 | 6) => Outcome::Rejected,
        (1..=3, _) => Outcome::Unreachable,
        _ => Outcome::Error,
    }
}

/// Classifies a failed connect/send/recv from its errno and the queued ICMP error, if any.
#[must_use]
pub fn classify(errno: Option<i32>, queued: Option<&QueuedError>) -> (Outcome, String) {
    if let Some(q) = queued.filter(|q| q.is_icmp()) {
        return q.judge();
    }
    if let Some(q) = queued.filter(|q| q.origin == SO_EE_ORIGIN_LOCAL && q.errno == libc::EMSGSIZE)
    {
        return (
            Outcome::Error,
            format!("message larger than the local path MTU {}", q.info),
        );
    }
    let Some(errno) = errno else {
        return (Outcome::Error, "failed without an error code".into());
    };
    let text = Errno::from_raw(errno).desc();
    let outcome = match errno {
        libc::ECONNREFUSED => Outcome::Refused,
        libc::EHOSTUNREACH | libc::ENETUNREACH | libc::EADDRNOTAVAIL => Outcome::Unreachable,
        libc::ETIMEDOUT => Outcome::Timeout,
        libc::EACCES | libc::EPERM => Outcome::Rejected,
        _ => Outcome::Error,
    };
    let detail = match (outcome, errno) {
        (Outcome::Refused, _) => "connection refused (TCP RST)".to_string(),
        (Outcome::Unreachable, libc::ENETUNREACH) => "no route to network".to_string(),
        (Outcome::Rejected, _) => {
            format!("the local host refused to send: {text} (a local OUTPUT rule)")
        }
        _ => text.to_lowercase(),
    };
    (outcome, detail)
}

fn icmp_text(icmp_type: u8, code: u8, info: u32) -> String {
    let what = match (icmp_type, code) {
        (3, 0) => "net unreachable",
        (3, 1) => "host unreachable",
        (3, 2) => "protocol unreachable",
        (3, 3) => "port unreachable",
        (3, 4) => return format!("ICMP fragmentation needed (next-hop MTU {info})"),
        (3, 9) => "net administratively prohibited",
        (3, 10) => "host administratively prohibited",
        (3, 13) => "communication administratively prohibited",
        (3, 14) => "host precedence violation",
        (3, 15) => "precedence cutoff",
        (3, _) => "destination unreachable",
        (11, _) => "time exceeded (TTL expired in transit)",
        _ => "error",
    };
    format!("ICMP {what} (type {icmp_type} code {code})")
}

fn icmp6_text(icmp_type: u8, code: u8, info: u32) -> String {
    let what = match (icmp_type, code) {
        (1, 0) => "no route to destination",
        (1, 1) => "communication administratively prohibited",
        (1, 2) => "beyond scope of source address",
        (1, 3) => "address unreachable",
        (1, 4) => "port unreachable",
        (1, 5) => "source address failed ingress/egress policy",
        (1, 6) => "reject route to destination",
        (1, _) => "destination unreachable",
        (2, _) => return format!("ICMPv6 packet too big (next-hop MTU {info})"),
        (3, _) => "time exceeded (hop limit expired in transit)",
        (4, 1) => "parameter problem (unrecognized next header)",
        (4, _) => "parameter problem",
        _ => "error",
    };
    format!("ICMPv6 {what} (type {icmp_type} code {code})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn icmp_codes_map_to_outcomes() {
        let table: &[(u8, u8, Outcome)] = &[
            (3, 0, Outcome::Unreachable),
            (3, 1, Outcome::Unreachable),
            (3, 2, Outcome::Refused),
            (3, 3, Outcome::Refused),
            (3, 4, Outcome::Unreachable),
            (3, 9, Outcome::Rejected),
            (3, 10, Outcome::Rejected),
            (3, 13, Outcome::Rejected),
            (3, 15, Outcome::Rejected),
            (11, 0, Outcome::Unreachable),
            (5, 0, Outcome::Error),
        ];
        for &(t, c, want) in table {
            assert_eq!(classify_icmp(t, c), want, "type {t} code {c}");
        }
    }

    #[test]
    fn queued_icmp_wins_over_errno() {
        // Linux maps code 13 to EHOSTUNREACH for TCP: only the queue tells it was a firewall.
        let q = QueuedError {
            errno: libc::EHOSTUNREACH,
            origin: SO_EE_ORIGIN_ICMP,
            icmp_type: 3,
            code: 13,
            info: 0,
            offender: Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 254))),
        };
        let (o, d) = classify(Some(libc::EHOSTUNREACH), Some(&q));
        assert_eq!(o, Outcome::Rejected);
        assert_eq!(
            d,
            "ICMP communication administratively prohibited (type 3 code 13) from 10.0.0.254"
        );
        assert_eq!(
            q.icmp().unwrap().from,
            Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 254)))
        );
    }

    #[test]
    fn icmpv6_codes_map_to_the_ipv4_outcomes() {
        let table: &[(u8, u8, Outcome)] = &[
            (1, 0, Outcome::Unreachable),
            (1, 1, Outcome::Rejected),
            (1, 2, Outcome::Unreachable),
            (1, 3, Outcome::Unreachable),
            (1, 4, Outcome::Refused),
            (1, 5, Outcome::Rejected),
            (1, 6, Outcome::Rejected),
            (2, 0, Outcome::Unreachable),
            (3, 0, Outcome::Unreachable),
            (4, 1, Outcome::Refused),
            (4, 0, Outcome::Error),
            (128, 0, Outcome::Error),
        ];
        for &(t, c, want) in table {
            assert_eq!(classify_icmp6(t, c), want, "type {t} code {c}");
        }
    }

    #[test]
    fn a_queued_icmpv6_error_is_read_as_icmpv6() {
        // ICMP type 1 means nothing to IPv4 (`error`): only the origin says these are ICMPv6's.
        assert_eq!(classify_icmp(1, 1), Outcome::Error);
        let router: IpAddr = "fd77:1::1".parse().unwrap();
        let q = QueuedError {
            errno: libc::EACCES,
            origin: SO_EE_ORIGIN_ICMP6,
            icmp_type: 1,
            code: 1,
            info: 0,
            offender: Some(router),
        };
        let (o, d) = classify(Some(libc::EACCES), Some(&q));
        assert_eq!(o, Outcome::Rejected);
        assert_eq!(
            d,
            "ICMPv6 communication administratively prohibited (type 1 code 1) from fd77:1::1"
        );
        let icmp = q.icmp().unwrap();
        assert_eq!((icmp.icmp_type, icmp.code, icmp.from), (1, 1, Some(router)));
        let expired = QueuedError {
            icmp_type: 3,
            code: 0,
            ..q
        };
        assert_eq!(classify(None, Some(&expired)).0, Outcome::Unreachable);
        assert!(classify(None, Some(&expired)).1.contains("hop limit"));
        let too_big = QueuedError {
            icmp_type: 2,
            code: 0,
            info: 1280,
            ..q
        };
        assert!(classify(None, Some(&too_big)).1.contains("MTU 1280"));
    }

    #[test]
    fn errno_alone() {
        assert_eq!(classify(Some(libc::ECONNREFUSED), None).0, Outcome::Refused);
        assert_eq!(
            classify(Some(libc::ENETUNREACH), None).0,
            Outcome::Unreachable
        );
        assert_eq!(classify(Some(libc::ETIMEDOUT), None).0, Outcome::Timeout);
        assert_eq!(classify(Some(libc::EPERM), None).0, Outcome::Rejected);
        assert_eq!(classify(Some(libc::EINVAL), None).0, Outcome::Error);
        assert_eq!(classify(None, None).0, Outcome::Error);
    }

    #[test]
    fn frag_needed_reports_mtu() {
        let q = QueuedError {
            errno: libc::EMSGSIZE,
            origin: 2,
            icmp_type: 3,
            code: 4,
            info: 1400,
            offender: None,
        };
        let (o, d) = classify(None, Some(&q));
        assert_eq!(o, Outcome::Unreachable);
        assert!(d.contains("1400"), "{d}");
    }
}
