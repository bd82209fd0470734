//! The node check over fixture host roots: every kind of CNI kubeconfig gives the right facts and
//! a clear message, never a panic, and no token segment ever appears in the output. No network.

// A test: it reads fixtures and the clock freely (clippy.toml bans them in shipped code).
#![allow(clippy::disallowed_methods)]

mod common;

use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use probe_pod::proto::{NodeFacts, ProbeResult};

fn jwt(claims: &serde_json::Value) -> String {
    let h = URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256","kid":"fixture"}"#);
    let p = URL_SAFE_NO_PAD.encode(claims.to_string());
    format!(
        "{h}.{p}.{}",
        URL_SAFE_NO_PAD.encode(b"not-a-real-signature")
    )
}

fn bound(iat: u64, exp: u64, sa: &str) -> String {
    jwt(&serde_json::json!({
        "aud": ["https://kubernetes.default.svc.cluster.local"], "iat": iat, "nbf": iat, "exp": exp,
        "iss": "https://kubernetes.default.svc.cluster.local", "sub": format!("system:serviceaccount:kube-system:{sa}"),
        "kubernetes.io": {"namespace": "kube-system", "serviceaccount": {"name": sa, "uid": "1"}}
    }))
}

fn kubeconfig(server: &str, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: {server}\n    certificate-authority-data: Cg==\n\
         users:\n- name: u\n  user:\n{user}\ncontexts:\n- name: c\n  context:\n    cluster: local\n    user: u\ncurrent-context: c\n"
    )
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[test]
#[allow(clippy::too_many_lines, clippy::many_single_char_names)] // one fixture root, checked file by file
fn fixture_kubeconfigs_give_the_right_facts() {
    let tmp_root = tempfile::Builder::new()
        .prefix("probe-pod-node-")
        .tempdir()
        .unwrap();
    let root = tmp_root.path().to_path_buf();
    let t = now();
    let expired = bound(t - 90_000, t - 3600, "calico-cni-plugin");
    let fresh = bound(t - 60, t + 3600, "calico-cni-plugin");
    let stale = bound(t - 3 * 3600, t + 365 * 86400, "multus");
    let legacy = jwt(
        &serde_json::json!({"iss": "kubernetes/serviceaccount", "sub": "system:serviceaccount:kube-system:flannel",
        "kubernetes.io/serviceaccount/namespace": "kube-system", "kubernetes.io/serviceaccount/service-account.name": "flannel"}),
    );
    let server = "https://10.96.0.1:443";
    write(
        &root,
        "etc/cni/net.d/calico-kubeconfig",
        &kubeconfig(server, &format!("    token: {expired}")),
    );
    write(
        &root,
        "etc/cni/net.d/fresh/calico-kubeconfig",
        &kubeconfig(server, &format!("    token: {fresh}")),
    );
    write(
        &root,
        "etc/cni/net.d/multus.d/multus.kubeconfig",
        &kubeconfig(server, &format!("    token: {stale}")),
    );
    write(
        &root,
        "etc/cni/net.d/cert.kubeconfig",
        &kubeconfig(
            server,
            "    client-certificate: /var/lib/c.pem\n    client-key: /var/lib/c.pem",
        ),
    );
    write(
        &root,
        "etc/cni/net.d/broken.kubeconfig",
        "clusters: [ {name: x, cluster: {server: https://x\n  - oops: [",
    );
    write(
        &root,
        "etc/cni/net.d/opaque.kubeconfig",
        &kubeconfig(server, "    token: 0123456789abcdef"),
    );
    write(
        &root,
        "etc/cni/net.d/legacy.kubeconfig",
        &kubeconfig(server, &format!("    token: {legacy}")),
    );
    write(
        &root,
        "etc/cni/net.d/10-calico.conflist",
        r#"{"name": "k8s-pod-network", "plugins": [{"type": "calico"}]}"#,
    );
    write(
        &root,
        "etc/kubernetes/kubelet.conf",
        &kubeconfig(
            "https://localhost:6443",
            "    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem",
        ),
    );
    write(
        &root,
        "etc/resolv.conf",
        "nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch .\n",
    );

    let plan = serde_json::json!({"deadlineMs": 3000, "probes": [{"id": "n", "kind": "node", "root": root, "apiCheck": false}]});
    let (code, stdout, stderr) = common::probe_with(&[], &plan.to_string());
    assert_eq!(code, Some(0), "{stderr}");
    for token in [&expired, &fresh, &stale, &legacy] {
        for seg in token.split('.') {
            assert!(
                !stdout.contains(seg),
                "a token segment leaked into the output"
            );
        }
    }
    assert!(
        !stdout.contains("0123456789abcdef"),
        "the opaque token leaked"
    );
    let r: ProbeResult = serde_json::from_str(stdout.trim()).unwrap();
    let facts: NodeFacts = *r.node.expect("facts");
    let kc = |p: &str| {
        facts
            .cni_kubeconfigs
            .iter()
            .find(|k| k.path == p)
            .unwrap_or_else(|| panic!("no {p}: {facts:#?}"))
    };
    assert_eq!(
        facts.cni_kubeconfigs.len(),
        7,
        "the conflist is not a kubeconfig: {facts:#?}"
    );

    let e = kc("/etc/cni/net.d/calico-kubeconfig")
        .token
        .clone()
        .unwrap();
    assert_eq!(
        (e.format.as_str(), e.expires_at, e.bound),
        ("jwt", Some(t - 3600), true)
    );
    assert!(e.expires_at.unwrap() < e.checked_at, "expired");
    assert_eq!(e.service_account.as_deref(), Some("calico-cni-plugin"));
    let f = kc("/etc/cni/net.d/fresh/calico-kubeconfig")
        .token
        .clone()
        .unwrap();
    assert!(
        f.expires_at.unwrap() > f.checked_at && f.checked_at - f.issued_at.unwrap() < 3600,
        "fresh"
    );
    let s = kc("/etc/cni/net.d/multus.d/multus.kubeconfig")
        .token
        .clone()
        .unwrap();
    assert!(
        s.bound && s.checked_at - s.issued_at.unwrap() > 3600,
        "stale: a bound token older than an hour"
    );
    assert_eq!(s.service_account.as_deref(), Some("multus"));
    let c = kc("/etc/cni/net.d/cert.kubeconfig");
    assert_eq!(
        (c.auth.as_str(), c.token.is_none()),
        ("client-certificate", true)
    );
    let b = kc("/etc/cni/net.d/broken.kubeconfig");
    assert!(
        b.error
            .as_deref()
            .is_some_and(|e| e.contains("not valid YAML") && e.contains("broken.kubeconfig")),
        "{b:#?}"
    );
    let o = kc("/etc/cni/net.d/opaque.kubeconfig")
        .token
        .clone()
        .unwrap();
    assert_eq!(o.format, "opaque");
    let l = kc("/etc/cni/net.d/legacy.kubeconfig")
        .token
        .clone()
        .unwrap();
    assert_eq!(
        (l.format.as_str(), l.expires_at, l.bound),
        ("jwt", None, false),
        "legacy secret token: no expiry"
    );
    assert_eq!(l.service_account.as_deref(), Some("flannel"));
    assert_eq!(
        facts.kubelet[0].server.as_deref(),
        Some("https://localhost:6443")
    );
    assert_eq!(
        facts.kubelet[0].check.as_ref().unwrap().outcome,
        probe_pod::proto::Outcome::Refused,
        "nothing listens on localhost:6443 here"
    );
    assert_eq!(facts.resolv_conf.unwrap().nameservers, ["127.0.0.53"]);
    assert!(facts.errors.iter().any(|e| e.contains("broken.kubeconfig")));
}

#[test]
fn a_missing_root_is_an_error_naming_it() {
    let plan = serde_json::json!({"deadlineMs": 1000, "probes": [{"id": "n", "kind": "node", "root": "/nonexistent/host"}]});
    let (code, stdout, _) = common::probe_with(&[], &plan.to_string());
    assert_eq!(code, Some(0));
    let r: ProbeResult = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(r.outcome, probe_pod::proto::Outcome::Error);
    assert!(r.detail.contains("/nonexistent/host"), "{}", r.detail);
}
