//! One DNS query over exactly the transport asked for: no cache, no retries, no silent switch from
//! UDP to TCP. Or, with no server given, the agent's own resolv.conf as a pod's libc would use it.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use hickory_proto::op::{Message, MessageType, OpCode, Query};
use hickory_proto::rr::{Name, RecordType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use super::{Fail, micros, tcp, udp};
use crate::files;
use crate::net::random_u32;
use crate::proto::{self, DnsInfo, DnsRecordType, Outcome, ProbeResult, Transport};

const DEFAULT_RESOLV_CONF: &str = "/etc/resolv.conf";

/// What resolv.conf says, as far as a stub resolver cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvConf {
    pub nameservers: Vec<SocketAddr>,
    pub search: Vec<String>,
    pub ndots: usize,
    pub timeout: Duration,
}

impl ResolvConf {
    /// Parses resolv.conf text the way glibc does (last `search`/`domain` wins, three servers).
    #[must_use]
    pub fn parse(text: &str) -> Self {
        let mut rc = Self {
            nameservers: Vec::new(),
            search: Vec::new(),
            ndots: 1,
            timeout: Duration::from_secs(5),
        };
        for line in text.lines() {
            let line = line.split(['#', ';']).next().unwrap_or("");
            let mut words = line.split_whitespace();
            match words.next() {
                Some("nameserver") => {
                    let ip = words.next().and_then(|w| w.parse().ok());
                    if let Some(ip) = ip.filter(|_| rc.nameservers.len() < 3) {
                        rc.nameservers.push(SocketAddr::new(ip, 53));
                    }
                }
                Some("search" | "domain") => {
                    rc.search = words.map(|w| w.trim_end_matches('.').to_string()).collect();
                }
                Some("options") => {
                    for opt in words {
                        if let Some(n) = opt.strip_prefix("ndots:").and_then(|v| v.parse().ok()) {
                            rc.ndots = usize::min(n, 15);
                        } else if let Some(n) =
                            opt.strip_prefix("timeout:").and_then(|v| v.parse().ok())
                        {
                            rc.timeout = Duration::from_secs(u64::clamp(n, 1, 30));
                        }
                    }
                }
                _ => {}
            }
        }
        rc
    }

    /// The names a stub resolver tries, in order.
    #[must_use]
    pub fn candidates(&self, name: &str) -> Vec<String> {
        if let Some(abs) = name.strip_suffix('.') {
            return vec![abs.to_string()];
        }
        let searched = self.search.iter().map(|d| format!("{name}.{d}"));
        if name.matches('.').count() >= self.ndots {
            std::iter::once(name.to_string()).chain(searched).collect()
        } else {
            searched.chain(std::iter::once(name.to_string())).collect()
        }
    }
}

fn record_type(t: DnsRecordType) -> RecordType {
    match t {
        DnsRecordType::A => RecordType::A,
        DnsRecordType::Aaaa => RecordType::AAAA,
        DnsRecordType::Srv => RecordType::SRV,
    }
}

/// The mnemonic of an rcode, as dig prints it.
#[must_use]
pub fn rcode_name(code: u16) -> String {
    match code {
        0 => "NOERROR".into(),
        1 => "FORMERR".into(),
        2 => "SERVFAIL".into(),
        3 => "NXDOMAIN".into(),
        4 => "NOTIMP".into(),
        5 => "REFUSED".into(),
        n => format!("RCODE{n}"),
    }
}

