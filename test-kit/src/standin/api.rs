//! The HTTPS front: TLS, authentication by bearer token, routing of `/api/v1/...` and
//! `/apis/GROUP/VERSION/...`, RBAC, and the verbs: get, list (paginated), watch, create,
//! server-side apply, merge patch, delete (with preconditions), and the `exec` upgrade.
//! Errors are `Status` objects with the codes and reasons the real server uses. This module
//! serves the connections; the steps of a request have modules of their own.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::UnsyncBoxBody};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;

use super::{Inner, Seen, lock};

mod auth;
mod create;
mod dispatch;
mod read;
mod route;
mod status;
mod write;

pub use create::{create, create_object};
pub use read::selected;
pub use route::{Query, Route, param};
pub use status::Status;

pub type Body = UnsyncBoxBody<Bytes, Infallible>;

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed_unsync()
}

pub fn json_response(code: u16, v: &Value) -> Response<Body> {
    let mut r = Response::new(full(v.to_string()));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

pub fn tls_config(pki: &super::pki::Pki) -> Result<Arc<rustls::ServerConfig>, rustls::Error> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let bad = |e: rustls::pki_types::pem::Error| rustls::Error::General(e.to_string());
    let certs = CertificateDer::pem_slice_iter(pki.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(bad)?;
    let key = PrivateKeyDer::from_pem_slice(pki.key_pem.as_bytes()).map_err(bad)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Accepts TLS connections until the runtime stops.
pub async fn serve(
    inner: Arc<Inner>,
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let acceptor = acceptor.clone();
        let inner = inner.clone();
        tokio::spawn(async move {
            let Ok(Ok(stream)) =
                tokio::time::timeout(std::time::Duration::from_secs(10), acceptor.accept(tcp))
                    .await
            else {
                return;
            };
            let service = hyper::service::service_fn(move |req| handle(inner.clone(), req));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades()
                .await;
        });
    }
}

async fn handle(inner: Arc<Inner>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or_default().to_string();
    let resp = match dispatch::dispatch(&inner, req).await {
        Ok(r) => r,
        Err(s) => s.response(),
    };
    lock(&inner.seen).push(Seen {
        method,
        path,
        query,
        code: resp.status().as_u16(),
        at: std::time::Instant::now(),
    });
    Ok(resp)
}
