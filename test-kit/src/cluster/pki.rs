//! The cluster's secrets: the service-account signing key, a bearer token per control-plane
//! user and node, each kubelet's serving certificate, and the kubeconfigs that carry them.

use std::fmt::Write as _;
use std::io::Read as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rcgen::{CertificateParams, DnType, KeyPair, SanType};

use super::NodeSpec;

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("cannot generate a key or certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read random bytes: {0}")]
    Random(#[source] std::io::Error),
}

/// The keys and tokens of one cluster.
pub(super) struct Keys {
    pub(super) sa_key: PathBuf,
    pub(super) sa_pub: PathBuf,
    /// (user, token): the administrator, the controller manager, the scheduler, each node.
    pub(super) tokens: Vec<(String, String)>,
}

fn random_token() -> Result<String, PkiError> {
    let mut b = [0u8; 24];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(PkiError::Random)?;
    Ok(b.iter().fold(String::new(), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    }))
}

fn write(path: &Path, text: &str) -> Result<(), PkiError> {
    let err = |source| PkiError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(err)?;
    }
    std::fs::write(path, text).map_err(err)
}

impl Keys {
    pub(super) fn generate(dir: &Path, nodes: &[NodeSpec]) -> Result<Self, PkiError> {
        // ES256: the API server signs and verifies service-account tokens with ECDSA keys too.
        let sa = KeyPair::generate()?;
        let sa_key = dir.join("pki/sa.key");
        let sa_pub = dir.join("pki/sa.pub");
        write(&sa_key, &sa.serialize_pem())?;
        write(&sa_pub, &sa.public_key_pem())?;
        let mut tokens = vec![
            ("admin".to_string(), random_token()?),
            (
                "system:kube-controller-manager".to_string(),
                random_token()?,
            ),
            ("system:kube-scheduler".to_string(), random_token()?),
        ];
        for n in nodes {
            tokens.push((format!("system:node:{}", n.name), random_token()?));
        }
        Ok(Self {
            sa_key,
            sa_pub,
            tokens,
        })
    }

    /// The API server's `--token-auth-file`: `token,user,uid,"groups"`.
    pub(super) fn token_file(&self) -> String {
        self.tokens
            .iter()
            .fold(String::new(), |mut out, (user, token)| {
                let groups = if user == "admin" {
                    "system:masters"
                } else if user.starts_with("system:node:") {
                    "system:nodes"
                } else {
                    ""
                };
                let _ = writeln!(out, "{token},{user},{user},\"{groups}\"");
                out
            })
    }
}

/// A self-signed serving certificate for a node's kubelet (the API server does not verify it
/// unless `--kubelet-certificate-authority` is set, as on most clusters).
pub(super) fn kubelet_cert(name: &str, addresses: &[IpAddr]) -> Result<(String, String), PkiError> {
    let mut params = CertificateParams::new(vec![name.to_string()])?;
    params
        .distinguished_name
        .push(DnType::CommonName, format!("{name}@kubelet"));
    for a in addresses {
        params.subject_alt_names.push(SanType::IpAddress(*a));
    }
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// A kubeconfig for `server`, trusting `ca_pem`, authenticating with `token`.
pub(super) fn kubeconfig(server: &str, ca_pem: &str, user: &str, token: &str) -> String {
    let ca = STANDARD.encode(ca_pem);
    let user = user.replace(':', "-");
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: lab\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: {user}\n  user:\n    token: {token}\ncontexts:\n- name: {user}@lab\n  context: {{cluster: lab, user: {user}}}\ncurrent-context: {user}@lab\n"
    )
}
