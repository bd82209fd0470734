//! The API-server probe: TCP, a TLS handshake that accepts any certificate but records whether it
//! verified against the given CA and name, then one HTTP GET, optionally with a bearer token.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, Mutex};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;
use tokio_rustls::TlsConnector;

use super::{Fail, micros, tcp};
use crate::proto::{Outcome, Probe, ProbeResult, TlsInfo};

const MAX_RESPONSE_HEAD: usize = 16 * 1024;

/// Accepts every certificate, but records what a verifying client would have concluded.
#[derive(Debug)]
struct RecordingVerifier {
    inner: Option<Arc<WebPkiServerVerifier>>,
    algorithms: WebPkiSupportedAlgorithms,
    verdict: Mutex<Option<Result<(), String>>>,
}

impl ServerCertVerifier for RecordingVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verdict = match &self.inner {
            None => Err("no CA bundle given".to_string()),
            Some(v) => v
                .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
                .map(|_| ())
                .map_err(|e| e.to_string()),
        };
        if let Ok(mut slot) = self.verdict.lock() {
            *slot = Some(verdict);
        }
        Ok(ServerCertVerified::assertion())
    }

    // Signatures are still checked: "any certificate" must not mean "any peer can forge the
    // handshake".
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// What to verify the server certificate against.
#[derive(Debug, Clone, Copy)]
pub enum Roots<'a> {
    None,
    File(&'a Path),
    /// PEM text, e.g. a kubeconfig's `certificate-authority-data`, decoded.
    Pem(&'a [u8]),
}

fn verifier(roots: Roots<'_>) -> Result<Arc<RecordingVerifier>, String> {
    let provider = provider();
    let (certs, source): (Vec<CertificateDer<'static>>, String) = match roots {
        Roots::None => (Vec::new(), String::new()),
        Roots::File(path) => {
            let source = format!("CA bundle {}", path.display());
            let iter = CertificateDer::pem_file_iter(path)
                .map_err(|e| format!("cannot read {source}: {e}"))?;
            (
                iter.collect::<Result<_, _>>()
                    .map_err(|e| format!("{source}: {e}"))?,
                source,
            )
        }
        Roots::Pem(pem) => {
            let source = "the embedded CA data".to_string();
            (
                CertificateDer::pem_slice_iter(pem)
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("{source}: {e}"))?,
                source,
            )
        }
    };
    let inner = if matches!(roots, Roots::None) {
        None
    } else {
        let mut store = RootCertStore::empty();
        for cert in certs {
            store.add(cert).map_err(|e| format!("{source}: {e}"))?;
        }
        if store.is_empty() {
            return Err(format!("{source} holds no certificate"));
        }
        Some(
            WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider.clone())
                .build()
                .map_err(|e| format!("{source}: {e}"))?,
        )
    };
    Ok(Arc::new(RecordingVerifier {
        inner,
        algorithms: provider.signature_verification_algorithms,
        verdict: Mutex::new(None),
    }))
}

fn read_token(path: &Path) -> Result<String, String> {
    let t = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read token file {}: {e}", path.display()))?;
    let t = t.trim().to_string();
    if t.is_empty() || t.contains(['\r', '\n', ' ']) {
        return Err(format!(
            "token file {} does not hold one token",
            path.display()
        ));
    }
    Ok(t)
}

/// The status code of an HTTP/1.x response head.
fn parse_status(head: &[u8]) -> Option<u16> {
    let line_end = head
        .iter()
        .position(|&b| b == b'\r' || b == b'\n')
        .unwrap_or(head.len());
    let line = std::str::from_utf8(&head[..line_end]).ok()?;
    let mut parts = line.split(' ');
    if !parts.next()?.starts_with("HTTP/1.") {
        return None;
    }
    parts.next()?.parse().ok()
}

/// Sends `request` and reads the response head (bounded).
async fn exchange<S: AsyncReadExt + AsyncWriteExt + Unpin>(
    tls: &mut S,
    request: &str,
) -> std::io::Result<Vec<u8>> {
    tls.write_all(request.as_bytes()).await?;
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    while head.len() < MAX_RESPONSE_HEAD && !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tls.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&chunk[..n]);
    }
    Ok(head)
}

/// Everything prepared locally before touching the network.
struct Prepared {
    sni: ServerName<'static>,
    token: Option<String>,
    verifier: Arc<RecordingVerifier>,
    config: ClientConfig,
}

fn prepare(name: &str, roots: Roots<'_>, token: Option<String>) -> Result<Prepared, String> {
    let sni = ServerName::try_from(name.to_string())
        .map_err(|_| format!("{name:?} is not a valid server name"))?;
    let verifier = verifier(roots)?;
    let config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(verifier.clone())
        .with_no_client_auth();
    Ok(Prepared {
        sni,
        token,
        verifier,
        config,
    })
}

fn http_request(path: &str, host: &str, token: Option<&str>) -> String {
    let mut request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: probe-pod/{}\r\n\
         Accept: application/json\r\nConnection: close\r\n",
        env!("CARGO_PKG_VERSION")
    );
    if let Some(t) = token {
        request.push_str("Authorization: Bearer ");
        request.push_str(t);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    request
}

/// 2xx, 401 and 403 all prove the API server answered; 401 to a token under test is the token's
/// failure, not the path's.
fn judge_status(status: u16, with_token: bool) -> Outcome {
    match status {
        401 if with_token => Outcome::Unauthorized,
        200..=299 | 401 | 403 => Outcome::Ok,
        _ => Outcome::HttpError,
    }
}

