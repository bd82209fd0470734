//! The lab's credentials: a CA, the API server stand-in's serving certificate, and service-account
//! style JWTs (signed with a lab key) for CNI kubeconfigs — fresh, expired or stale on demand.

use std::net::{IpAddr, Ipv4Addr};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, SanType};

/// PEM material for the API server stand-in.
pub struct Pki {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot generate lab certificates: {0}")]
pub struct PkiError(String);

/// A CA and a serving certificate valid for the `kubernetes` Service names, localhost and every
/// given address (the API servers' and the Service's, of each family).
pub fn generate(api_addresses: &[IpAddr]) -> Result<Pki, PkiError> {
    let err = |e: rcgen::Error| PkiError(e.to_string());
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "prober-lab-ca");
    let ca =
        CertifiedIssuer::self_signed(ca_params, KeyPair::generate().map_err(err)?).map_err(err)?;
    let names = [
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
        "localhost",
    ];
    let mut params =
        CertificateParams::new(names.iter().map(ToString::to_string).collect::<Vec<_>>())
            .map_err(err)?;
    params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    for &ip in api_addresses
        .iter()
        .chain(&[IpAddr::V4(Ipv4Addr::LOCALHOST)])
    {
        params.subject_alt_names.push(SanType::IpAddress(ip));
    }
    let key = KeyPair::generate().map_err(err)?;
    let cert = params.signed_by(&key, &ca).map_err(err)?;
    Ok(Pki {
        ca_pem: ca.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// The claims of a bound service-account token, as the API server's `TokenRequest` writes them.
#[derive(Debug, Clone)]
pub struct TokenClaims<'a> {
    pub namespace: &'a str,
    pub service_account: &'a str,
    pub issued_at: u64,
    pub expires_at: u64,
}

/// A JWT with those claims, HMAC-signed with `key` (the lab's stand-in trusts its allow-list, not
/// the signature; the signature makes the token look and decode like a real one).
#[must_use]
pub fn token(claims: &TokenClaims<'_>, key: &[u8]) -> String {
    let header = serde_json::json!({"alg": "HS256", "kid": "prober-lab", "typ": "JWT"});
    let issuer = "https://kubernetes.default.svc.cluster.local";
    let payload = serde_json::json!({
        "aud": [issuer],
        "exp": claims.expires_at,
        "iat": claims.issued_at,
        "nbf": claims.issued_at,
        "iss": issuer,
        "kubernetes.io": {
            "namespace": claims.namespace,
            "serviceaccount": {"name": claims.service_account},
        },
        "sub": format!("system:serviceaccount:{}:{}", claims.namespace, claims.service_account),
    });
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(payload.to_string())
    );
    let tag = ring::hmac::sign(
        &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key),
        signing_input.as_bytes(),
    );
    format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
}

/// The `exp` claim of a JWT, without verifying it.
#[must_use]
pub fn expiry(jwt: &str) -> Option<u64> {
    let payload = jwt.split('.').nth(1)?;
    let bytes = URL_SAFE_NO_PAD.decode(payload).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    v.get("exp")?.as_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_decodes_like_a_service_account_token() {
        let t = token(
            &TokenClaims {
                namespace: "kube-system",
                service_account: "calico-cni-plugin",
                issued_at: 100,
                expires_at: 3700,
            },
            b"k",
        );
        assert_eq!(t.split('.').count(), 3);
        assert_eq!(expiry(&t), Some(3700));
        let payload: serde_json::Value = serde_json::from_slice(
            &URL_SAFE_NO_PAD
                .decode(t.split('.').nth(1).unwrap())
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            payload["sub"],
            "system:serviceaccount:kube-system:calico-cni-plugin"
        );
        assert_eq!(expiry("not-a-jwt"), None);
    }

    #[test]
    fn certificates_generate() {
        let p = generate(&[
            Ipv4Addr::new(192, 168, 56, 10).into(),
            Ipv4Addr::new(10, 96, 0, 1).into(),
            "fd00:56::a".parse().unwrap(),
        ])
        .unwrap();
        assert!(p.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(p.key_pem.contains("PRIVATE KEY"));
    }
}
