//! The API-server probe: TCP, a TLS handshake, then one HTTP GET, optionally with a credential.
//! Without a credential any certificate is accepted and whether it verified is recorded (the
//! probe asks "does the path work", not "is this the real server"). With a credential the
//! handshake itself fails unless the server verifies against the CA given, so no secret ever goes
//! to an impostor; only an explicit insecure-skip from a kubeconfig waives that.

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
use crate::files;
use crate::proto::{self, Outcome, ProbeResult, TlsInfo, http1};

const MAX_RESPONSE_HEAD: usize = 16 * 1024;

/// What a verifying client concluded about the server's certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Verified,
    /// The chain does not lead to the CA given (another CA signed it, or it is self-signed).
    WrongIssuer(String),
    /// Signed by the CA, but issued for another name.
    WrongName(String),
    /// Signed by the CA, but expired or not yet valid.
    Expired(String),
    /// Any other reason (revoked, bad encoding, unsupported algorithm, no CA given).
    Other(String),
}

impl Verdict {
    fn of(e: &rustls::Error) -> Self {
        use rustls::CertificateError as C;
        let text = e.to_string();
        match e {
            rustls::Error::InvalidCertificate(c) => match c {
                C::UnknownIssuer | C::BadSignature | C::UnhandledCriticalExtension => {
                    Self::WrongIssuer(text)
                }
                C::NotValidForName | C::NotValidForNameContext { .. } => Self::WrongName(text),
                C::Expired
                | C::ExpiredContext { .. }
                | C::NotValidYet
                | C::NotValidYetContext { .. } => Self::Expired(text),
                _ => Self::Other(text),
            },
            _ => Self::Other(text),
        }
    }

    #[must_use]
    pub fn is_verified(&self) -> bool {
        *self == Self::Verified
    }

    /// Why it did not verify, or `None` when it did.
    #[must_use]
    pub fn error(&self) -> Option<&str> {
        match self {
            Self::Verified => None,
            Self::WrongIssuer(t) | Self::WrongName(t) | Self::Expired(t) | Self::Other(t) => {
                Some(t)
            }
        }
    }
}

/// Records what a verifying client would conclude; refuses the handshake too when `enforce`.
#[derive(Debug)]
struct RecordingVerifier {
    inner: Option<Arc<WebPkiServerVerifier>>,
    algorithms: WebPkiSupportedAlgorithms,
    enforce: bool,
    verdict: Mutex<Option<Verdict>>,
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
        let checked = match &self.inner {
            None => Err(rustls::Error::General("no CA bundle given".into())),
            Some(v) => v
                .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
                .map(|_| ()),
        };
        let verdict = match &checked {
            Ok(()) => Verdict::Verified,
            Err(rustls::Error::General(t)) => Verdict::Other(t.clone()),
            Err(e) => Verdict::of(e),
        };
        if let Ok(mut slot) = self.verdict.lock() {
            *slot = Some(verdict);
        }
        match checked {
            Err(e) if self.enforce => Err(e),
            _ => Ok(ServerCertVerified::assertion()),
        }
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
    /// PEM text, e.g. a kubeconfig's `certificate-authority-data`, decoded; `name` says where it
    /// came from.
    Pem {
        pem: &'a [u8],
        name: &'a str,
    },
}

/// A bearer token: never printed, never compared in the clear outside this process.
pub struct Secret(String);

impl Secret {
    /// Wraps a token after checking it can go into an HTTP header as it is: a line break or a
    /// space would let a file's content forge headers.
    pub fn new(token: String) -> Result<Self, &'static str> {
        if token.is_empty() {
            return Err("the token is empty");
        }
        // RFC 6750 b64token characters.
        let ok = |b: u8| b.is_ascii_alphanumeric() || b"-._~+/=".contains(&b);
        if !token.bytes().all(ok) {
            return Err("the token holds characters a bearer token cannot hold");
        }
        Ok(Self(token))
    }

    fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// A client certificate chain and its key, presented in the handshake.
pub struct ClientAuth {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: rustls::pki_types::PrivateKeyDer<'static>,
}

