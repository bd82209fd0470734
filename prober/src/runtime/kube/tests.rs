//! Tests of the Kubernetes runtime: the client's timeouts and proxy, kubeconfigs read capped and merged.

use super::*;

#[test]
fn the_client_has_a_connect_timeout_and_no_read_timeout() {
    // A 30 s read timeout ended every watch quiet for 30 s ("cannot list agent pods") and
    // every exec session whose agent said nothing for 30 s.
    let mut config = Config::new("https://10.0.0.1:6443".parse().unwrap());
    config.read_timeout = Some(Duration::from_secs(30));
    configure(&mut config);
    assert_eq!(config.read_timeout, None);
    assert_eq!(config.connect_timeout, Some(CONNECT_TIMEOUT));
}

#[test]
fn https_proxy_is_supported_and_no_proxy_covering_the_server_bypasses_it() {
    // kube's `http-proxy` feature off: `Client::try_from` refused any HTTPS_PROXY
    // (ProxyProtocolDisabled), whatever NO_PROXY said.
    let mut config = Config::new("https://10.0.0.1:6443".parse().unwrap());
    config.proxy_url = Some("http://proxy.corp:3128".parse().unwrap());
    let client = || {
        let _guard = tokio::runtime::Runtime::new().unwrap().enter();
        kube::Client::try_from(config.clone()).map(|_| ())
    };
    assert!(client().is_ok(), "{:?}", client().err());
    // NO_PROXY covering the server: straight to it (kube checks it against the proxy).
    let mut direct = config.clone();
    route(
        &mut direct,
        Some("http://proxy.corp:3128"),
        Some("localhost,10.0.0.0/8"),
    );
    assert_eq!(direct.proxy_url, None);
    // Not covered: through the proxy.
    let mut proxied = config.clone();
    route(
        &mut proxied,
        Some("http://proxy.corp:3128"),
        Some("192.168.0.0/16"),
    );
    assert!(proxied.proxy_url.is_some());
    // The kubeconfig's own proxy-url is always used, as kubectl does.
    let mut own = config.clone();
    route(&mut own, Some("http://other:3128"), Some("10.0.0.0/8"));
    assert!(own.proxy_url.is_some());
}

#[test]
fn kubeconfig_and_home_configs_are_read_capped_and_merged_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let config = |ctx: &str, server: &str| {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {ctx}\n  cluster: {{server: \"{server}\"}}\n\
             users:\n- name: {ctx}\n  user: {{token: t}}\ncontexts:\n- name: {ctx}\n  context: {{cluster: {ctx}, user: {ctx}}}\ncurrent-context: {ctx}\n"
        )
    };
    let (a, b) = (dir.join("a"), dir.join("b"));
    std::fs::write(&a, config("a", "https://10.0.0.1:6443")).unwrap();
    std::fs::write(&b, config("b", "https://10.0.0.2:6443")).unwrap();
    std::fs::create_dir(dir.join(".kube")).unwrap();
    std::fs::write(
        dir.join(".kube/config"),
        config("home", "https://10.0.0.3:6443"),
    )
    .unwrap();
    // KUBECONFIG: both files, the first one's current-context wins, as kube merges them.
    let list = std::env::join_paths([&a, &b]).unwrap();
    let (kc, name) = read_default_kubeconfig(Some(&list), Some(dir))
        .unwrap()
        .unwrap();
    assert_eq!(kc.current_context.as_deref(), Some("a"));
    assert_eq!(kc.clusters.len(), 2, "{kc:?}");
    assert_eq!(name, list.to_string_lossy());
    // No KUBECONFIG (or only empty entries): ~/.kube/config.
    let empty = std::ffi::OsString::from(":");
    for env in [None, Some(empty.as_os_str())] {
        let (kc, name) = read_default_kubeconfig(env, Some(dir)).unwrap().unwrap();
        assert_eq!(kc.current_context.as_deref(), Some("home"));
        assert_eq!(name, dir.join(".kube/config").display().to_string());
    }
    // Neither: nothing, the in-cluster account comes next.
    assert!(
        read_default_kubeconfig(None, Some(&dir.join("nowhere")))
            .unwrap()
            .is_none()
    );
    // A file in the list larger than the cap is refused before it is read, naming it.
    let huge = dir.join("huge");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(MAX_KUBECONFIG_BYTES + 1)
        .unwrap();
    let list = std::env::join_paths([&a, &huge]).unwrap();
    let err = read_default_kubeconfig(Some(&list), None)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&huge.display().to_string()) && err.contains("larger than"),
        "{err}"
    );
}

