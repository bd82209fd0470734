//! The API server stand-in: a real TLS server answering `/livez`, `/readyz`, `/healthz`, `/version`
//! like kube-apiserver, and 401 to bearer tokens that are not on its allow-list or have expired.
//! Its `Date` header may run ahead or behind (`--clock-skew`): the lab's hosts share one clock,
//! so a joining node's skewed clock is played by a skewed server.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use probe_proto::http1;

use super::pki::expiry;

const MAX_HEAD: usize = 16 * 1024;
const READ_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum ApiServerError {
    #[error(transparent)]
    Read(#[from] probe_proto::files::ReadError),
    #[error("cannot read {what} {path}: {message}")]
    Load {
        what: &'static str,
        path: String,
        message: String,
    },
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("TLS configuration: {0}")]
    Tls(String),
}

/// How a request is answered: status line and JSON body.
#[must_use]
pub fn respond<S: std::hash::BuildHasher>(
    path: &str,
    bearer: Option<&str>,
    tokens: &HashSet<String, S>,
    now: u64,
) -> (u16, String) {
    let path = path.split('?').next().unwrap_or("/");
    let authenticated = match bearer {
        None => false,
        Some(t) if !tokens.contains(t) => return unauthorized(),
        Some(t) if expiry(t).is_some_and(|exp| exp <= now) => return unauthorized(),
        Some(_) => true,
    };
    match path {
        "/livez" | "/readyz" | "/healthz" => (200, "ok".into()),
        "/version" => (
            200,
            serde_json::json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0-prober-lab", "platform": "linux/amd64"}).to_string(),
        ),
        _ if authenticated => (200, serde_json::json!({"kind": "APIResourceList", "groupVersion": "v1", "resources": []}).to_string()),
        _ => (
            403,
            serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
                "message": format!("forbidden: User \"system:anonymous\" cannot get path \"{path}\"")})
            .to_string(),
        ),
    }
}

fn unauthorized() -> (u16, String) {
    (401, serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Unauthorized", "code": 401, "message": "Unauthorized"}).to_string())
}

/// The largest certificate, key or token allow-list read: a lab's are a few KiB.
const MAX_INPUT_BYTES: u64 = 1 << 20;

fn load(
    cert: &Path,
    key: &Path,
    tokens: &Path,
) -> Result<(rustls::ServerConfig, HashSet<String>), ApiServerError> {
    let load_err = |what, path: &Path, e: &dyn std::fmt::Display| ApiServerError::Load {
        what,
        path: path.display().to_string(),
        message: e.to_string(),
    };
    // Paths from the command line: each read once, capped, so a device or a huge file fails
    // at once naming it.
    let read = |what, path: &Path| {
        probe_proto::files::read_text_capped(path, MAX_INPUT_BYTES, what, path.display())
    };
    let cert_pem = read("certificate", cert)?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| load_err("certificate", cert, &e))?;
    let key = PrivateKeyDer::from_pem_slice(read("key", key)?.as_bytes())
        .map_err(|e| load_err("key", key, &e))?;
    let text = read("token allow-list", tokens)?;
    let allowed = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| ApiServerError::Tls(e.to_string()))?
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .map_err(|e| ApiServerError::Tls(e.to_string()))?;
    Ok((config, allowed))
}

/// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), as an HTTP `Date` header carries it.
#[must_use]
pub fn http_date(secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    // `utc` writes `YYYY-MM-DD HH:MM UTC`; the seconds and the weekday are added here.
    let day = crate::model::time::utc(secs);
    let (y, m, d) = (&day[0..4], &day[5..7], &day[8..10]);
    let month = m.parse::<usize>().map_or("Jan", |m| MONTHS[(m + 11) % 12]);
    let rem = secs % 86_400;
    format!(
        "{}, {d} {month} {y} {:02}:{:02}:{:02} GMT",
        DAYS[usize::try_from(secs / 86_400 % 7).unwrap_or(0)],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Serves forever; its `Date` header is `skew_secs` off the host's clock.
pub async fn serve(
    listen: SocketAddr,
    cert: &Path,
    key: &Path,
    tokens: &Path,
    skew_secs: i64,
) -> Result<(), ApiServerError> {
    let (config, allowed) = load(cert, key, tokens)?;
    let allowed = Arc::new(allowed);
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|source| ApiServerError::Listen {
            addr: listen,
            source,
        })?;
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let acceptor = acceptor.clone();
        let allowed = allowed.clone();
        tokio::spawn(async move {
            let work = async {
                let mut tls = acceptor.accept(tcp).await?;
                answer(&mut tls, &allowed, skew_secs).await
            };
            let _ = tokio::time::timeout(READ_TIMEOUT, work).await;
        });
    }
}