/// Sends one query to one server and returns its answer.
async fn query(
    server: SocketAddr,
    transport: Transport,
    name: &str,
    rtype: RecordType,
    deadline: Instant,
) -> Result<Message, Fail> {
    let qname = Name::from_ascii(name)
        .map_err(|e| Fail::Local(format!("{name:?} is not a DNS name: {e}")))?;
    let id = u16::try_from(random_u32() & 0xffff).unwrap_or(1);
    let mut msg = Message::new(id, MessageType::Query, OpCode::Query);
    msg.metadata.recursion_desired = true;
    msg.add_query(Query::query(qname, rtype));
    let wire = msg
        .to_vec()
        .map_err(|e| Fail::Local(format!("cannot encode query: {e}")))?;
    let answer = match transport {
        Transport::Udp => {
            let sock = udp::connected(server)?;
            sock.send(&wire).await.map_err(Fail::from)?;
            let mut buf = vec![0u8; 4096];
            let n = udp::recv_matching(&sock, deadline, &mut buf, |d| {
                d.len() >= 2 && d[..2] == id.to_be_bytes()
            })
            .await?;
            buf.truncate(n);
            buf
        }
        Transport::Tcp => {
            let (mut stream, _) = tcp::connect(server, deadline).await?;
            let exchange = async {
                let len = u16::try_from(wire.len()).unwrap_or(u16::MAX);
                stream.write_all(&len.to_be_bytes()).await?;
                stream.write_all(&wire).await?;
                let len = stream.read_u16().await?;
                let mut buf = vec![0u8; usize::from(len)];
                stream.read_exact(&mut buf).await?;
                Ok::<_, std::io::Error>(buf)
            };
            match tokio::time::timeout_at(deadline, exchange).await {
                Err(_) => return Err(Fail::Timeout),
                Ok(Err(e)) => {
                    return Err(Fail::Local(format!(
                        "connected, but the exchange failed: {e}"
                    )));
                }
                Ok(Ok(b)) => b,
            }
        }
    };
    decode_answer(&answer, id).map_err(|e| Fail::Local(e.to_string()))
}

/// Why bytes from a DNS server are not an answer to the query sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// hickory's message, at most 200 bytes.
    #[error("unparsable answer: {0}")]
    Unparsable(String),
    #[error("answer id does not match the query")]
    OtherId,
    #[error("the answer is not a response")]
    NotAResponse,
}

/// Decodes an answer from the wire and checks it answers query `id`.
fn decode_answer(wire: &[u8], id: u16) -> Result<Message, AnswerError> {
    let reply = Message::from_vec(wire).map_err(|e| {
        // hickory's messages are short and describe the structure, but keep them bounded anyway.
        let mut text = e.to_string();
        probe_proto::util::truncate_at_char(&mut text, 200);
        AnswerError::Unparsable(text)
    })?;
    if reply.metadata.id != id {
        return Err(AnswerError::OtherId);
    }
    if reply.metadata.message_type != MessageType::Response {
        return Err(AnswerError::NotAResponse);
    }
    Ok(reply)
}

/// Decodes an answer to query `id` and judges it as the probe would.
pub fn judge_answer(
    probe_id: &str,
    what: &str,
    server: SocketAddr,
    name: &str,
    wire: &[u8],
    id: u16,
    rtt: Duration,
) -> Result<ProbeResult, AnswerError> {
    let reply = decode_answer(wire, id)?;
    Ok(judge(probe_id, what, server, name, &reply, rtt))
}

fn transport_name(t: Transport) -> &'static str {
    match t {
        Transport::Udp => "udp",
        Transport::Tcp => "tcp",
    }
}

/// Turns an answer into a result.
fn judge(
    id: &str,
    what: &str,
    server: SocketAddr,
    name: &str,
    reply: &Message,
    rtt: Duration,
) -> ProbeResult {
    let code = u16::from(reply.metadata.response_code);
    let answers: Vec<String> = reply
        .answers
        .iter()
        .map(|r| format!("{} {}", r.record_type(), r.data))
        .collect();
    let (outcome, detail) = match (code, answers.is_empty()) {
        (0, false) => (Outcome::Ok, format!("{what}: {} answer(s)", answers.len())),
        (0, true) if reply.metadata.truncation => (
            Outcome::DnsError,
            format!("{what}: truncated answer with no records (the server wants TCP)"),
        ),
        (0, true) => (
            Outcome::DnsError,
            format!("{what}: NOERROR but no records (NODATA)"),
        ),
        (c, _) => (Outcome::DnsError, format!("{what}: {}", rcode_name(c))),
    };
    let mut r = ProbeResult::new(id, outcome, detail);
    r.rtt_micros = Some(micros(rtt));
    r.dns = Some(Box::new(DnsInfo {
        server,
        name: name.to_string(),
        rcode: Some(rcode_name(code)),
        answers,
    }));
    r
}