impl std::fmt::Debug for ClientAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ClientAuth({} certificate(s), key redacted)",
            self.chain.len()
        )
    }
}

/// A PEM document that holds no usable certificate or key. The messages name the document and
/// never quote its text (PEM parser errors can carry a line of the input).
#[derive(Debug, thiserror::Error)]
pub enum PemError {
    #[error("{name} is not a valid PEM certificate bundle")]
    InvalidBundle { name: String },
    #[error("{name} holds no certificate")]
    NoCertificate { name: String },
    #[error("{name} holds no valid PEM private key")]
    NoPrivateKey { name: String },
}

/// The certificates in a PEM bundle.
pub fn pem_certificates(pem: &[u8], name: &str) -> Result<Vec<CertificateDer<'static>>, PemError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| PemError::InvalidBundle { name: name.into() })?;
    if certs.is_empty() {
        return Err(PemError::NoCertificate { name: name.into() });
    }
    Ok(certs)
}

/// The private key in a PEM document.
pub fn pem_private_key(
    pem: &[u8],
    name: &str,
) -> Result<rustls::pki_types::PrivateKeyDer<'static>, PemError> {
    rustls::pki_types::PrivateKeyDer::from_pem_slice(pem)
        .map_err(|_| PemError::NoPrivateKey { name: name.into() })
}

fn verifier(roots: Roots<'_>, enforce: bool) -> Result<Arc<RecordingVerifier>, String> {
    let provider = provider();
    let (certs, source) = match roots {
        Roots::None => (Vec::new(), String::new()),
        Roots::File(path) => {
            let source = format!("CA bundle {}", path.display());
            let pem = files::read_capped(path, files::MAX_PEM, "CA bundle", path.display())
                .map_err(|e| e.to_string())?;
            (
                pem_certificates(&pem, &source).map_err(|e| e.to_string())?,
                source,
            )
        }
        Roots::Pem { pem, name } => (
            pem_certificates(pem, name).map_err(|e| e.to_string())?,
            name.to_string(),
        ),
    };
    let inner = if matches!(roots, Roots::None) {
        None
    } else {
        let mut store = RootCertStore::empty();
        for cert in certs {
            store
                .add(cert)
                .map_err(|e| format!("{source}: a certificate is unusable: {e}"))?;
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
        enforce,
        verdict: Mutex::new(None),
    }))
}

/// A `tokenFile` that cannot be sent: unreadable, not text, or not one bearer token. The
/// messages name the file, never its content.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    #[error(transparent)]
    Read(#[from] files::ReadError),
    #[error("token file {} is not text", path.display())]
    NotText { path: std::path::PathBuf },
    #[error("token file {} does not hold one token: {why}", path.display())]
    NotOneToken {
        path: std::path::PathBuf,
        why: &'static str,
    },
}

fn read_token(path: &Path) -> Result<Secret, TokenFileError> {
    let bytes = files::read_capped(path, files::MAX_TOKEN, "token file", path.display())?;
    let text =
        String::from_utf8(bytes).map_err(|_| TokenFileError::NotText { path: path.into() })?;
    Secret::new(text.trim().to_string()).map_err(|why| TokenFileError::NotOneToken {
        path: path.into(),
        why,
    })
}