#[test]
fn a_kubeconfig_is_read_capped_and_its_relative_files_resolved() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let file = dir.join("config");
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://10.0.0.1:6443\n    certificate-authority: pki/ca.crt\n\
         users:\n- name: u\n  user:\n    client-certificate: /abs/u.crt\n    client-key: u.key\n    exec: {command: aws, apiVersion: client.authentication.k8s.io/v1}\n\
         contexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n",
    )
    .unwrap();
    let kc = read_kubeconfig(&file).unwrap();
    let cluster = kc.clusters[0].cluster.as_ref().unwrap();
    let ca = dir.join("pki/ca.crt");
    assert_eq!(cluster.certificate_authority.as_deref(), ca.to_str());
    let user = kc.auth_infos[0].auth_info.as_ref().unwrap();
    assert_eq!(user.client_certificate.as_deref(), Some("/abs/u.crt"));
    assert_eq!(user.client_key.as_deref(), dir.join("u.key").to_str());
    assert_eq!(
        user.exec.as_ref().and_then(|e| e.command.as_deref()),
        Some("aws"),
        "a bare command stays a PATH lookup"
    );
    // Larger than the cap: refused before it is read, naming the file.
    let huge = dir.join("huge");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(MAX_KUBECONFIG_BYTES + 1)
        .unwrap();
    let err = read_kubeconfig(&huge).unwrap_err().to_string();
    assert!(
        err.contains(&huge.display().to_string()) && err.contains("larger than"),
        "{err}"
    );
    let err = read_kubeconfig(Path::new("/dev/zero"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("/dev/zero is a character device, not a regular file"),
        "{err}"
    );
    std::fs::write(&file, "clusters: [").unwrap();
    let err = read_kubeconfig(&file).unwrap_err().to_string();
    assert!(err.starts_with(&file.display().to_string()), "{err}");
}

/// Issue 26, item 2: a kubeconfig's referenced files are read like the kubeconfig itself:
/// a device, a FIFO or a huge file fails at once, naming the entry and the field, instead of
/// reading until memory runs out (or, for a FIFO, waiting for a writer forever).
#[test]
fn files_a_kubeconfig_points_to_are_read_capped_and_never_block() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let fifo = dir.join("key-fifo");
    nix::unistd::mkfifo(
        &fifo,
        nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR,
    )
    .unwrap();
    let huge = dir.join("huge-token");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(MAX_REFERENCED_BYTES + 1)
        .unwrap();
    let fifo = fifo.display().to_string();
    let huge = huge.display().to_string();
    let cases = [
        (
            "certificate-authority: /dev/zero",
            "",
            "certificate-authority",
            "/dev/zero",
        ),
        (
            "",
            "client-certificate: /dev/zero",
            "client-certificate",
            "/dev/zero",
        ),
        (
            "",
            &format!("client-key: {fifo}"),
            "client-key",
            fifo.as_str(),
        ),
        (
            "",
            &format!("tokenFile: {huge}"),
            "tokenFile",
            huge.as_str(),
        ),
    ];
    for (cluster, user, field, path) in cases {
        let file = dir.join("config");
        let cluster = if cluster.is_empty() {
            "insecure-skip-tls-verify: true"
        } else {
            cluster
        };
        let user = if user.is_empty() { "token: t" } else { user };
        std::fs::write(
            &file,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\n    {cluster}\n\
                 users:\n- name: u\n  user:\n    {user}\n\
                 contexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n"
            ),
        )
        .unwrap();
        let mut kc = read_kubeconfig(&file).unwrap();
        // A FIFO that blocked the read would hang here: wait in a thread, and call a
        // minute without an answer a hang (not a speed target: the answer is immediate).
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(inline_files(&mut kc, None, "K").map_err(|e| e.to_string()));
        });
        let err = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("{field}: reading {path} blocked"))
            .unwrap_err();
        assert!(
            err.contains(field) && err.contains(path),
            "{field}: the error names the field and the file: {err}"
        );
    }
}
