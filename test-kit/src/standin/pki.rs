//! The stand-in's own certificate authority and serving certificate (127.0.0.1 and
//! `localhost`), and the kubeconfig that trusts it and carries a bearer token.

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, SanType};

/// A CA, and a serving certificate it signed.
pub struct Pki {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot generate the stand-in's certificates: {0}")]
pub struct PkiError(#[from] rcgen::Error);

/// A fresh CA and a certificate for 127.0.0.1 and `localhost`.
pub fn generate() -> Result<Pki, PkiError> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "prober-standin-ca");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
    let mut params = CertificateParams::new(vec!["localhost".to_string()])?;
    params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    params
        .subject_alt_names
        .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &ca)?;
    Ok(Pki {
        ca_pem: ca.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// Writes a kubeconfig for `server` that trusts `ca_pem` and sends `token`.
pub fn write_kubeconfig(
    path: &Path,
    server: &str,
    ca_pem: &str,
    token: &str,
) -> std::io::Result<()> {
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: standin\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\n\
         users:\n- name: standin\n  user:\n    token: {token}\n\
         contexts:\n- name: standin\n  context:\n    cluster: standin\n    user: standin\n\
         current-context: standin\n",
        ca = STANDARD.encode(ca_pem)
    );
    std::fs::write(path, text)
}