/// Sends `request` and reads the response head (bounded).
async fn exchange<S: AsyncReadExt + AsyncWriteExt + Unpin>(
    tls: &mut S,
    request: &[u8],
) -> std::io::Result<Vec<u8>> {
    tls.write_all(request).await?;
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    while head.len() < MAX_RESPONSE_HEAD && http1::head_end(&head).is_none() {
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
    verifier: Arc<RecordingVerifier>,
    config: ClientConfig,
}

fn prepare(
    name: &str,
    roots: Roots<'_>,
    enforce: bool,
    client: Option<ClientAuth>,
) -> Result<Prepared, String> {
    let sni = ServerName::try_from(name.to_string())
        .map_err(|_| format!("{name:?} is not a valid server name"))?;
    let verifier = verifier(roots, enforce)?;
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(verifier.clone());
    let config = match client {
        None => builder.with_no_client_auth(),
        Some(c) => builder
            .with_client_auth_cert(c.chain, c.key)
            .map_err(|_| "the client certificate and key do not form a usable pair".to_string())?,
    };
    Ok(Prepared {
        sni,
        verifier,
        config,
    })
}

fn http_request(
    path: &str,
    host: &str,
    token: Option<&Secret>,
) -> Result<Vec<u8>, http1::HeadError> {
    let agent = format!("probe-pod/{}", env!("CARGO_PKG_VERSION"));
    let mut headers = vec![
        ("Host", host),
        ("User-Agent", agent.as_str()),
        ("Accept", "application/json"),
        ("Connection", "close"),
    ];
    let bearer = token.map(|t| format!("Bearer {}", t.expose()));
    if let Some(b) = &bearer {
        headers.push(("Authorization", b));
    }
    http1::request("GET", path, &headers)
}

/// 2xx, 401 and 403 all prove the API server answered; 401 to a credential under test is the
/// credential's failure, not the path's.
fn judge_status(status: u16, with_credential: bool) -> Outcome {
    match status {
        401 if with_credential => Outcome::Unauthorized,
        200..=299 | 401 | 403 => Outcome::Ok,
        _ => Outcome::HttpError,
    }
}

pub async fn probe(id: &str, probe: &proto::TlsProbe, deadline: Instant) -> ProbeResult {
    let proto::TlsProbe {
        address,
        port,
        server_name,
        ca_file,
        require_verified,
        path,
        token_file,
    } = probe;
    let addr = SocketAddr::new(*address, port.get());
    let what = format!("tls {addr}");
    let token = match token_file.as_deref().map(read_token).transpose() {
        Ok(t) => t,
        Err(e) => {
            return Fail::Local(e.to_string()).into_result(id, &what, std::time::Duration::ZERO);
        }
    };
    if token.is_some() && ca_file.is_none() {
        let why = "a tokenFile is only sent to a server verified against a caFile, and none is given; nothing was sent";
        return Fail::Local(why.into()).into_result(id, &what, std::time::Duration::ZERO);
    }
    let roots = ca_file.as_deref().map_or(Roots::None, Roots::File);
    let verify = if *require_verified || token.is_some() {
        Verify::Require
    } else {
        Verify::Record
    };
    let req = Request {
        addr,
        server_name: server_name.clone(),
        roots,
        verify,
        path,
        token,
        client: None,
    };
    request(id, req, deadline).await.result
}

/// How much the server must prove before the request goes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verify {
    /// Accept any certificate and record whether it verified: a reachability probe, no secret.
    Record,
    /// The handshake fails unless the certificate verifies: before any credential is sent. There
    /// is no way to send one to an unverified server, not even for a kubeconfig that says
    /// `insecure-skip-tls-verify`: whoever answers there would get it.
    Require,
}

/// One TLS request: where, what to trust, what to ask, with which credential.
pub struct Request<'a> {
    pub addr: SocketAddr,
    pub server_name: Option<String>,
    pub roots: Roots<'a>,
    pub verify: Verify,
    pub path: &'a str,
    /// Sent only once the server passed `verify`; never reported.
    pub token: Option<Secret>,
    pub client: Option<ClientAuth>,
}

/// What one request came to.
#[derive(Debug)]
pub struct Exchanged {
    pub result: ProbeResult,
    /// What the certificate check concluded, when the server presented one.
    pub verdict: Option<Verdict>,
    /// Whether the HTTP request (with the credential, if any) was written.
    pub sent: bool,
}

