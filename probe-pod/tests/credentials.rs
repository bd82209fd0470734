//! The node check's credential test against real TLS servers in namespaces: the credential goes
//! only to a server that verifies against the kubeconfig's own CA. An impostor (a certificate from
//! another CA at the kubeconfig's address) never receives the token, and the report says why.

mod common;

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use common::tls_server::{GOOD_TOKEN, TlsServer, pki};
use common::{Routed, SERVER};
use probe_pod::proto::{KubeconfigFacts, NodeFacts, Outcome, ServerTrust};

fn token(case: &str) -> String {
    format!(
        "eyJhbGciOiJub25lIn0.{}.c2lnbmF0dXJl",
        URL_SAFE_NO_PAD.encode(format!("{{\"sub\":\"{case}\"}}"))
    )
}

fn kubeconfig(server: &str, cluster: &str, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n{cluster}\
         users:\n- name: u\n  user:\n{user}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n\
         current-context: x\n"
    )
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

#[test]
#[allow(clippy::too_many_lines)] // one host root, every kind of kubeconfig, checked one by one
fn the_credential_goes_only_to_a_server_the_kubeconfig_ca_vouches_for() {
    if !common::require_root() {
        return;
    }
    let net = Routed::new();
    let tmp = tempfile::Builder::new()
        .prefix("ppt-cred-")
        .tempdir()
        .unwrap();
    let dir = tmp.path();
    let ip: IpAddr = SERVER.parse().unwrap();
    let real = pki(&dir.join("real"), ip);
    let other = pki(&dir.join("other"), ip);
    let api = TlsServer::start(&net.server.path(), (ip, 6443).into(), &real);
    let impostor = TlsServer::start(&net.server.path(), (ip, 6444).into(), &other);

    let root = dir.join("host");
    let ca = |p: &common::tls_server::Pki| {
        format!(
            "    certificate-authority-data: {}\n",
            STANDARD.encode(&p.ca_pem)
        )
    };
    let with_token = |t: &str| format!("    token: {t}");
    let api_url = format!("https://{SERVER}:6443");
    let impostor_url = format!("https://{SERVER}:6444");
    let net_d = "etc/cni/net.d";
    let cases: Vec<(&str, String, String, String)> = vec![
        ("good", api_url.clone(), ca(&real), with_token(GOOD_TOKEN)),
        (
            "relative",
            api_url.clone(),
            "    certificate-authority: pki/ca.pem\n".into(),
            with_token(&token("relative")),
        ),
        (
            "impostor",
            impostor_url.clone(),
            ca(&real),
            with_token(&token("impostor")),
        ),
        (
            "rotated",
            api_url.clone(),
            ca(&other),
            with_token(&token("rotated")),
        ),
        (
            "wrongname",
            api_url.clone(),
            format!("{}    tls-server-name: other.test\n", ca(&real)),
            with_token(&token("wrongname")),
        ),
        (
            "insecure",
            impostor_url.clone(),
            "    insecure-skip-tls-verify: true\n".into(),
            with_token(&token("insecure")),
        ),
        (
            "both",
            api_url.clone(),
            format!("{}    insecure-skip-tls-verify: true\n", ca(&real)),
            with_token(&token("both")),
        ),
        (
            "noca",
            api_url.clone(),
            String::new(),
            with_token(&token("noca")),
        ),
        (
            "zero-ca",
            api_url.clone(),
            "    certificate-authority: /dev/zero\n".into(),
            with_token(&token("zero-ca")),
        ),
        (
            "zero-token",
            api_url.clone(),
            ca(&real),
            "    tokenFile: /dev/zero-token".into(),
        ),
        (
            "client",
            api_url.clone(),
            ca(&real),
            format!(
                "    client-certificate-data: {}\n    client-key-data: {}",
                STANDARD.encode(&real.client_cert_pem),
                STANDARD.encode(&real.client_key_pem)
            ),
        ),
    ];
    for (name, server, cluster, user) in &cases {
        write(
            &root,
            &format!("{net_d}/{name}.kubeconfig"),
            &kubeconfig(server, cluster, user),
        );
    }
    write(&root, &format!("{net_d}/pki/ca.pem"), &real.ca_pem);
    std::fs::create_dir_all(root.join("dev")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", root.join("dev/zero")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", root.join("dev/zero-token")).unwrap();

    let started = std::time::Instant::now();
    let plan = serde_json::json!({"deadlineMs": 6000, "probeTimeoutMs": 3000,
        "probes": [{"id": "n", "kind": "node", "root": root}]});
    let (code, stdout, stderr) = net.client.probe_raw(&plan.to_string());
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "bounded, /dev/zero too"
    );
    for (name, ..) in &cases {
        let t = token(name);
        for w in t.as_bytes().windows(8).skip(20) {
            let w = std::str::from_utf8(w).unwrap();
            assert!(
                !stdout.contains(w) && !stderr.contains(w),
                "{name}: a token fragment leaked"
            );
        }
    }
    let r: probe_pod::proto::ProbeResult = serde_json::from_str(stdout.trim()).unwrap();
    let facts: NodeFacts = *r.node.expect("node facts");
    let by: HashMap<String, KubeconfigFacts> = facts
        .cni_kubeconfigs
        .iter()
        .map(|k| {
            let name = k
                .path
                .rsplit('/')
                .next()
                .unwrap()
                .trim_end_matches(".kubeconfig");
            (name.to_string(), k.clone())
        })
        .collect();
    let check = |name: &str| {
        let k = &by[name];
        let c = k
            .check
            .clone()
            .unwrap_or_else(|| panic!("{name}: no check: {k:#?}"));
        (c.outcome, c.detail, k.server_trust)
    };
    let heads = |s: &TlsServer| {
        s.received()
            .into_iter()
            .map(|r| r.head)
            .collect::<Vec<_>>()
            .join("\n")
    };
    let seen = format!("{}\n{}", heads(&api), heads(&impostor));
    let sent = |name: &str| seen.contains(&format!("Bearer {}", token(name)));

    // The real server, verified: the credential is sent and judged.
    assert_eq!(check("good").0, Outcome::Ok, "{:#?}", by["good"]);
    assert_eq!(check("good").2, Some(ServerTrust::Verified));
    assert!(heads(&api).contains(&format!("Bearer {GOOD_TOKEN}")));
    assert_eq!(
        (check("relative").0, check("relative").2),
        (Outcome::Unauthorized, Some(ServerTrust::Verified)),
        "a relative CA file is read from the kubeconfig's directory: {:#?}",
        by["relative"]
    );
    assert!(sent("relative"));

    // An impostor at the kubeconfig's address, a rotated CA, a certificate for another name:
    // never sent, and said so.
    for name in ["impostor", "rotated", "wrongname"] {
        let (outcome, detail, trust) = check(name);
        assert_eq!(
            (outcome, trust),
            (Outcome::TlsError, Some(ServerTrust::Untrusted)),
            "{name}: {detail}"
        );
        assert!(
            detail.contains("the credential was not sent"),
            "{name}: {detail}"
        );
        assert!(
            !sent(name),
            "{name}: the token reached a server that did not verify"
        );
    }
    let (_, detail, _) = check("impostor");
    assert!(
        detail.contains(&format!(
            "the API server at {impostor_url} is not signed by the CA this kubeconfig trusts: rotated CA or impostor"
        )),
        "{detail}"
    );
    assert!(
        check("wrongname").1.contains("for another name"),
        "{}",
        check("wrongname").1
    );

    // insecure-skip-tls-verify alone: whoever answers would get it and its "200" would prove
    // nothing, so it is never sent; what the token's own claims say is still reported.
    let (outcome, detail, trust) = check("insecure");
    assert_eq!(
        (outcome, trust),
        (Outcome::Error, Some(ServerTrust::InsecureSkipVerify)),
        "{detail}"
    );
    assert!(detail.contains("the credential was not sent"), "{detail}");
    assert!(by["insecure"].insecure_skip_tls_verify);
    assert!(!sent("insecure"), "the token went to an unverified server");
    assert_eq!(
        by["insecure"]
            .token
            .as_ref()
            .and_then(|t| t.subject.as_deref()),
        Some("insecure"),
        "the token's claims are still read"
    );

    // Nothing to verify against: never sent.
    for name in ["both", "noca", "zero-ca"] {
        let (outcome, detail, trust) = check(name);
        assert_eq!(
            (outcome, trust),
            (Outcome::Error, Some(ServerTrust::Unverifiable)),
            "{name}: {detail}"
        );
        assert!(!sent(name), "{name}");
    }
    assert!(
        check("zero-ca")
            .1
            .contains("/dev/zero is a character device"),
        "{}",
        check("zero-ca").1
    );
    let zt = &by["zero-token"];
    assert!(zt.check.is_none(), "{zt:#?}");
    assert!(
        zt.error
            .as_deref()
            .is_some_and(|e| e.contains("/dev/zero-token is a character device")),
        "{zt:#?}"
    );

    // A client certificate is presented, once the server verified.
    assert_eq!(
        (check("client").0, check("client").2),
        (Outcome::Ok, Some(ServerTrust::Verified))
    );
    assert!(
        api.received()
            .iter()
            .any(|r| r.client_certificate && !r.head.contains("Bearer"))
    );
    assert!(impostor.received().iter().all(|r| !r.client_certificate));
}
