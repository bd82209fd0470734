//! The node check: reads the node's own configuration under its root — CNI kubeconfigs and their
//! tokens, the kubelet's API server, resolv.conf — and asks each kubeconfig's API server whether
//! it accepts the credential, as the CNI itself would. Tokens are reduced to their claims; the
//! token itself never leaves this module.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde::Deserialize;
use tokio::time::Instant;

use super::{tcp, tls};
use crate::proto::{
    CheckFacts, KubeconfigFacts, NodeFacts, Outcome, ProbeResult, ResolvFacts, TokenFacts,
};

/// Kubeconfigs larger than this are not kubeconfigs.
const MAX_FILE: u64 = 1024 * 1024;
const MAX_FILES: usize = 200;
const MAX_DEPTH: usize = 4;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Kubeconfig {
    #[serde(default)]
    clusters: Vec<NamedCluster>,
    #[serde(default)]
    users: Vec<NamedUser>,
    #[serde(default)]
    contexts: Vec<NamedContext>,
    #[serde(default)]
    current_context: Option<String>,
}

#[derive(Debug, Deserialize)]
struct NamedCluster {
    #[serde(default)]
    name: String,
    #[serde(default)]
    cluster: ClusterEntry,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct ClusterEntry {
    server: Option<String>,
    certificate_authority_data: Option<String>,
    certificate_authority: Option<String>,
}

#[derive(Debug, Deserialize)]
struct NamedUser {
    #[serde(default)]
    name: String,
    #[serde(default)]
    user: UserEntry,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct UserEntry {
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<String>,
    client_certificate: Option<String>,
    client_certificate_data: Option<String>,
    exec: Option<serde_json::Value>,
    auth_provider: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct NamedContext {
    #[serde(default)]
    name: String,
    #[serde(default)]
    context: ContextEntry,
}

#[derive(Debug, Default, Deserialize)]
struct ContextEntry {
    #[serde(default)]
    cluster: String,
    #[serde(default)]
    user: String,
}

fn number(v: &serde_json::Value) -> Option<u64> {
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    v.as_u64()
        .or_else(|| v.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
}

/// The claims of a token, without verifying it. Anything that is not a JWT is `opaque`.
#[must_use]
pub fn token_facts(token: &str, checked_at: u64) -> TokenFacts {
    let opaque = TokenFacts {
        format: "opaque".into(),
        checked_at,
        ..TokenFacts::default()
    };
    let parts: Vec<&str> = token.trim().split('.').collect();
    if parts.len() != 3 {
        return opaque;
    }
    let Ok(bytes) = URL_SAFE_NO_PAD.decode(parts[1].trim_end_matches('=')) else {
        return opaque;
    };
    let Ok(serde_json::Value::Object(c)) = serde_json::from_slice::<serde_json::Value>(&bytes)
    else {
        return opaque;
    };
    let text = |k: &str| c.get(k).and_then(|v| v.as_str()).map(String::from);
    let audience = match c.get("aud") {
        Some(serde_json::Value::String(s)) => vec![s.clone()],
        Some(serde_json::Value::Array(a)) => a
            .iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect(),
        _ => Vec::new(),
    };
    let k8s = c.get("kubernetes.io");
    let service_account = k8s
        .and_then(|k| k.pointer("/serviceaccount/name"))
        .and_then(|v| v.as_str())
        .map(String::from)
        .or_else(|| text("kubernetes.io/serviceaccount/service-account.name"));
    let namespace = k8s
        .and_then(|k| k.get("namespace"))
        .and_then(|v| v.as_str())
        .map(String::from)
        .or_else(|| text("kubernetes.io/serviceaccount/namespace"));
    let expires_at = c.get("exp").and_then(number);
    TokenFacts {
        format: "jwt".into(),
        subject: text("sub"),
        issuer: text("iss"),
        audience,
        issued_at: c.get("iat").and_then(number),
        expires_at,
        not_before: c.get("nbf").and_then(number),
        service_account,
        namespace,
        bound: k8s.is_some() && expires_at.is_some(),
        checked_at,
    }
}

/// `https://host:port` -> (host, port).
fn split_server(server: &str) -> Option<(String, u16)> {
    let rest = server.strip_prefix("https://")?;
    let authority = rest.split('/').next()?;
    if let Some(v6) = authority.strip_prefix('[') {
        let (host, tail) = v6.split_once(']')?;
        let port = tail
            .strip_prefix(':')
            .map_or(Some(443), |p| p.parse().ok())?;
        return Some((host.to_string(), port));
    }
    match authority.rsplit_once(':') {
        Some((h, p)) => Some((h.to_string(), p.parse().ok()?)),
        None => Some((authority.to_string(), 443)),
    }
}

async fn resolve(host: &str, port: u16, deadline: Instant) -> Result<SocketAddr, String> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    match tokio::time::timeout_at(deadline, tokio::net::lookup_host((host, port))).await {
        Ok(Ok(mut addrs)) => addrs
            .next()
            .ok_or_else(|| format!("{host} resolves to nothing")),
        Ok(Err(e)) => Err(format!("cannot resolve {host}: {e}")),
        Err(_) => Err(format!("resolving {host} timed out")),
    }
}

fn check_of(r: &ProbeResult) -> CheckFacts {
    CheckFacts {
        outcome: r.outcome,
        http_status: r.http_status,
        detail: r.detail.clone(),
    }
}

/// What the selected (current-context) user authenticates with, and the token if any.
fn credential(root: &Path, user: &UserEntry) -> (String, Option<Result<String, String>>) {
    if let Some(t) = &user.token {
        return ("token".into(), Some(Ok(t.trim().to_string())));
    }
    if let Some(f) = &user.token_file {
        let path = join(root, f);
        let read = std::fs::read_to_string(&path)
            .map(|t| t.trim().to_string())
            .map_err(|e| format!("cannot read tokenFile {f}: {e}"));
        return ("token-file".into(), Some(read));
    }
    let kind = if user.client_certificate.is_some() || user.client_certificate_data.is_some() {
        "client-certificate"
    } else if user.exec.is_some() {
        "exec"
    } else if user.auth_provider.is_some() {
        "auth-provider"
    } else {
        "none"
    };
    (kind.into(), None)
}

/// A path inside the node's root.
fn join(root: &Path, p: &str) -> PathBuf {
    root.join(p.trim_start_matches('/'))
}

/// Reads one kubeconfig; `None` when the file is not a kubeconfig at all.
fn read_kubeconfig(
    root: &Path,
    file: &Path,
    must: bool,
) -> Option<(KubeconfigFacts, Option<Target>)> {
    let rel = format!("/{}", file.strip_prefix(root).unwrap_or(file).display());
    let modified = std::fs::metadata(file)
        .ok()
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs());
    let mut facts = KubeconfigFacts {
        path: rel.clone(),
        modified,
        auth: "none".into(),
        ..KubeconfigFacts::default()
    };
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => {
            facts.error = Some(format!("cannot read {rel}: {e}"));
            return must.then_some((facts, None));
        }
    };
    let value: serde_json::Value = match serde_saphyr::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            let first = e.to_string().lines().next().unwrap_or_default().to_string();
            facts.error = Some(format!("{rel} is not valid YAML: {first}"));
            return must.then_some((facts, None));
        }
    };
    let looks = value.get("clusters").is_some()
        || value.get("users").is_some()
        || value.get("kind").and_then(|k| k.as_str()) == Some("Config");
    if !looks {
        return None;
    }
    let kc: Kubeconfig = match serde_json::from_value(value) {
        Ok(k) => k,
        Err(e) => {
            facts.error = Some(format!("{rel} is not a valid kubeconfig: {e}"));
            return Some((facts, None));
        }
    };
    let ctx = kc
        .current_context
        .as_ref()
        .and_then(|c| kc.contexts.iter().find(|x| &x.name == c))
        .or_else(|| kc.contexts.first());
    let cluster = ctx
        .and_then(|c| kc.clusters.iter().find(|x| x.name == c.context.cluster))
        .or_else(|| kc.clusters.first());
    let user = ctx
        .and_then(|c| kc.users.iter().find(|x| x.name == c.context.user))
        .or_else(|| kc.users.first());
    facts.server = cluster.and_then(|c| c.cluster.server.clone());
    let mut token = None;
    if let Some(u) = user {
        let (auth, cred) = credential(root, &u.user);
        facts.auth = auth;
        match cred {
            Some(Ok(t)) if !t.is_empty() => {
                facts.token = Some(token_facts(&t, crate::util::unix_secs()));
                token = Some(t);
            }
            Some(Ok(_)) => facts.error = Some(format!("{rel}: the token is empty")),
            Some(Err(e)) => facts.error = Some(format!("{rel}: {e}")),
            None => {}
        }
    }
    let ca = cluster.map(|c| {
        (
            c.cluster.certificate_authority_data.clone(),
            c.cluster.certificate_authority.clone(),
        )
    });
    let target = Target {
        server: facts.server.clone(),
        token,
        ca,
    };
    Some((facts, Some(target)))
}

