//! Bearer tokens that cannot be an HTTP header value (a line break, a control character, DEL),
//! from each place a token comes from: refused before any client is built, naming where the
//! token came from and never printing it. kube would panic on them (exit 101). And an exec
//! plugin's token refused with a 401: the plugin is run again and the request sent again.

/// `prober discover` with a kubeconfig (in its own directory) whose user `u` is `user` (a
/// flow mapping): what it prints, stdout and stderr, and its exit code. `files` are written
/// beside it first.
fn discover_as(user: &str, files: &[(&str, &[u8])]) -> (String, Option<i32>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in files {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let mut perm = std::fs::metadata(&path).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        std::fs::set_permissions(&path, perm).unwrap();
    }
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {{server: \"https://127.0.0.1:1\", insecure-skip-tls-verify: true}}
users:
- name: the-user
  user: {user}
contexts:
- name: x
  context: {{cluster: c, user: the-user}}
current-context: x
"
        ),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_prober"))
        .args(["discover", "--kubeconfig"])
        .arg(&kubeconfig)
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (text, out.status.code(), dir)
}

/// The run was refused in words that name `place` and say the token is the problem, with
/// exit 2, and without the token itself.
fn refused(text: &str, code: Option<i32>, place: &str) {
    assert_eq!(code, Some(2), "{text}");
    assert!(!text.contains("panicked"), "{text}");
    assert!(text.contains(place), "does not name {place:?}: {text}");
    assert!(text.contains("token"), "{text}");
    assert!(!text.contains("SECRET"), "printed the token: {text}");
}

#[test]
fn a_kubeconfig_token_with_a_control_character_is_refused_by_user() {
    for token in [r#""SECRETx\n""#, r#""SECRET\x7fy""#, r#""SEC\rRET""#] {
        let (text, code, _dir) = discover_as(&format!("{{token: {token}}}"), &[]);
        refused(&text, code, "user the-user");
    }
}

#[test]
fn a_token_file_with_a_line_break_inside_is_refused_by_path() {
    let (text, code, dir) = discover_as("{tokenFile: tok}", &[("tok", b"SECRETa\r\nSECRETb\n")]);
    refused(&text, code, &dir.path().join("tok").display().to_string());
    // One trailing line break is what every editor leaves: trimmed, as client-go trims it,
    // and the run goes on to the (unreachable) server.
    let (text, code, _dir) = discover_as("{tokenFile: tok}", &[("tok", b"SECRET\n")]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("cannot reach") || text.contains("not reached"),
        "{text}"
    );
    assert!(!text.contains("SECRET"), "{text}");
}

#[test]
fn an_exec_plugin_token_with_crlf_is_refused_by_command() {
    let script = b"#!/bin/sh\nprintf '%s' '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"SECRET\\r\\n\"}}'\n";
    let (text, code, _dir) = discover_as(
        "{exec: {apiVersion: client.authentication.k8s.io/v1, command: ./get-token.sh, interactiveMode: Never}}",
        &[("get-token.sh", script)],
    );
    refused(&text, code, "get-token.sh");
}

/// A plain HTTP API server on loopback that refuses every token but `good` (401) and answers
/// `/version` to it; returns the bearer tokens it was sent, in order, once `stop` fires.
async fn api_accepting(
    listener: tokio::net::TcpListener,
    good: &'static str,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) -> Vec<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut seen = Vec::new();
    loop {
        let mut s = tokio::select! {
            a = listener.accept() => a.unwrap().0,
            _ = &mut stop => return seen,
        };
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            s.read_exact(&mut byte).await.unwrap();
            head.push(byte[0]);
        }
        let head = String::from_utf8(head).unwrap();
        let token = head
            .lines()
            .find_map(|l| l.strip_prefix("authorization: Bearer "))
            .unwrap_or_default()
            .to_string();
        let (status, body) = if token == good {
            ("200 OK", r#"{"major":"1","minor":"33"}"#)
        } else {
            ("401 Unauthorized", r#"{"kind":"Status","code":401}"#)
        };
        seen.push(token);
        let reply = format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        s.write_all(reply.as_bytes()).await.unwrap();
    }
}

#[tokio::test]
async fn an_exec_plugin_token_refused_with_401_is_fetched_again_and_the_request_resent() {
    let dir = tempfile::tempdir().unwrap();
    // Each run hands out the next token (tok-1, tok-2, ...), valid for an hour.
    let script = dir.path().join("get-token.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nn=$(cat \"$0.n\" 2>/dev/null || echo 0); n=$((n+1)); echo $n > \"$0.n\"\n\
         printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"tok-%s\",\"expirationTimestamp\":\"2999-01-01T00:00:00Z\"}}' $n\n",
    )
    .unwrap();
    let mut perm = std::fs::metadata(&script).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&script, perm).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let server = tokio::spawn(api_accepting(listener, "tok-2", stopped));
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"http://{at}\"}}\n\
             users:\n- name: u\n  user: {{exec: {{apiVersion: client.authentication.k8s.io/v1, command: ./get-token.sh, interactiveMode: Never}}}}\n\
             contexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n"
        ),
    )
    .unwrap();
    let (client, _, _) = prober::runtime::kube::client(Some(&kubeconfig), None)
        .await
        .unwrap();
    let get = || http::Request::get("/version").body(Vec::new()).unwrap();
    let text = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        client.request_text(get()),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(text.contains("\"minor\":\"33\""), "{text}");
    stop.send(()).unwrap();
    assert_eq!(server.await.unwrap(), ["tok-1", "tok-2"]);
}
