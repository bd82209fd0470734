//! `HTTPS_PROXY`: the proxy is used for real, and a refusing proxy is said; a proxy URL's
//! user and password are never printed, whatever its shape.

/// An HTTP/1 request's head (up to its blank line), byte by byte so nothing after it is taken.
async fn read_head(s: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte).await.unwrap();
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap()
}

/// A CONNECT proxy on loopback for one tunnel: answers `answer` to the CONNECT, then (on 200)
/// relays; returns the CONNECT line it was asked.
async fn proxy_once(listener: tokio::net::TcpListener, answer: &'static str) -> String {
    use tokio::io::AsyncWriteExt;
    let (mut down, _) = listener.accept().await.unwrap();
    let head = read_head(&mut down).await;
    let line = head.lines().next().unwrap_or_default().to_string();
    down.write_all(answer.as_bytes()).await.unwrap();
    if answer.starts_with("HTTP/1.1 200") {
        let target = line.split_whitespace().nth(1).unwrap().to_string();
        let mut up = tokio::net::TcpStream::connect(target).await.unwrap();
        let _ = tokio::io::copy_bidirectional(&mut down, &mut up).await;
    }
    line
}

/// A plain HTTP API server on loopback answering one request with `body`.
async fn api_once(listener: tokio::net::TcpListener, body: &'static str) {
    use tokio::io::AsyncWriteExt;
    let (mut s, _) = listener.accept().await.unwrap();
    read_head(&mut s).await;
    let reply = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(reply.as_bytes()).await.unwrap();
}

#[tokio::test]
async fn https_proxy_is_used_for_real_and_a_refusing_proxy_is_said() {
    use kube::config::Config;
    let bind = || tokio::net::TcpListener::bind("127.0.0.1:0");
    let (api, proxy) = (bind().await.unwrap(), bind().await.unwrap());
    let (api_at, proxy_at) = (api.local_addr().unwrap(), proxy.local_addr().unwrap());
    let server = tokio::spawn(api_once(api, r#"{"major":"1","minor":"33"}"#));
    let relay = tokio::spawn(proxy_once(
        proxy,
        "HTTP/1.1 200 Connection established\r\n\r\n",
    ));
    let client = |proxy: std::net::SocketAddr| {
        let mut config = Config::new(format!("http://{api_at}").parse().unwrap());
        config.proxy_url = Some(format!("http://{proxy}").parse().unwrap());
        prober::runtime::kube::configure(&mut config);
        // kube's `http-proxy` feature off: ProxyProtocolDisabled here, for every command.
        kube::Client::try_from(config).unwrap()
    };
    let get = || http::Request::get("/version").body(Vec::new()).unwrap();
    let text = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        client(proxy_at).request_text(get()),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(text.contains("\"minor\":\"33\""), "{text}");
    assert_eq!(relay.await.unwrap(), format!("CONNECT {api_at} HTTP/1.1"));
    server.await.unwrap();
    // A proxy that refuses the tunnel: an error, within the deadline, not a hang.
    let refusing = bind().await.unwrap();
    let refusing_at = refusing.local_addr().unwrap();
    let relay = tokio::spawn(proxy_once(refusing, "HTTP/1.1 403 Forbidden\r\n\r\n"));
    let err = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        client(refusing_at).request_text(get()),
    )
    .await
    .unwrap()
    .unwrap_err();
    relay.await.unwrap();
    let words = prober::runtime::kube::words::words(&err);
    assert!(
        words.contains("not reached: the proxy") && words.contains("NO_PROXY"),
        "{words}"
    );
}

/// `prober discover` with a kubeconfig whose `proxy-url` is `proxy` (none: the field left out)
/// and `HTTPS_PROXY` set to `env`: what it prints, stdout and stderr, and its exit code.
fn discover_through(proxy: Option<&str>, env: Option<&str>) -> (String, Option<i32>) {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let proxy_line = proxy.map_or(String::new(), |p| format!(", proxy-url: {p:?}"));
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {{server: \"https://127.0.0.1:1\", insecure-skip-tls-verify: true{proxy_line}}}
users:
- name: u
  user: {{token: not-a-secret}}
contexts:
- name: x
  context: {{cluster: c, user: u}}
current-context: x
"
        ),
    )
    .unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_prober"));
    cmd.args(["discover", "--kubeconfig"])
        .arg(&kubeconfig)
        .env_remove("https_proxy")
        .env_remove("NO_PROXY")
        .env_remove("no_proxy");
    match env {
        Some(e) => cmd.env("HTTPS_PROXY", e),
        None => cmd.env_remove("HTTPS_PROXY"),
    };
    let out = cmd.output().unwrap();
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (text, out.status.code())
}

#[test]
fn no_shape_of_proxy_url_prints_its_user_or_password() {
    // Each shape from the issue, and the plain ones: kube's own message, a scheme-less URL, a
    // password holding '/' or '#', a user alone, and the same from HTTPS_PROXY.
    let shapes = [
        "ftp://user:SECRET9@127.0.0.1:9",
        "user:SECRET8@127.0.0.1:9",
        "http://user:SEC/RET7@127.0.0.1:9",
        "http://user:pa#SECRET5@127.0.0.1:9",
        "http://user:12#SECRET6@127.0.0.1:9",
        "http://user:pa?SECRET3@127.0.0.1:9",
        "http://user:SECRET4@127.0.0.1:9",
        "socks5://user:SECRET2@127.0.0.1:9",
        "https://SECRET1@127.0.0.1:9",
        "http://us%40er:p%2FSECRET0@127.0.0.1:9",
    ];
    for shape in shapes {
        for (proxy, env) in [(Some(shape), None), (None, Some(shape))] {
            let (text, code) = discover_through(proxy, env);
            assert_eq!(code, Some(2), "{shape}: {text}");
            for secret in ["SEC", "user:", "us%40er", "p%2F"] {
                assert!(
                    !text.contains(secret),
                    "{shape} (proxy-url: {}) printed {secret:?}: {text}",
                    proxy.is_some()
                );
            }
            // Still says which proxy, by its address, when the address can be read.
            assert!(text.contains("proxy"), "{shape}: {text}");
        }
    }
}