/// What a check needs: the server, the credential, the CA.
struct Target {
    server: Option<String>,
    token: Option<String>,
    ca: Option<(Option<String>, Option<String>)>,
}

/// Files under `dir`, depth-first, bounded.
fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth > MAX_DEPTH || out.len() >= MAX_FILES {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for e in entries {
        let Ok(meta) = std::fs::symlink_metadata(e.path()) else {
            continue;
        };
        if meta.is_dir() {
            walk(&e.path(), depth + 1, out);
        } else if meta.is_file() && meta.len() <= MAX_FILE && out.len() < MAX_FILES {
            out.push(e.path());
        }
    }
}

/// Asks the kubeconfig's server whether it accepts the credential.
async fn api_check(id: &str, root: &Path, target: Target, deadline: Instant) -> Option<CheckFacts> {
    let server = target.server?;
    let token = target.token?;
    let Some((host, port)) = split_server(&server) else {
        return Some(CheckFacts {
            outcome: Outcome::Error,
            http_status: None,
            detail: format!("server {server:?} is not an https URL"),
        });
    };
    let addr = match resolve(&host, port, deadline).await {
        Ok(a) => a,
        Err(e) => {
            return Some(CheckFacts {
                outcome: Outcome::Error,
                http_status: None,
                detail: e,
            });
        }
    };
    let pem = target
        .ca
        .as_ref()
        .and_then(|(data, _)| data.as_ref())
        .and_then(|d| STANDARD.decode(d.trim()).ok());
    let file = target
        .ca
        .as_ref()
        .and_then(|(_, f)| f.as_ref())
        .map(|f| join(root, f));
    let roots = match (&pem, &file) {
        (Some(p), _) => tls::Roots::Pem(p),
        (None, Some(f)) => tls::Roots::File(f),
        (None, None) => tls::Roots::None,
    };
    let server_name = host.parse::<IpAddr>().is_err().then(|| host.clone());
    let req = tls::Request {
        addr,
        server_name,
        roots,
        require_verified: false,
        path: "/api",
        token: Some(token),
    };
    Some(check_of(&tls::request(id, req, deadline).await))
}

