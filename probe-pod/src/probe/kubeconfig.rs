//! Reads a kubeconfig as client-go selects from it (current context, then its cluster and user).
//! Errors name the field and the position, never a value: in a malformed kubeconfig any value may
//! be a token in the wrong place (`user: <token>`), and errors end up in reports.

use serde_json::Value;

/// Where a piece of PEM comes from: inline base64 (`*-data`) or a file.
#[derive(Clone, PartialEq, Eq)]
pub enum Source {
    Data(String),
    File(String),
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Data(_) => f.write_str("Data(..)"),
            Self::File(p) => write!(f, "File({})", shown_path(p)),
        }
    }
}

/// How the selected user authenticates.
#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    Token(String),
    TokenFile(String),
    ClientCertificate { cert: Source, key: Option<Source> },
    Exec,
    AuthProvider,
    None,
}

impl Credential {
    /// The name reported in `auth`.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Token(_) => "token",
            Self::TokenFile(_) => "token-file",
            Self::ClientCertificate { .. } => "client-certificate",
            Self::Exec => "exec",
            Self::AuthProvider => "auth-provider",
            Self::None => "none",
        }
    }
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.kind())
    }
}

/// What the selected context says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selected {
    /// `https://host[:port][/path]`, checked to be one; `None` when absent.
    pub server: Option<String>,
    pub ca: Option<Source>,
    pub insecure_skip_tls_verify: bool,
    /// `tls-server-name`: the name to verify instead of the server's host.
    pub tls_server_name: Option<String>,
    pub credential: Credential,
}

/// Why a kubeconfig could not be read. Never carries a value from the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KubeconfigError {
    #[error("is not valid YAML (line {line}, column {column})")]
    Yaml { line: u64, column: u64 },
    #[error("is not valid YAML, or is nested or aliased beyond what a kubeconfig needs")]
    YamlBudget,
    #[error(
        "`{field}` is {found}, expected {expected} (its value is not shown: it may be a secret)"
    )]
    Shape {
        field: String,
        found: &'static str,
        expected: &'static str,
    },
    #[error("`{field}` names a {what} the file does not define")]
    Dangling { field: String, what: &'static str },
    #[error("`{field}` is not an https URL with a valid host and port")]
    Server { field: String },
}

/// How a file path from a kubeconfig is shown in messages. An absolute path is shown: a token is
/// never one. Anything else is not: it may be a token written where a path belongs.
#[must_use]
pub fn shown_path(p: &str) -> String {
    if p.starts_with('/') && p.len() <= 4096 && !p.chars().any(char::is_control) {
        p.to_string()
    } else {
        "(a relative path, not shown)".to_string()
    }
}

fn found(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

fn shape(field: &str, v: &Value, expected: &'static str) -> KubeconfigError {
    KubeconfigError::Shape {
        field: field.to_string(),
        found: found(v),
        expected,
    }
}

/// `map[key]` as an optional string.
fn string(
    map: &serde_json::Map<String, Value>,
    at: &str,
    key: &str,
) -> Result<Option<String>, KubeconfigError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(shape(&format!("{at}.{key}"), v, "a string")),
    }
}

fn mapping<'a>(
    v: &'a Value,
    field: &str,
) -> Result<&'a serde_json::Map<String, Value>, KubeconfigError> {
    v.as_object().ok_or_else(|| shape(field, v, "a mapping"))
}

fn list<'a>(
    root: &'a serde_json::Map<String, Value>,
    key: &str,
) -> Result<&'a [Value], KubeconfigError> {
    match root.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(v) => Err(shape(key, v, "a list")),
    }
}

/// One entry of a named list: its name, its body, and the body's field path.
type Entry<'a> = (Option<String>, &'a serde_json::Map<String, Value>, String);

