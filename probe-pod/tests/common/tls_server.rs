//! A real TLS server (rustls) standing in for the API server inside a test namespace: `/livez` is
//! open, a bearer token must be on the allow-list or gets 401. It records every request head it
//! receives, so tests can prove what was (never) sent to it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair, SanType};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;

pub const GOOD_TOKEN: &str = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ0ZXN0In0.c2lnbmF0dXJl";

/// A CA and a leaf certificate for `apiserver.test` and the given IP, written as PEM files.
pub struct Pki {
    pub dir: PathBuf,
    pub ca_file: PathBuf,
    pub ca_pem: String,
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
    /// A client certificate signed by the same CA, and its key (PEM).
    pub client_cert_pem: String,
    pub client_key_pem: String,
}

pub fn pki(dir: &Path, ip: std::net::IpAddr) -> Pki {
    std::fs::create_dir_all(dir).unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let mut leaf_params = CertificateParams::new(vec!["apiserver.test".to_string()]).unwrap();
    leaf_params.subject_alt_names.push(SanType::IpAddress(ip));
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = leaf_params.signed_by(&leaf_key, &ca).unwrap();
    let mut client_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    client_params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let client_key = KeyPair::generate().unwrap();
    let client = client_params.signed_by(&client_key, &ca).unwrap();
    let ca_file = dir.join("ca.crt");
    std::fs::write(&ca_file, ca.pem()).unwrap();
    Pki {
        dir: dir.to_path_buf(),
        ca_file,
        ca_pem: ca.pem(),
        chain: vec![leaf.der().clone()],
        key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
        client_cert_pem: client.pem(),
        client_key_pem: client_key.serialize_pem(),
    }
}

/// Runs in its own thread, inside the namespace at `netns`, until dropped.
pub struct TlsServer {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    received: Arc<Mutex<Vec<Received>>>,
}

/// One request that reached the server over TLS.
#[derive(Debug, Clone)]
pub struct Received {
    pub head: String,
    /// The client presented a certificate (verified against the server's CA).
    pub client_certificate: bool,
}

impl TlsServer {
    pub fn start(netns: &Path, addr: SocketAddr, pki: &Pki) -> Self {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        // Client certificates are optional, and verified against the same CA when presented.
        let mut roots = rustls::RootCertStore::empty();
        for c in rustls::pki_types::CertificateDer::pem_slice_iter(pki.ca_pem.as_bytes()) {
            roots.add(c.unwrap()).unwrap();
        }
        let clients = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .allow_unauthenticated()
        .build()
        .unwrap();
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(clients)
            .with_single_cert(pki.chain.clone(), pki.key.clone_key())
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let ns = std::fs::File::open(netns).unwrap();
        let (stop_tx, stop_rx) = oneshot::channel();
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = received.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind(addr).await.expect("bind tls");
                ready_tx.send(()).unwrap();
                let serve = async {
                    loop {
                        let (tcp, _) = listener.accept().await.unwrap();
                        let acceptor = acceptor.clone();
                        let log = log.clone();
                        tokio::spawn(async move {
                            if let Ok(mut tls) = acceptor.accept(tcp).await {
                                let _ = answer(&mut tls, &log).await;
                            }
                        });
                    }
                };
                tokio::select! {
                    () = serve => {}
                    _ = stop_rx => {}
                }
            });
        });
        ready_rx.recv().expect("tls server started");
        Self {
            stop: Some(stop_tx),
            thread: Some(thread),
            received,
        }
    }

    /// Every request head received so far.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

async fn answer<IO>(
    s: &mut tokio_rustls::server::TlsStream<IO>,
    log: &Mutex<Vec<Received>>,
) -> std::io::Result<()>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; 4096];
    let mut len = 0;
    while !buf[..len].windows(4).any(|w| w == b"\r\n\r\n") && len < buf.len() {
        let n = s.read(&mut buf[len..]).await?;
        if n == 0 {
            return Ok(());
        }
        len += n;
    }
    let head = String::from_utf8_lossy(&buf[..len]).to_string();
    log.lock().unwrap().push(Received {
        head: head.clone(),
        client_certificate: s
            .get_ref()
            .1
            .peer_certificates()
            .is_some_and(|c| !c.is_empty()),
    });
    let bearer = head
        .lines()
        .find_map(|l| l.strip_prefix("Authorization: Bearer "))
        .map(str::trim);
    let (status, body) = match bearer {
        Some(t) if t != GOOD_TOKEN => ("401 Unauthorized", "{\"kind\":\"Status\",\"code\":401}"),
        _ => ("200 OK", "ok"),
    };
    let resp = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(resp.as_bytes()).await?;
    s.shutdown().await
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
