//! After a run is rendered: push its metrics to a Pushgateway and write the one JSON log line a
//! Job's log collector keeps. Plain HTTP/1.1 over a TCP stream under one deadline: a Pushgateway
//! is inside the cluster or on a monitoring host, and the push is one request.

use super::out::errln;
use std::time::Duration;

use prober::report::remembered::Changes;
use prober::report::{EXIT_OK, EXIT_USAGE, Report};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use probe_proto::http1;

use super::args::{ExportArgs, LogFormat};

/// Now, in seconds since the epoch.
#[must_use]
pub fn now() -> u64 {
    probe_proto::util::unix_secs()
}

/// A Pushgateway's address: `http://HOST[:PORT][/PREFIX]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushUrl {
    pub host: String,
    pub port: u16,
    /// Path prefix, without a trailing slash (`""` at the root).
    pub prefix: String,
}

impl PushUrl {
    /// Where the group `job="prober"` lives.
    #[must_use]
    pub fn path(&self) -> String {
        format!("{}/metrics/job/prober", self.prefix)
    }
}

/// Parses `--pushgateway`.
pub fn push_url(s: &str) -> Result<PushUrl, String> {
    if s.starts_with("https://") {
        return Err(
            "https is not supported: push over plain http to the Pushgateway's in-cluster \
             Service (http://pushgateway.monitoring.svc:9091) or a loopback port-forward"
                .into(),
        );
    }
    // It becomes the request line and the Host header: a line break would forge headers.
    if !s.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "{s:?} holds a space, a line break, a control character or non-ASCII: not a URL"
        ));
    }
    let rest = s
        .strip_prefix("http://")
        .ok_or_else(|| format!("{s:?} is not an http:// URL"))?;
    let (authority, path) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
    if authority.is_empty() || authority.contains('@') {
        return Err(format!("{s:?}: expected http://HOST:PORT"));
    }
    // `[v6]:port`, `[v6]`, `host:port`, `host`.
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (h, after) = v6
                .split_once(']')
                .ok_or_else(|| format!("{s:?}: unclosed '['"))?;
            (h, after.strip_prefix(':'))
        }
        None => match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        },
    };
    let port = match port {
        Some(p) => p
            .parse::<u16>()
            .map_err(|_| format!("{s:?}: port {p:?} is not a number"))?,
        None => 80,
    };
    let host_ok = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'_'));
    let path_ok = path
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'-' | b'_' | b'~' | b'%'));
    if !host_ok || !path_ok || port == 0 {
        return Err(format!("{s:?}: expected http://HOST:PORT[/PATH]"));
    }
    Ok(PushUrl {
        host: host.to_string(),
        port,
        prefix: path.trim_end_matches('/').to_string(),
    })
}

/// Why a push failed.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("cannot resolve {host}: {source}")]
    Resolve {
        host: String,
        source: std::io::Error,
    },
    #[error("{host} resolves to no address")]
    NoAddress { host: String },
    #[error("{addr}: {source}")]
    Io {
        addr: String,
        source: std::io::Error,
    },
    #[error("{addr}: cannot write the request: {source}")]
    Head {
        addr: String,
        source: probe_proto::http1::HeadError,
    },
    #[error("{addr}: no answer within {secs} s")]
    Deadline { addr: String, secs: u64 },
    #[error("{addr} answered {status}: {body}")]
    Refused {
        addr: String,
        status: String,
        body: String,
    },
}

/// PUTs `body` (a text exposition) to the group `job="prober"`, replacing what the last run
/// pushed there, all within `deadline`.
pub async fn push(url: &PushUrl, body: &str, deadline: Duration) -> Result<(), PushError> {
    let addr = format!("{}:{}", url.host, url.port);
    let secs = deadline.as_secs();
    tokio::time::timeout(deadline, push_now(url, body, &addr))
        .await
        .unwrap_or(Err(PushError::Deadline { addr, secs }))
}

async fn push_now(url: &PushUrl, body: &str, addr: &str) -> Result<(), PushError> {
    let mut addrs = tokio::net::lookup_host((url.host.as_str(), url.port))
        .await
        .map_err(|source| PushError::Resolve {
            host: url.host.clone(),
            source,
        })?;
    let target = addrs.next().ok_or_else(|| PushError::NoAddress {
        host: url.host.clone(),
    })?;
    let io = |source| PushError::Io {
        addr: addr.to_string(),
        source,
    };
    let mut stream = tokio::net::TcpStream::connect(target).await.map_err(io)?;
    let host = if url.host.contains(':') {
        format!("[{}]:{}", url.host, url.port)
    } else {
        addr.to_string()
    };
    let request = http1::request(
        "PUT",
        &url.path(),
        &[
            ("Host", &host),
            ("User-Agent", concat!("prober/", env!("CARGO_PKG_VERSION"))),
            ("Content-Type", "text/plain; version=0.0.4; charset=utf-8"),
            ("Content-Length", &body.len().to_string()),
            ("Connection", "close"),
        ],
    )
    .map_err(|source| PushError::Head {
        addr: addr.to_string(),
        source,
    })?;
    stream.write_all(&request).await.map_err(io)?;
    stream.write_all(body.as_bytes()).await.map_err(io)?;
    stream.flush().await.map_err(io)?;
    // The answer is a status line and a short body; more is not a Pushgateway.
    let mut answer = Vec::new();
    (&mut stream)
        .take(64 * 1024)
        .read_to_end(&mut answer)
        .await
        .map_err(io)?;
    if http1::status(&answer).is_some_and(|c| (200..300).contains(&c)) {
        return Ok(());
    }
    let status = http1::status_line(&answer).to_string();
    let body = String::from_utf8_lossy(http1::split(&answer).map_or(&[][..], |(_, b)| b))
        .trim()
        .chars()
        .take(300)
        .collect();
    Err(PushError::Refused {
        addr: addr.to_string(),
        status: if status.is_empty() {
            "nothing".into()
        } else {
            status
        },
        body,
    })
}