async fn answer<S: AsyncReadExt + AsyncWriteExt + Unpin>(
    s: &mut S,
    allowed: &HashSet<String>,
    skew_secs: i64,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; MAX_HEAD];
    let mut len = 0;
    while http1::head_end(&buf[..len]).is_none() {
        if len == MAX_HEAD {
            return Ok(());
        }
        let n = s.read(&mut buf[len..]).await?;
        if n == 0 {
            return Ok(());
        }
        len += n;
    }
    let head = String::from_utf8_lossy(&buf[..len]);
    let path = http1::request_line(&buf[..len]).map_or("/", |l| l.target);
    let bearer = http1::header(&head, "authorization")
        .and_then(|v| v.strip_prefix("Bearer ").map(str::trim));
    let now = probe_proto::util::unix_secs();
    let (status, body) = respond(path, bearer, allowed, now);
    let date = http_date(now.saturating_add_signed(skew_secs));
    let mut response = http1::response(
        status,
        &[
            ("Date", &date),
            ("Content-Type", "application/json"),
            ("Content-Length", &body.len().to_string()),
            ("Connection", "close"),
        ],
    )
    .map_err(std::io::Error::other)?;
    response.extend_from_slice(body.as_bytes());
    s.write_all(&response).await?;
    s.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::pki::{TokenClaims, token};

    #[test]
    fn a_device_or_huge_input_is_refused_naming_it() {
        let zero = Path::new("/dev/zero");
        let err = load(zero, zero, zero).unwrap_err().to_string();
        assert!(
            err.contains("certificate /dev/zero") && err.contains("not a regular file"),
            "{err}"
        );
        let tmp = tempfile::tempdir().unwrap();
        let huge = tmp.path().join("tokens");
        std::fs::File::create(&huge)
            .unwrap()
            .set_len(MAX_INPUT_BYTES + 1)
            .unwrap();
        let err = load(&huge, zero, zero).unwrap_err().to_string();
        assert!(err.contains("larger than"), "{err}");
    }

    #[test]
    fn the_date_header_is_an_imf_fixdate() {
        assert_eq!(http_date(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(http_date(1_796_061_600), "Mon, 30 Nov 2026 18:00:00 GMT");
    }

    #[test]
    fn answers_like_kube_apiserver() {
        let fresh = token(
            &TokenClaims {
                namespace: "kube-system",
                service_account: "a",
                issued_at: 0,
                expires_at: 2000,
            },
            b"k",
        );
        let expired = token(
            &TokenClaims {
                namespace: "kube-system",
                service_account: "a",
                issued_at: 0,
                expires_at: 500,
            },
            b"k",
        );
        let allowed: HashSet<String> = [fresh.clone(), expired.clone()].into();
        assert_eq!(respond("/livez", None, &allowed, 1000).0, 200);
        assert_eq!(respond("/livez", Some(&fresh), &allowed, 1000).0, 200);
        assert_eq!(
            respond("/livez", Some("eyJ.unknown.x"), &allowed, 1000).0,
            401,
            "invalid tokens fail even on /livez"
        );
        assert_eq!(
            respond("/api", Some(&expired), &allowed, 1000).0,
            401,
            "expired"
        );
        assert_eq!(respond("/api", Some(&fresh), &allowed, 1000).0, 200);
        assert_eq!(respond("/api", None, &allowed, 1000).0, 403, "anonymous");
        let (code, body) = respond("/version", None, &allowed, 1000);
        assert_eq!(code, 200);
        assert!(body.contains("gitVersion"));
    }
}