pub async fn probe(id: &str, probe: &proto::DnsProbe, deadline: Instant) -> ProbeResult {
    let proto::DnsProbe {
        name,
        record_type: rt,
        protocol,
        server,
        resolv_conf,
    } = probe;
    let start = Instant::now();
    let rtype = record_type(*rt);
    let proto = transport_name(*protocol);
    if let Some(server) = server {
        let what = format!("dns {proto} {server} {rt:?} {name}");
        return match query(*server, *protocol, name, rtype, deadline).await {
            Ok(reply) => judge(id, &what, *server, name, &reply, start.elapsed()),
            Err(f) => with_dns(f.into_result(id, &what, start.elapsed()), *server, name),
        };
    }
    let path = resolv_conf
        .as_deref()
        .unwrap_or(Path::new(DEFAULT_RESOLV_CONF));
    let read = files::read_text_capped(path, files::MAX_RESOLV_CONF, "resolv.conf", path.display());
    let conf = match read {
        Ok(t) => ResolvConf::parse(&t),
        Err(e) => {
            return ProbeResult::new(id, Outcome::Error, format!("dns: {e}"));
        }
    };
    if conf.nameservers.is_empty() {
        return ProbeResult::new(
            id,
            Outcome::Error,
            format!("dns via {}: no nameserver line", path.display()),
        );
    }
    let mut last = None;
    for cand in conf.candidates(name) {
        for &ns in &conf.nameservers {
            let try_deadline = deadline.min(Instant::now() + conf.timeout);
            let what = format!("dns {proto} {ns} {rt:?} {cand} (via {})", path.display());
            let t0 = Instant::now();
            match query(ns, *protocol, &cand, rtype, try_deadline).await {
                Ok(reply) => {
                    let r = judge(id, &what, ns, &cand, &reply, t0.elapsed());
                    let code = u16::from(reply.metadata.response_code);
                    if r.outcome.is_ok() {
                        return r;
                    }
                    last = Some(r);
                    // NXDOMAIN and NODATA move on to the next search name; other rcodes to the
                    // next server, as glibc does.
                    if code == 0 || code == 3 {
                        break;
                    }
                }
                Err(f) => last = Some(with_dns(f.into_result(id, &what, t0.elapsed()), ns, &cand)),
            }
            if Instant::now() >= deadline {
                return last
                    .unwrap_or_else(|| Fail::Timeout.into_result(id, "dns", start.elapsed()));
            }
        }
    }
    last.unwrap_or_else(|| Fail::Timeout.into_result(id, "dns", start.elapsed()))
}

fn with_dns(mut r: ProbeResult, server: SocketAddr, name: &str) -> ProbeResult {
    r.dns = Some(Box::new(DnsInfo {
        server,
        name: name.to_string(),
        rcode: None,
        answers: Vec::new(),
    }));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolv_conf_of_a_pod() {
        let rc = ResolvConf::parse(
            "# generated\nsearch default.svc.cluster.local svc.cluster.local cluster.local\n\
             nameserver 10.96.0.10\nnameserver fe80::1%eth0\noptions ndots:5 timeout:2\n",
        );
        assert_eq!(rc.nameservers, vec!["10.96.0.10:53".parse().unwrap()]);
        assert_eq!(rc.ndots, 5);
        assert_eq!(rc.timeout, Duration::from_secs(2));
        assert_eq!(
            rc.candidates("kubernetes"),
            [
                "kubernetes.default.svc.cluster.local",
                "kubernetes.svc.cluster.local",
                "kubernetes.cluster.local",
                "kubernetes"
            ]
        );
        assert_eq!(rc.candidates("example.com.").len(), 1);
    }

    #[test]
    fn dotted_names_go_first_when_ndots_allows() {
        let rc = ResolvConf::parse(
            "nameserver 10.0.0.1\nnameserver 10.0.0.2\nnameserver 10.0.0.3\nnameserver 10.0.0.4\nsearch a b\n",
        );
        assert_eq!(rc.nameservers.len(), 3, "glibc uses three");
        assert_eq!(rc.candidates("x.y"), ["x.y", "x.y.a", "x.y.b"]);
    }

    #[test]
    fn rcodes() {
        assert_eq!(rcode_name(3), "NXDOMAIN");
        assert_eq!(rcode_name(2), "SERVFAIL");
        assert_eq!(rcode_name(23), "RCODE23");
    }
}