/// Connects, shakes hands, sends one GET and judges the answer.
#[allow(clippy::too_many_lines)] // one straight sequence of steps, each with its own failure
pub async fn request(id: &str, req: Request<'_>, deadline: Instant) -> Exchanged {
    let Request {
        addr,
        server_name,
        roots,
        verify,
        path,
        token,
        client,
    } = req;
    let done = |result: ProbeResult, verdict: Option<Verdict>| Exchanged {
        result,
        verdict,
        sent: false,
    };
    let address = addr.ip();
    let start = Instant::now();
    let what = format!("tls {addr}");
    let name = server_name.clone().unwrap_or_else(|| address.to_string());
    if verify == Verify::Require && matches!(roots, Roots::None) {
        let why = "no CA to verify the server against; nothing was sent";
        return done(
            Fail::Local(why.into()).into_result(id, &what, start.elapsed()),
            None,
        );
    }
    let with_credential = token.is_some() || client.is_some();
    let prep = match prepare(&name, roots, verify == Verify::Require, client) {
        Ok(p) => p,
        Err(e) => return done(Fail::Local(e).into_result(id, &what, start.elapsed()), None),
    };
    let (tcp, _) = match tcp::connect(addr, deadline).await {
        Ok(s) => s,
        Err(f) => {
            let r = f.into_result(id, &format!("{what}: tcp connect"), start.elapsed());
            return done(r, None);
        }
    };
    let handshake = TlsConnector::from(Arc::new(prep.config)).connect(prep.sni, tcp);
    let outcome = tokio::time::timeout_at(deadline, handshake).await;
    let verdict = prep.verifier.verdict.lock().ok().and_then(|mut v| v.take());
    let info = |verdict: Option<&Verdict>, version: Option<String>| TlsInfo {
        verified: verdict.is_some_and(Verdict::is_verified),
        verify_error: match verdict {
            Some(v) => v.error().map(String::from),
            None => Some("no certificate presented".into()),
        },
        version,
        clock_skew_ms: None,
    };
    let mut tls = match outcome {
        Err(_) => {
            let step = format!("{what}: tls handshake");
            return done(
                Fail::Timeout.into_result(id, &step, start.elapsed()),
                verdict,
            );
        }
        Ok(Err(e)) => {
            let refused =
                verify == Verify::Require && verdict.as_ref().is_some_and(|v| !v.is_verified());
            let detail = if refused {
                let why = verdict
                    .as_ref()
                    .and_then(Verdict::error)
                    .unwrap_or_default();
                format!("{what}: certificate not trusted: {why}; nothing was sent")
            } else {
                format!("{what}: handshake failed: {e}")
            };
            let mut r = ProbeResult::new(id, Outcome::TlsError, detail);
            r.tls = Some(Box::new(info(verdict.as_ref(), None)));
            return done(r, verdict);
        }
        Ok(Ok(s)) => s,
    };
    let mut tls_info = info(
        verdict.as_ref(),
        tls.get_ref().1.protocol_version().map(|v| format!("{v:?}")),
    );
    let host = match address {
        IpAddr::V6(a) if server_name.is_none() => format!("[{a}]"),
        _ => name,
    };
    let request = http_request(path, &host, token.as_ref());
    drop(token);
    let get = format!("{what}: GET {path}");
    let request = match request {
        Ok(r) => r,
        Err(e) => {
            return done(
                ProbeResult::new(id, Outcome::Error, format!("{get}: {e}")),
                verdict,
            );
        }
    };
    let mut r = match tokio::time::timeout_at(deadline, exchange(&mut tls, &request)).await {
        Err(_) => Fail::Timeout.into_result(id, &get, start.elapsed()),
        Ok(Err(e)) => ProbeResult::new(id, Outcome::HttpError, format!("{get}: {e}")),
        Ok(Ok(head)) => match http1::status(&head) {
            None => ProbeResult::new(
                id,
                Outcome::HttpError,
                format!("{get}: not an HTTP response"),
            ),
            Some(status) => {
                let auth = if with_credential {
                    " with credential"
                } else {
                    ""
                };
                let detail = format!("{get}{auth}: HTTP {status}");
                let mut r = ProbeResult::new(id, judge_status(status, with_credential), detail);
                r.http_status = Some(status);
                tls_info.clock_skew_ms =
                    super::httpdate::skew_ms(&head, crate::proto::util::unix_ms());
                r.rtt_micros = Some(micros(start.elapsed()));
                r
            }
        },
    };
    r.tls = Some(Box::new(tls_info));
    Exchanged {
        result: r,
        verdict,
        sent: true,
    }
}

#[cfg(test)]
mod tests;