/// The entries of a named list (`clusters`, `users`, `contexts`): (name, body, body's field path).
fn named<'a>(
    root: &'a serde_json::Map<String, Value>,
    key: &str,
    body: &str,
) -> Result<Vec<Entry<'a>>, KubeconfigError> {
    static EMPTY: std::sync::LazyLock<serde_json::Map<String, Value>> =
        std::sync::LazyLock::new(serde_json::Map::new);
    let mut out = Vec::new();
    for (i, entry) in list(root, key)?.iter().enumerate() {
        let at = format!("{key}[{i}]");
        let entry = mapping(entry, &at)?;
        let name = string(entry, &at, "name")?;
        let path = format!("{at}.{body}");
        let inner = match entry.get(body) {
            None | Some(Value::Null) => &*EMPTY,
            Some(v) => mapping(v, &path)?,
        };
        out.push((name, inner, path));
    }
    Ok(out)
}

fn valid_host(host: &str) -> bool {
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return v6.parse::<std::net::Ipv6Addr>().is_ok();
    }
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// Checks `server` is `https://host[:port][/path]`.
fn valid_server(server: &str) -> bool {
    let Some(rest) = server.strip_prefix("https://") else {
        return false;
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    if !path.bytes().all(|b| b.is_ascii_graphic()) {
        return false;
    }
    let (host, port) = if authority.starts_with('[') {
        match authority.find(']') {
            Some(end) => (&authority[..=end], &authority[end + 1..]),
            None => return false,
        }
    } else {
        authority.split_at(authority.find(':').unwrap_or(authority.len()))
    };
    let port_ok = port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| (1..=5).contains(&p.len()) && p.parse::<u16>().is_ok_and(|n| n > 0));
    valid_host(host) && port_ok
}

fn source(
    map: &serde_json::Map<String, Value>,
    at: &str,
    data: &str,
    file: &str,
) -> Result<Option<Source>, KubeconfigError> {
    // client-go: inline data wins over a file.
    if let Some(d) = string(map, at, data)?.filter(|d| !d.is_empty()) {
        return Ok(Some(Source::Data(d)));
    }
    Ok(string(map, at, file)?
        .filter(|f| !f.is_empty())
        .map(Source::File))
}

fn credential(
    user: &serde_json::Map<String, Value>,
    at: &str,
) -> Result<Credential, KubeconfigError> {
    if let Some(t) = string(user, at, "token")?.filter(|t| !t.trim().is_empty()) {
        return Ok(Credential::Token(t.trim().to_string()));
    }
    if let Some(f) = string(user, at, "tokenFile")?.filter(|f| !f.is_empty()) {
        return Ok(Credential::TokenFile(f));
    }
    if let Some(cert) = source(user, at, "client-certificate-data", "client-certificate")? {
        let key = source(user, at, "client-key-data", "client-key")?;
        return Ok(Credential::ClientCertificate { cert, key });
    }
    if user.get("exec").is_some_and(|v| !v.is_null()) {
        return Ok(Credential::Exec);
    }
    if user.get("auth-provider").is_some_and(|v| !v.is_null()) {
        return Ok(Credential::AuthProvider);
    }
    Ok(Credential::None)
}

/// Parses YAML text into a value under tight limits: a kubeconfig is a few dozen nodes.
fn yaml(text: &str) -> Result<Value, KubeconfigError> {
    let options = serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_nodes: 20_000,
            max_depth: 32,
            max_events: 100_000,
            max_aliases: 1_000,
            max_anchors: 1_000,
            max_documents: 1,
        },
        alias_limits: serde_saphyr::alias_limits! {
            max_total_replayed_events: 20_000,
        },
        with_snippet: false,
    };
    serde_saphyr::from_str_with_options::<Value>(text, options).map_err(|e| match e.location() {
        Some(l) => KubeconfigError::Yaml {
            line: l.line(),
            column: l.column(),
        },
        None => KubeconfigError::YamlBudget,
    })
}