impl ExportArgs {
    /// After the report is printed: the push and the JSON log line. Returns the exit code: the
    /// report's, or 2 when the push failed on an otherwise clean run (a failed push is said on
    /// stderr either way, and never hides failures the run found).
    pub async fn finish(
        &self,
        command: &str,
        report: &Report,
        finished: u64,
        changes: Option<&Changes>,
    ) -> u8 {
        let mut code = report.summary.exit_code;
        let mut pushed = None;
        if let Some(url) = &self.pushgateway {
            let body = prober::report::prometheus::render(report, finished);
            let r = push(url, &body, self.pushgateway_timeout).await;
            if let Err(e) = &r {
                errln!("{command}: --pushgateway: {e}");
                if code == EXIT_OK {
                    code = EXIT_USAGE;
                }
            }
            pushed = Some(r.is_ok());
        }
        if self.log_format == LogFormat::Json {
            errln!(
                "{}",
                log_line(command, report, finished, changes, pushed, code)
            );
        }
        code
    }
}

/// The run's summary as one JSON object.
fn log_line(
    command: &str,
    report: &Report,
    finished: u64,
    changes: Option<&Changes>,
    pushed: Option<bool>,
    exit_code: u8,
) -> String {
    let s = &report.summary;
    let errors = report.error_findings();
    let mut kinds: Vec<String> = report
        .findings
        .iter()
        .map(|f| prober::report::kebab(f.kind()))
        .collect();
    kinds.dedup();
    let level = if exit_code == EXIT_OK {
        "info"
    } else {
        "warning"
    };
    serde_json::json!({
        "time": finished,
        "level": level,
        "msg": format!("{command}: {} of {} probes failed, {} findings", s.counts.failed,
                       s.counts.total, report.findings.len()),
        "nodes": s.nodes,
        "agents": s.agents,
        "agentsMissing": s.agents_missing,
        "probes": s.counts,
        "findings": {"error": errors, "warning": report.findings.len() - errors, "kinds": kinds},
        "durationMillis": s.duration_millis,
        "interrupted": s.interrupted,
        "changes": changes,
        // A sampled run's pairs and its turn of the rotation (`runs` turns cover every pair).
        "sample": report.sample,
        "pushed": pushed,
        "exitCode": exit_code,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushgateway_urls() {
        assert_eq!(
            push_url("http://127.0.0.1:9091").unwrap(),
            PushUrl {
                host: "127.0.0.1".into(),
                port: 9091,
                prefix: String::new()
            }
        );
        let u = push_url("http://pushgateway.monitoring.svc:9091/gw/").unwrap();
        assert_eq!(u.path(), "/gw/metrics/job/prober");
        assert_eq!(push_url("http://gw").unwrap().port, 80);
        assert_eq!(push_url("http://[::1]:9091").unwrap().host, "::1");
        assert!(push_url("https://gw:9091").unwrap_err().contains("https"));
        assert!(push_url("gw:9091").is_err());
        assert!(push_url("http://gw:x").is_err());
        assert!(push_url("http://user@gw:1").is_err());
        assert!(push_url("http://gw:0").is_err());
    }

    #[test]
    fn a_url_that_would_forge_headers_is_refused() {
        for bad in [
            "http://gw:9091/x\r\nX-Injected: 1",
            "http://gw:9091\r\nHost: evil",
            "http://gw\n:9091",
            "http://gw:9091/a b",
            "http://gw:9091/\u{e9}",
            "http://g\x00w:9091",
            "http://gw:9091/x?y=1",
            "http://g(w):9091",
        ] {
            let e = push_url(bad).unwrap_err();
            assert!(e.contains("URL") || e.contains("expected"), "{bad:?}: {e}");
        }
    }

    #[tokio::test]
    async fn a_silent_gateway_meets_the_deadline() {
        // Accepts and never answers.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let hold = tokio::spawn(async move {
            let conn = listener.accept().await;
            tokio::time::sleep(Duration::from_secs(30)).await;
            drop(conn);
        });
        let url = push_url(&format!("http://127.0.0.1:{port}")).unwrap();
        let started = std::time::Instant::now();
        let err = push(&url, "x 1\n", Duration::from_millis(300))
            .await
            .unwrap_err();
        assert!(matches!(err, PushError::Deadline { .. }), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
        hold.abort();
    }
}