pub async fn probe(id: &str, root: &Path, api: bool, deadline: Instant) -> ProbeResult {
    if !root.is_dir() {
        return ProbeResult::new(
            id,
            Outcome::Error,
            format!(
                "node: the host root {} is not a directory (is it mounted?)",
                root.display()
            ),
        );
    }
    let mut facts = NodeFacts {
        root: root.display().to_string(),
        ..NodeFacts::default()
    };
    let mut files = Vec::new();
    walk(&root.join("etc/cni/net.d"), 0, &mut files);
    let mut checks = tokio::task::JoinSet::new();
    for file in files {
        let named = file
            .file_name()
            .is_some_and(|n| n.to_string_lossy().contains("kubeconfig"));
        if let Some((kc, target)) = read_kubeconfig(root, &file, named) {
            let i = facts.cni_kubeconfigs.len();
            facts.cni_kubeconfigs.push(kc);
            if let (true, Some(t)) = (api, target) {
                let (id, root) = (id.to_string(), root.to_path_buf());
                checks.spawn(async move { (i, api_check(&id, &root, t, deadline).await) });
            }
        }
    }
    for name in [
        "etc/kubernetes/kubelet.conf",
        "etc/kubernetes/bootstrap-kubelet.conf",
    ] {
        let file = root.join(name);
        if !file.exists() {
            continue;
        }
        if let Some((mut kc, _)) = read_kubeconfig(root, &file, true) {
            // The kubelet authenticates with certificates: only ask whether anything listens.
            if let Some((host, port)) = kc.server.as_deref().and_then(split_server) {
                let check = match resolve(&host, port, deadline).await {
                    Ok(addr) => match tcp::connect(addr, deadline).await {
                        Ok(_) => CheckFacts {
                            outcome: Outcome::Ok,
                            http_status: None,
                            detail: format!("something listens on {addr}"),
                        },
                        Err(f) => check_of(&f.into_result(
                            id,
                            &format!("tcp connect {addr}"),
                            std::time::Duration::ZERO,
                        )),
                    },
                    Err(e) => CheckFacts {
                        outcome: Outcome::Error,
                        http_status: None,
                        detail: e,
                    },
                };
                kc.check = Some(check);
            }
            kc.token = None;
            facts.kubelet.push(kc);
        }
    }
    match std::fs::read_to_string(root.join("etc/resolv.conf")) {
        Ok(text) => {
            let rc = super::dns::ResolvConf::parse(&text);
            facts.resolv_conf = Some(ResolvFacts {
                nameservers: rc.nameservers.iter().map(|s| s.ip().to_string()).collect(),
                search: rc.search,
            });
        }
        Err(e) => facts
            .errors
            .push(format!("cannot read /etc/resolv.conf: {e}")),
    }
    while let Some(done) = checks.join_next().await {
        if let Ok((i, check)) = done {
            facts.cni_kubeconfigs[i].check = check;
        }
    }
    for kc in facts.cni_kubeconfigs.iter().chain(&facts.kubelet) {
        if let Some(e) = &kc.error {
            facts.errors.push(e.clone());
        }
    }
    let detail = format!(
        "node: {} CNI kubeconfig(s), {} kubelet config(s), {} problem(s) reading them",
        facts.cni_kubeconfigs.len(),
        facts.kubelet.len(),
        facts.errors.len()
    );
    let mut r = ProbeResult::new(id, Outcome::Ok, detail);
    r.node = Some(facts);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXPIRED: &str = "eyJhbGciOiJSUzI1NiIsImtpZCI6IngifQ.eyJhdWQiOlsiaHR0cHM6Ly9rdWJlcm5ldGVzLmRlZmF1bHQuc3ZjIl0sImV4cCI6MTcwMDAwMzYwMCwiaWF0IjoxNzAwMDAwMDAwLCJpc3MiOiJodHRwczovL2t1YmVybmV0ZXMuZGVmYXVsdC5zdmMiLCJrdWJlcm5ldGVzLmlvIjp7Im5hbWVzcGFjZSI6Imt1YmUtc3lzdGVtIiwic2VydmljZWFjY291bnQiOnsibmFtZSI6ImNhbGljby1jbmktcGx1Z2luIn19LCJuYmYiOjE3MDAwMDAwMDAsInN1YiI6InN5c3RlbTpzZXJ2aWNlYWNjb3VudDprdWJlLXN5c3RlbTpjYWxpY28tY25pLXBsdWdpbiJ9.c2lnbmF0dXJl";

    #[test]
    fn bound_token_claims() {
        let t = token_facts(EXPIRED, 1_800_000_000);
        assert_eq!(t.format, "jwt");
        assert_eq!(t.expires_at, Some(1_700_003_600));
        assert_eq!(t.issued_at, Some(1_700_000_000));
        assert_eq!(t.service_account.as_deref(), Some("calico-cni-plugin"));
        assert_eq!(t.namespace.as_deref(), Some("kube-system"));
        assert_eq!(
            t.subject.as_deref(),
            Some("system:serviceaccount:kube-system:calico-cni-plugin")
        );
        assert!(t.bound);
        let json = serde_json::to_string(&t).unwrap();
        for seg in EXPIRED.split('.') {
            assert!(!json.contains(seg), "a token segment leaked: {json}");
        }
    }

    #[test]
    fn not_a_jwt_is_opaque_and_never_panics() {
        for t in ["abcdef", "a.b.c", "a.%%%.c", "", "x.eyJhIjoxfQ", "...."] {
            let f = token_facts(t, 0);
            assert_eq!(f.format, "opaque", "{t}");
            assert!(f.expires_at.is_none());
        }
    }

    #[test]
    fn servers() {
        assert_eq!(
            split_server("https://10.96.0.1:443"),
            Some(("10.96.0.1".into(), 443))
        );
        assert_eq!(
            split_server("https://localhost:6443/"),
            Some(("localhost".into(), 6443))
        );
        assert_eq!(
            split_server("https://api.example"),
            Some(("api.example".into(), 443))
        );
        assert_eq!(
            split_server("https://[fd00::1]:6443"),
            Some(("fd00::1".into(), 6443))
        );
        assert_eq!(split_server("http://x:1"), None);
    }
}
