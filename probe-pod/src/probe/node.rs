//! The node check: reads the node's own configuration under its root — CNI kubeconfigs and their
//! tokens, the kubelet's API server, resolv.conf — and asks each kubeconfig's API server whether
//! it accepts the credential, as the CNI itself would, but only after the server proved it is the
//! one the kubeconfig's own CA vouches for. Tokens are reduced to their claims; the token itself
//! never leaves this module except inside a request to a verified server.

use std::net::{IpAddr, SocketAddr};
use std::path::{Component, Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use tokio::time::Instant;

use super::kubeconfig::{self, Credential, Selected, Source, shown_path, split_server};
use super::tcp;
use super::tls::{self, ClientAuth, Secret, Verdict, Verify};
use crate::files::{self, MAX_KUBECONFIG, MAX_PEM, MAX_RESOLV_CONF, MAX_TOKEN};
use crate::proto::{
    CheckFacts, KubeconfigFacts, NodeFacts, Outcome, ProbeResult, ResolvFacts, ServerTrust,
    TokenFacts,
};

/// Kubeconfigs larger than this are not kubeconfigs.
const MAX_FILE: u64 = MAX_KUBECONFIG;
const MAX_FILES: usize = 200;
const MAX_DEPTH: usize = 4;

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

/// Resolves the host of a kubeconfig's server. Messages do not repeat the host name: the
/// kubeconfig's `server` is reported on its own, and a malformed file may have put anything there.
async fn resolve(host: &str, port: u16, deadline: Instant) -> Result<SocketAddr, ResolveError> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    match tokio::time::timeout_at(deadline, tokio::net::lookup_host((host, port))).await {
        Ok(Ok(mut addrs)) => addrs.next().ok_or(ResolveError::Nothing),
        Ok(Err(e)) => Err(ResolveError::Lookup(e)),
        Err(_) => Err(ResolveError::Timeout),
    }
}

/// Why a kubeconfig's server host name gave no address (the name itself is reported apart).
#[derive(Debug, thiserror::Error)]
enum ResolveError {
    #[error("the server's host name resolves to nothing")]
    Nothing,
    #[error("cannot resolve the server's host name: {0}")]
    Lookup(std::io::Error),
    #[error("resolving the server's host name timed out")]
    Timeout,
}

fn check_of(r: &ProbeResult) -> CheckFacts {
    CheckFacts {
        outcome: r.outcome,
        http_status: r.http_status,
        detail: r.detail.clone(),
    }
}

fn check_error(detail: String) -> CheckFacts {
    CheckFacts {
        outcome: Outcome::Error,
        http_status: None,
        detail,
    }
}