/// Parses a kubeconfig. `Ok(None)`: the YAML is fine but not a kubeconfig (a CNI conflist, say).
pub fn parse(text: &str) -> Result<Option<Selected>, KubeconfigError> {
    let value = yaml(text)?;
    let Value::Object(root) = &value else {
        return Ok(None);
    };
    let looks = root.contains_key("clusters")
        || root.contains_key("users")
        || root.get("kind").and_then(Value::as_str) == Some("Config");
    if !looks {
        return Ok(None);
    }
    let clusters = named(root, "clusters", "cluster")?;
    let users = named(root, "users", "user")?;
    let contexts = named(root, "contexts", "context")?;
    let current = string(root, "", "current-context")?.filter(|c| !c.is_empty());
    let context = match &current {
        Some(name) => Some(
            contexts
                .iter()
                .find(|(n, _, _)| n.as_ref() == Some(name))
                .ok_or(KubeconfigError::Dangling {
                    field: "current-context".into(),
                    what: "context",
                })?,
        ),
        None => contexts.first(),
    };
    let pick = |list: &'_ [Entry<'_>],
                key: &str,
                what: &'static str|
     -> Result<Option<usize>, KubeconfigError> {
        let Some((_, ctx, at)) = context else {
            return Ok((!list.is_empty()).then_some(0));
        };
        match string(ctx, at, key)?.filter(|n| !n.is_empty()) {
            None => Ok((!list.is_empty()).then_some(0)),
            Some(name) => list
                .iter()
                .position(|(n, _, _)| n.as_ref() == Some(&name))
                .map(Some)
                .ok_or(KubeconfigError::Dangling {
                    field: format!("{at}.{key}"),
                    what,
                }),
        }
    };
    let cluster = pick(&clusters, "cluster", "cluster")?.map(|i| &clusters[i]);
    let user = pick(&users, "user", "user")?.map(|i| &users[i]);
    let mut selected = Selected {
        server: None,
        ca: None,
        insecure_skip_tls_verify: false,
        tls_server_name: None,
        credential: Credential::None,
    };
    if let Some((_, c, at)) = cluster {
        if let Some(server) = string(c, at, "server")? {
            if !valid_server(&server) {
                return Err(KubeconfigError::Server {
                    field: format!("{at}.server"),
                });
            }
            selected.server = Some(server);
        }
        selected.ca = source(c, at, "certificate-authority-data", "certificate-authority")?;
        selected.insecure_skip_tls_verify = match c.get("insecure-skip-tls-verify") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(v) => {
                return Err(shape(
                    &format!("{at}.insecure-skip-tls-verify"),
                    v,
                    "a boolean",
                ));
            }
        };
        selected.tls_server_name = string(c, at, "tls-server-name")?.filter(|n| !n.is_empty());
        if selected
            .tls_server_name
            .as_deref()
            .is_some_and(|n| !valid_host(n))
        {
            return Err(KubeconfigError::Server {
                field: format!("{at}.tls-server-name"),
            });
        }
    }
    if let Some((_, u, at)) = user {
        selected.credential = credential(u, at)?;
    }
    Ok(Some(selected))
}