pub async fn probe(id: &str, probe: &Probe, deadline: Instant) -> ProbeResult {
    let Probe::Tls {
        address,
        port,
        server_name,
        ca_file,
        require_verified,
        path,
        token_file,
    } = probe
    else {
        unreachable!("dispatched by kind");
    };
    let addr = SocketAddr::new(*address, port.get());
    let token = match token_file.as_deref().map(read_token).transpose() {
        Ok(t) => t,
        Err(e) => {
            return Fail::Local(e).into_result(
                id,
                &format!("tls {addr}"),
                std::time::Duration::ZERO,
            );
        }
    };
    let roots = ca_file.as_deref().map_or(Roots::None, Roots::File);
    let req = Request {
        addr,
        server_name: server_name.clone(),
        roots,
        require_verified: *require_verified,
        path,
        token,
    };
    request(id, req, deadline).await
}

/// One TLS request: where, what to trust, what to ask, with which bearer token.
pub struct Request<'a> {
    pub addr: SocketAddr,
    pub server_name: Option<String>,
    pub roots: Roots<'a>,
    pub require_verified: bool,
    pub path: &'a str,
    /// Sent, never reported.
    pub token: Option<String>,
}

/// Connects, shakes hands, sends one GET and judges the answer.
pub async fn request(id: &str, req: Request<'_>, deadline: Instant) -> ProbeResult {
    let Request {
        addr,
        server_name,
        roots,
        require_verified,
        path,
        token,
    } = req;
    let address = addr.ip();
    let start = Instant::now();
    let what = format!("tls {addr}");
    let name = server_name.clone().unwrap_or_else(|| address.to_string());
    let prep = match prepare(&name, roots, token) {
        Ok(p) => p,
        Err(e) => return Fail::Local(e).into_result(id, &what, start.elapsed()),
    };
    let (tcp, _) = match tcp::connect(addr, deadline).await {
        Ok(s) => s,
        Err(f) => return f.into_result(id, &format!("{what}: tcp connect"), start.elapsed()),
    };
    let handshake = TlsConnector::from(Arc::new(prep.config)).connect(prep.sni, tcp);
    let mut tls = match tokio::time::timeout_at(deadline, handshake).await {
        Err(_) => {
            let step = format!("{what}: tls handshake");
            return Fail::Timeout.into_result(id, &step, start.elapsed());
        }
        Ok(Err(e)) => {
            let detail = format!("{what}: handshake failed: {e}");
            return ProbeResult::new(id, Outcome::TlsError, detail);
        }
        Ok(Ok(s)) => s,
    };
    let verdict = prep.verifier.verdict.lock().ok().and_then(|mut v| v.take());
    let info = TlsInfo {
        verified: matches!(verdict, Some(Ok(()))),
        verify_error: match verdict {
            Some(Err(e)) => Some(e),
            Some(Ok(())) => None,
            None => Some("no certificate presented".into()),
        },
        version: tls.get_ref().1.protocol_version().map(|v| format!("{v:?}")),
    };
    if require_verified && !info.verified {
        let why = info.verify_error.clone().unwrap_or_default();
        let mut r = ProbeResult::new(
            id,
            Outcome::TlsError,
            format!("{what}: certificate not trusted: {why}"),
        );
        r.tls = Some(info);
        return r;
    }
    let host = match address {
        IpAddr::V6(a) if server_name.is_none() => format!("[{a}]"),
        _ => name,
    };
    let request = http_request(path, &host, prep.token.as_deref());
    let get = format!("{what}: GET {path}");
    let mut r = match tokio::time::timeout_at(deadline, exchange(&mut tls, &request)).await {
        Err(_) => Fail::Timeout.into_result(id, &get, start.elapsed()),
        Ok(Err(e)) => ProbeResult::new(id, Outcome::HttpError, format!("{get}: {e}")),
        Ok(Ok(head)) => match parse_status(&head) {
            None => ProbeResult::new(
                id,
                Outcome::HttpError,
                format!("{get}: not an HTTP response"),
            ),
            Some(status) => {
                let with_token = prep.token.is_some();
                let auth = if with_token { " with token" } else { "" };
                let detail = format!("{get}{auth}: HTTP {status}");
                let mut r = ProbeResult::new(id, judge_status(status, with_token), detail);
                r.http_status = Some(status);
                r.rtt_micros = Some(micros(start.elapsed()));
                r
            }
        },
    };
    r.tls = Some(info);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines() {
        assert_eq!(parse_status(b"HTTP/1.1 200 OK\r\n\r\n"), Some(200));
        assert_eq!(parse_status(b"HTTP/1.0 401 Unauthorized\r\n"), Some(401));
        assert_eq!(parse_status(b"SSH-2.0-OpenSSH\r\n"), None);
        assert_eq!(parse_status(b""), None);
        assert_eq!(parse_status(b"HTTP/1.1 abc"), None);
    }

    #[test]
    fn statuses_judged() {
        assert_eq!(judge_status(200, false), Outcome::Ok);
        assert_eq!(judge_status(403, true), Outcome::Ok);
        assert_eq!(judge_status(401, false), Outcome::Ok);
        assert_eq!(judge_status(401, true), Outcome::Unauthorized);
        assert_eq!(judge_status(500, false), Outcome::HttpError);
        assert_eq!(judge_status(302, false), Outcome::HttpError);
    }

    #[test]
    fn token_file_must_hold_one_token() {
        let dir = std::env::temp_dir().join(format!("probe-pod-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good");
        std::fs::write(&good, "abc.def.ghi\n").unwrap();
        assert_eq!(read_token(&good).unwrap(), "abc.def.ghi");
        let bad = dir.join("bad");
        std::fs::write(&bad, "two tokens\n").unwrap();
        let err = read_token(&bad).unwrap_err();
        assert!(!err.contains("tokens"), "must not echo file content: {err}");
        assert!(
            read_token(&dir.join("missing"))
                .unwrap_err()
                .contains("missing")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