/// A path a kubeconfig names, inside the node's root: absolute paths from the root, relative ones
/// from the kubeconfig's directory (as kubectl resolves them). `None` when it climbs out of the
/// root.
fn inside(root: &Path, dir: &Path, p: &str) -> Option<PathBuf> {
    let p = Path::new(p);
    let mut rel = if p.is_absolute() {
        PathBuf::new()
    } else {
        dir.to_path_buf()
    };
    for c in p.components() {
        match c {
            Component::Normal(n) => rel.push(n),
            Component::ParentDir => {
                if !rel.pop() {
                    return None;
                }
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    Some(root.join(rel))
}

/// Reads a file a kubeconfig names (`field` says which), bounded; messages show the path only
/// when it cannot be a secret (see `shown_path`).
fn read_named(
    root: &Path,
    dir: &Path,
    p: &str,
    limit: u64,
    what: &'static str,
) -> Result<Vec<u8>, String> {
    let Some(path) = inside(root, dir, p) else {
        return Err(format!(
            "{what} {} leads out of the host root",
            shown_path(p)
        ));
    };
    files::read_capped(&path, limit, what, shown_path(p)).map_err(|e| e.to_string())
}

/// PEM from a kubeconfig: inline base64 or a file.
fn pem(root: &Path, dir: &Path, source: &Source, what: &'static str) -> Result<Vec<u8>, String> {
    match source {
        // The decoder's messages name the offending byte: never shown.
        Source::Data(d) => STANDARD
            .decode(d.trim())
            .map_err(|_| format!("the inline {what} is not valid base64")),
        Source::File(f) => read_named(root, dir, f, MAX_PEM, what),
    }
}

/// The credential of the selected user: a token read now (its claims are facts), a client
/// certificate read only when a check will present it (a key is read no earlier than needed).
enum Loaded {
    Token(Secret),
    Client { cert: Source, key: Option<Source> },
    Nothing,
}

fn load_credential(
    root: &Path,
    dir: &Path,
    credential: &Credential,
) -> Result<(Loaded, Option<TokenFacts>), String> {
    let token = |t: String| {
        let facts = token_facts(&t, crate::util::unix_secs());
        Secret::new(t)
            .map(|s| (Loaded::Token(s), Some(facts)))
            .map_err(String::from)
    };
    match credential {
        Credential::Token(t) => token(t.clone()),
        Credential::TokenFile(f) => {
            let bytes = read_named(root, dir, f, MAX_TOKEN, "tokenFile")?;
            let text = String::from_utf8(bytes)
                .map_err(|_| format!("tokenFile {} is not text", shown_path(f)))?;
            token(text.trim().to_string())
        }
        Credential::ClientCertificate { cert, key } => Ok((
            Loaded::Client {
                cert: cert.clone(),
                key: key.clone(),
            },
            None,
        )),
        Credential::Exec | Credential::AuthProvider | Credential::None => {
            Ok((Loaded::Nothing, None))
        }
    }
}

/// Reads a client certificate and its key for the handshake.
fn load_client(
    root: &Path,
    dir: &Path,
    cert: &Source,
    key: Option<&Source>,
) -> Result<ClientAuth, String> {
    let chain = tls::pem_certificates(
        &pem(root, dir, cert, "client certificate")?,
        "the client certificate",
    )
    .map_err(|e| e.to_string())?;
    let Some(key) = key else {
        return Err("a client certificate without a client key".into());
    };
    let key = tls::pem_private_key(&pem(root, dir, key, "client key")?, "the client key")
        .map_err(|e| e.to_string())?;
    Ok(ClientAuth { chain, key })
}

/// Reads one kubeconfig; `None` when the file is not a kubeconfig at all.
fn read_kubeconfig(
    root: &Path,
    file: &Path,
    must: bool,
) -> Option<(KubeconfigFacts, Option<Target>)> {
    let inner = file.strip_prefix(root).unwrap_or(file);
    let rel = format!("/{}", inner.display());
    let dir = inner.parent().unwrap_or(Path::new("")).to_path_buf();
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
    let text = match files::read_text_capped(file, MAX_KUBECONFIG, "kubeconfig", &rel) {
        Ok(t) => t,
        Err(e) => {
            facts.error = Some(e.to_string());
            return must.then_some((facts, None));
        }
    };
    let selected: Selected = match kubeconfig::parse(&text) {
        Ok(Some(s)) => s,
        Ok(None) => return None,
        Err(
            e
            @ (kubeconfig::KubeconfigError::Yaml { .. } | kubeconfig::KubeconfigError::YamlBudget),
        ) => {
            facts.error = Some(format!("{rel} {e}"));
            return must.then_some((facts, None));
        }
        Err(e) => {
            facts.error = Some(format!("{rel} is not a valid kubeconfig: {e}"));
            return Some((facts, None));
        }
    };
    facts.server.clone_from(&selected.server);
    facts.auth = selected.credential.kind().into();
    facts.insecure_skip_tls_verify = selected.insecure_skip_tls_verify;
    let credential = match load_credential(root, &dir, &selected.credential) {
        Ok((loaded, token)) => {
            facts.token = token;
            loaded
        }
        Err(e) => {
            facts.error = Some(format!("{rel}: {e}"));
            Loaded::Nothing
        }
    };
    let target = Target {
        dir,
        selected,
        credential,
    };
    Some((facts, Some(target)))
}

/// What a check needs: the selected context and its loaded credential.
struct Target {
    /// The kubeconfig's directory inside the root, for relative paths.
    dir: PathBuf,
    selected: Selected,
    credential: Loaded,
}

/// Files under `dir`, depth-first, bounded.
fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth > MAX_DEPTH || out.len() >= MAX_FILES {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.take(4 * MAX_FILES).filter_map(Result::ok).collect();
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

/// Why a server that did not verify was refused the credential, for the report.
fn untrusted(server: &str, verdict: &Verdict) -> String {
    let why = verdict.error().unwrap_or_default();
    let what = match verdict {
        Verdict::WrongName(_) => format!(
            "the API server at {server} presents a certificate from the CA this kubeconfig trusts, but for another name"
        ),
        Verdict::Expired(_) => format!(
            "the API server at {server} presents a certificate that is expired or not yet valid"
        ),
        _ => format!(
            "the API server at {server} is not signed by the CA this kubeconfig trusts: rotated CA or impostor"
        ),
    };
    format!("{what} ({why}); the credential was not sent")
}

/// Asks the kubeconfig's server whether it accepts the credential, once the server verified
/// against the kubeconfig's own CA. Returns the answer and what was established about the server.
async fn api_check(
    id: &str,
    root: &Path,
    target: Target,
    deadline: Instant,
) -> (Option<CheckFacts>, Option<ServerTrust>) {
    let Target {
        dir,
        selected,
        credential,
    } = target;
    let Some(server) = selected.server.clone() else {
        return (None, None);
    };
    let (token, client) = match credential {
        Loaded::Token(t) => (Some(t), None),
        Loaded::Client { cert, key } => match load_client(root, &dir, &cert, key.as_ref()) {
            Ok(c) => (None, Some(c)),
            Err(e) => {
                let why = format!("cannot use the client certificate: {e}; nothing was sent");
                return (Some(check_error(why)), None);
            }
        },
        Loaded::Nothing => return (None, None),
    };
    let Some((host, port)) = split_server(&server) else {
        return (
            Some(check_error(format!("server {server} is not an https URL"))),
            None,
        );
    };
    let unverifiable = |why: String| {
        (
            Some(check_error(format!(
                "{why}: the API server cannot be verified, so the credential was not sent"
            ))),
            Some(ServerTrust::Unverifiable),
        )
    };
    let ca_pem = match (&selected.ca, selected.insecure_skip_tls_verify) {
        (Some(_), true) => {
            return unverifiable(
                "the kubeconfig sets both a CA and insecure-skip-tls-verify, which client-go refuses".into(),
            );
        }
        // Whoever answers at the address would get the credential, and its answer proves
        // nothing: the token's own claims (expiry, issuer, age) are all that is checked.
        (None, true) => {
            return (
                Some(check_error(format!(
                    "insecure-skip-tls-verify: the API server at {server} cannot be verified, so the credential was not sent"
                ))),
                Some(ServerTrust::InsecureSkipVerify),
            );
        }
        (None, false) => {
            return unverifiable("the kubeconfig names no certificate-authority".into());
        }
        (Some(ca), false) => match pem(root, &dir, ca, "certificate-authority").and_then(|p| {
            tls::pem_certificates(&p, "the certificate-authority")
                .map(|_| p)
                .map_err(|e| e.to_string())
        }) {
            Ok(p) => p,
            Err(e) => return unverifiable(e),
        },
    };
    let addr = match resolve(&host, port, deadline).await {
        Ok(a) => a,
        Err(e) => return (Some(check_error(e.to_string())), None),
    };
    let roots = tls::Roots::Pem {
        pem: &ca_pem,
        name: "the kubeconfig's certificate-authority",
    };
    let server_name = selected
        .tls_server_name
        .clone()
        .or_else(|| host.parse::<IpAddr>().is_err().then(|| host.clone()));
    let req = tls::Request {
        addr,
        server_name,
        roots,
        verify: Verify::Require,
        path: "/api",
        token,
        client,
    };
    let done = tls::request(id, req, deadline).await;
    let trust = match &done.verdict {
        None => None,
        Some(v) if v.is_verified() => Some(ServerTrust::Verified),
        Some(v) => {
            let check = CheckFacts {
                outcome: Outcome::TlsError,
                http_status: None,
                detail: untrusted(&server, v),
            };
            return (Some(check), Some(ServerTrust::Untrusted));
        }
    };
    (Some(check_of(&done.result)), trust)
}

/// The kubelet authenticates with certificates the agent does not read: only ask whether
/// anything listens at the server it names.
async fn kubelet_check(id: &str, server: &str, deadline: Instant) -> Option<CheckFacts> {
    let (host, port) = split_server(server)?;
    Some(match resolve(&host, port, deadline).await {
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
        Err(e) => check_error(e.to_string()),
    })
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
            if let Some(server) = kc.server.clone() {
                kc.check = kubelet_check(id, &server, deadline).await;
            }
            kc.token = None;
            facts.kubelet.push(kc);
        }
    }
    match files::read_text_capped(
        &root.join("etc/resolv.conf"),
        MAX_RESOLV_CONF,
        "resolv.conf",
        "/etc/resolv.conf",
    ) {
        Ok(text) => {
            let rc = super::dns::ResolvConf::parse(&text);
            facts.resolv_conf = Some(ResolvFacts {
                nameservers: rc.nameservers.iter().map(|s| s.ip().to_string()).collect(),
                search: rc.search,
            });
        }
        Err(e) => facts.errors.push(e.to_string()),
    }
    facts.forwarding = Some(super::forwarding::read(
        Path::new("/proc/sys/net"),
        &mut facts.errors,
    ));
    while let Some(done) = checks.join_next().await {
        if let Ok((i, (check, trust))) = done {
            facts.cni_kubeconfigs[i].check = check;
            facts.cni_kubeconfigs[i].server_trust = trust;
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
    r.node = Some(Box::new(facts));
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
}