/// `https://host:port` -> (host, port); the host without brackets.
#[must_use]
pub fn split_server(server: &str) -> Option<(String, u16)> {
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

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str =
        "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzZWNyZXQtc3ViamVjdCJ9.U2VjcmV0U2lnbmF0dXJlWFla";

    fn good(user: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://10.0.0.1:6443\n    certificate-authority-data: Q0E=\n\
             users:\n- name: u\n  user:\n{user}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n"
        )
    }

    #[test]
    fn selects_like_client_go() {
        let s = parse(&good(&format!("    token: {TOKEN}")))
            .unwrap()
            .unwrap();
        assert_eq!(s.server.as_deref(), Some("https://10.0.0.1:6443"));
        assert_eq!(s.ca, Some(Source::Data("Q0E=".into())));
        assert_eq!(s.credential, Credential::Token(TOKEN.into()));
        assert!(!s.insecure_skip_tls_verify);
        assert!(
            !format!("{s:?}").contains("eyJ"),
            "Debug never shows secrets"
        );
        let s = parse(&good(
            "    client-certificate-data: Q0U=\n    client-key: /k.pem",
        ))
        .unwrap()
        .unwrap();
        assert_eq!(
            s.credential,
            Credential::ClientCertificate {
                cert: Source::Data("Q0U=".into()),
                key: Some(Source::File("/k.pem".into()))
            }
        );
        assert_eq!(
            parse("{\"name\": \"k8s-pod-network\", \"plugins\": []}").unwrap(),
            None
        );
        assert_eq!(parse("- a\n- b\n").unwrap(), None);
    }

    #[test]
    fn the_token_at_the_wrong_level_is_never_quoted() {
        let shapes = [
            format!("users:\n- name: u\n  user: {TOKEN}\n"),
            format!("users:\n- {TOKEN}\n"),
            format!("users: {TOKEN}\n"),
            format!("clusters:\n- name: c\n  cluster: {TOKEN}\n"),
            format!("users:\n- name: u\n  user:\n    token: [{TOKEN}]\n"),
            format!("users:\n- name: u\n  user:\n    tokenFile: {{a: {TOKEN}}}\n"),
            format!("clusters:\n- cluster:\n    server: {TOKEN}\n"),
            format!("clusters:\n- cluster:\n    server: https://{TOKEN}@host\n"),
            format!("clusters:\n- cluster:\n    insecure-skip-tls-verify: {TOKEN}\n"),
            format!("kind: Config\ncurrent-context: {TOKEN}\ncontexts: []\n"),
            format!("users:\n- name: u\n  user:\n    token: \"{TOKEN}\n"),
            format!("users:\n- name: u\n  user:\n   token: {TOKEN}\n  bad: [\n"),
            format!("users:\n- name: u\n  user:\n    token: {TOKEN}\n    token: {TOKEN}\n"),
        ];
        for text in &shapes {
            let err = parse(text).expect_err(text).to_string();
            for w in TOKEN.as_bytes().windows(8) {
                let w = std::str::from_utf8(w).unwrap();
                assert!(!err.contains(w), "error quotes the token: {err}\n{text}");
            }
        }
        let err = parse(&shapes[0]).unwrap_err().to_string();
        assert_eq!(
            err,
            "`users[0].user` is a string, expected a mapping (its value is not shown: it may be a secret)"
        );
    }

    #[test]
    fn servers() {
        for ok in [
            "https://10.0.0.1:6443",
            "https://api.example",
            "https://[fd00::1]:6443/",
            "https://localhost:6443/k8s",
        ] {
            assert!(valid_server(ok), "{ok}");
        }
        for bad in [
            "http://x:1",
            "https://",
            "https://a b",
            "https://x:0",
            "https://x:99999",
            "https://u:p@x",
            "https://[zz]:1",
            "https://x:1/\n",
        ] {
            assert!(!valid_server(bad), "{bad}");
        }
        assert_eq!(
            split_server("https://10.96.0.1:443"),
            Some(("10.96.0.1".into(), 443))
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

    #[test]
    fn dangling_names_and_insecure() {
        let text = "kind: Config\ncurrent-context: nope\ncontexts: []\n";
        assert_eq!(
            parse(text).unwrap_err(),
            KubeconfigError::Dangling {
                field: "current-context".into(),
                what: "context"
            }
        );
        let text = "clusters:\n- name: c\n  cluster:\n    server: https://h:1\n    insecure-skip-tls-verify: true\n";
        assert!(parse(text).unwrap().unwrap().insecure_skip_tls_verify);
        assert_eq!(shown_path("/etc/cni/ca.crt"), "/etc/cni/ca.crt");
        assert_eq!(shown_path("eyJhbGciOi"), "(a relative path, not shown)");
    }

    #[test]
    fn alias_bombs_and_deep_nesting_are_refused() {
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10u8 {
            let (this, prev) = ((b'a' + i) as char, (b'a' + i - 1) as char);
            let refs = vec![format!("*{prev}"); 10].join(", ");
            bomb.push_str(
                &[
                    this.to_string(),
                    ": &".into(),
                    this.to_string(),
                    " [".into(),
                    refs,
                    "]\n".into(),
                ]
                .concat(),
            );
        }
        bomb.push_str("kind: Config\n");
        let started = std::time::Instant::now();
        assert!(parse(&bomb).is_err());
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        let deep = format!(
            "kind: Config\nx: {}{}\n",
            "[".repeat(10_000),
            "]".repeat(10_000)
        );
        assert!(parse(&deep).is_err());
    }
}
