//! The node checks (`node_config.rs`): CNI credentials by state, the API server's CA, the
//! kubelet's API address, resolv.conf's forward loop, a component's kubeconfig found nowhere.

use super::*;
use probe_proto::{CheckFacts, KubeconfigFacts, NodeFacts, ResolvFacts, TokenFacts};
use std::path::PathBuf;

mod credential_owner;
mod cycle_endpoint;

const NOW: u64 = 1_800_000_000;

fn token(iat: u64, exp: Option<u64>, bound: bool) -> TokenFacts {
    TokenFacts {
        format: "jwt".into(),
        subject: Some("system:serviceaccount:kube-system:calico-cni-plugin".into()),
        issued_at: Some(iat),
        expires_at: exp,
        bound,
        service_account: Some("calico-cni-plugin".into()),
        namespace: Some("kube-system".into()),
        checked_at: NOW,
        ..TokenFacts::default()
    }
}

fn kubeconfig(path: &str, t: Option<TokenFacts>, api: Option<Outcome>) -> KubeconfigFacts {
    KubeconfigFacts {
        path: path.into(),
        server: Some("https://10.96.0.1:443".into()),
        auth: if t.is_some() {
            "token".into()
        } else {
            "client-certificate".into()
        },
        token: t,
        check: api.map(|o| CheckFacts {
            outcome: o,
            http_status: None,
            detail: String::new(),
        }),
        ..KubeconfigFacts::default()
    }
}

/// A run where every probe works and each node's host agent read `facts(node)`.
fn with_facts(inv: &mut Inventory, facts: &dyn Fn(&str) -> NodeFacts) -> Vec<Finding> {
    for n in &mut inv.nodes {
        n.host_root = Some(PathBuf::from(format!("/state/{}", n.name)));
    }
    let results: Vec<ResultRecord> = plan(inv, &Filter::default())
        .to_vec()
        .iter()
        .map(|p| {
            let mut result = ProbeResult::new(p.id.clone(), Outcome::Ok, "ok");
            if p.path == PathClass::NodeConfig {
                result.node = Some(Box::new(facts(&p.from.node)));
            }
            ResultRecord {
                unknown: None,
                path: p.path,
                from: p.from.clone(),
                to: p.to.clone(),
                result,
            }
        })
        .collect();
    diagnose(inv, &Results::of(&results), &[])
}

fn base(node: &str) -> NodeFacts {
    NodeFacts {
        root: format!("/state/{node}"),
        kubelet: vec![KubeconfigFacts {
            path: "/etc/kubernetes/kubelet.conf".into(),
            server: Some("https://192.168.56.10:6443".into()),
            auth: "client-certificate".into(),
            check: Some(CheckFacts {
                outcome: Outcome::Ok,
                http_status: None,
                detail: String::new(),
            }),
            ..KubeconfigFacts::default()
        }],
        resolv_conf: Some(ResolvFacts {
            nameservers: vec!["192.168.56.1".into()],
            search: Vec::new(),
        }),
        ..NodeFacts::default()
    }
}

#[test]
fn an_impostor_or_rotated_ca_is_an_error_and_skip_verify_a_warning() {
    let mut inv = inventory(3, 1, "calico");
    let f = with_facts(&mut inv, &|node| {
        let mut f = base(node);
        let mut kc = kubeconfig(
            "/etc/cni/net.d/calico-kubeconfig",
            Some(token(NOW - 60, Some(NOW + 86_400), true)),
            None,
        );
        match node {
            "n1" => kc.server_trust = Some(probe_proto::ServerTrust::Untrusted),
            "n2" => {
                kc.insecure_skip_tls_verify = true;
                kc.server_trust = Some(probe_proto::ServerTrust::InsecureSkipVerify);
                kc.check = Some(CheckFacts {
                    outcome: Outcome::Ok,
                    http_status: None,
                    detail: String::new(),
                });
            }
            _ => kc.server_trust = Some(probe_proto::ServerTrust::Verified),
        }
        f.cni_kubeconfigs = vec![kc];
        f
    });
    assert_eq!(kinds(&f), [Kind::Credential, Kind::Credential], "{f:#?}");
    let untrusted = f
        .iter()
        .find(|x| x.facts().state().map(State::as_str) == Some("untrusted-server"))
        .expect("untrusted finding");
    assert_eq!(untrusted.severity, Severity::Error);
    assert_eq!(untrusted.facts().nodes(), ["n1"]);
    assert!(
        untrusted.summary.contains("rotated CA or an impostor"),
        "{}",
        untrusted.summary
    );
    let insecure = f
        .iter()
        .find(|x| x.facts().state().map(State::as_str) == Some("insecure"))
        .expect("insecure finding");
    assert_eq!(insecure.severity, Severity::Warning);
    assert_eq!(insecure.facts().nodes(), ["n2"]);
}

#[test]
fn credentials_by_state() {
    let mut inv = inventory(3, 1, "calico");
    let f = with_facts(&mut inv, &|node| {
        let mut f = base(node);
        let kc = match node {
            "n1" => kubeconfig(
                "/etc/cni/net.d/calico-kubeconfig",
                Some(token(NOW - 90_000, Some(NOW - 3600), true)),
                Some(Outcome::Unauthorized),
            ),
            "n2" => kubeconfig(
                "/etc/cni/net.d/multus.d/multus.kubeconfig",
                Some(token(NOW - 3 * 3600, Some(NOW + 86_400), true)),
                Some(Outcome::Ok),
            ),
            _ => kubeconfig(
                "/etc/cni/net.d/calico-kubeconfig",
                Some(token(NOW - 60, Some(NOW + 86_400), true)),
                Some(Outcome::Ok),
            ),
        };
        f.cni_kubeconfigs = vec![kc];
        f
    });
    assert_eq!(kinds(&f), [Kind::Credential, Kind::Credential], "{f:#?}");
    assert!(
        f.iter().any(
            |x| like(json!({"state": "expired", "severity": "error", "nodes": ["n1"]})).matches(x)
        ),
        "{f:#?}"
    );
    assert!(
        f.iter().any(
            |x| like(json!({"state": "stale", "severity": "warning", "nodes": ["n2"]})).matches(x)
        ),
        "{f:#?}"
    );
    let expired = f
        .iter()
        .find(|x| x.facts().state().map(State::as_str) == Some("expired"))
        .unwrap();
    assert!(
        expired.summary.contains("rejects it (HTTP 401)")
            && expired.summary.contains("calico-cni-plugin"),
        "{}",
        expired.summary
    );
    assert!(
        expired
            .fix
            .iter()
            .any(|l| l.contains("spec.nodeName=n1") && l.contains("TokenRequest")),
        "{:#?}",
        expired.fix
    );
}

#[test]
fn rejected_and_legacy_tokens() {
    let mut inv = inventory(2, 1, "calico");
    let f = with_facts(&mut inv, &|node| {
        let mut f = base(node);
        f.cni_kubeconfigs = vec![match node {
            "n1" => kubeconfig(
                "/etc/cni/net.d/calico-kubeconfig",
                Some(token(NOW - 60, Some(NOW + 3600), true)),
                Some(Outcome::Unauthorized),
            ),
            _ => kubeconfig(
                "/etc/cni/net.d/flannel.kubeconfig",
                Some(token(NOW - 86_400 * 400, None, false)),
                Some(Outcome::Ok),
            ),
        }];
        f
    });
    assert!(
        f.iter().any(
            |x| like(json!({"kind": "credential", "state": "rejected", "nodes": ["n1"]}))
                .matches(x)
        ),
        "{f:#?}"
    );
    assert!(f.iter().any(|x| like(json!({"kind": "credential", "state": "non-expiring", "severity": "warning", "nodes": ["n2"]})).matches(x)), "{f:#?}");
}

#[test]
fn an_unreadable_cni_kubeconfig_is_a_credential_error_and_other_files_a_warning() {
    let mut inv = inventory(3, 1, "calico");
    let f = with_facts(&mut inv, &|node| {
        let mut f = base(node);
        match node {
            "n1" => {
                let e = "/etc/cni/net.d/calico-kubeconfig is not a valid kubeconfig: `users[0].user` is a string, expected a mapping".to_string();
                f.cni_kubeconfigs = vec![KubeconfigFacts {
                    path: "/etc/cni/net.d/calico-kubeconfig".into(),
                    auth: "none".into(),
                    error: Some(e.clone()),
                    ..KubeconfigFacts::default()
                }];
                f.errors = vec![e];
            }
            "n2" => {
                f.errors = vec!["resolv.conf /etc/resolv.conf: No such file or directory".into()];
            }
            _ => {}
        }
        f
    });
    assert_eq!(
        kinds(&f),
        [Kind::Credential, Kind::Misconfiguration],
        "{f:#?}"
    );
    let cred = &f[0];
    assert_eq!(cred.severity, Severity::Error);
    assert_eq!(cred.facts().state().map(State::as_str), Some("unreadable"));
    assert_eq!(cred.facts().nodes(), ["n1"]);
    assert!(
        cred.summary.contains(
            "/etc/cni/net.d/calico-kubeconfig on n1 is not a valid kubeconfig: `users[0].user`"
        ) && cred.summary.contains("the CNI cannot reach the API server"),
        "{}",
        cred.summary
    );
    assert_eq!(
        cred.summary.matches("calico-kubeconfig").count(),
        1,
        "{}",
        cred.summary
    );
    assert_eq!(cred.evidence.len(), 1, "{cred:#?}");
    let other = &f[1];
    assert_eq!(other.severity, Severity::Warning);
    assert_eq!(other.facts().nodes(), ["n2"]);
    assert!(
        other.summary.contains("/etc/resolv.conf"),
        "{}",
        other.summary
    );
}

#[test]
fn certificates_and_fresh_tokens_are_fine() {
    let mut inv = inventory(2, 1, "calico");
    let f = with_facts(&mut inv, &|node| {
        let mut f = base(node);
        f.cni_kubeconfigs = vec![
            kubeconfig("/etc/cni/net.d/a.kubeconfig", None, None),
            kubeconfig(
                "/etc/cni/net.d/calico-kubeconfig",
                Some(token(NOW - 60, Some(NOW + 3600), true)),
                Some(Outcome::Ok),
            ),
        ];
        f
    });
    assert!(f.is_empty(), "{f:#?}");
}

#[test]
fn kubelet_at_localhost_on_a_worker() {
    let mut inv = inventory(3, 1, "flannel");
    let f = with_facts(&mut inv, &|node| {
        let mut f = base(node);
        if node != "n2" {
            return f;
        }
        f.kubelet[0].server = Some("https://localhost:6443".into());
        f.kubelet[0].check = Some(CheckFacts {
            outcome: Outcome::Refused,
            http_status: None,
            detail: "connection refused".into(),
        });
        f
    });
    assert_eq!(kinds(&f), [Kind::Misconfiguration], "{f:#?}");
    assert_eq!(f[0].facts().nodes(), ["n2"]);
    assert!(
        f[0].fix[0].contains("https://192.168.56.10:6443"),
        "{:#?}",
        f[0].fix
    );
}

#[test]
fn dns_forward_loop() {
    let mut inv = inventory(3, 1, "flannel");
    inv.cluster.dns.as_mut().unwrap().corefile =
        Some(".:53 {\n    forward . /etc/resolv.conf\n}\n".into());
    let f = with_facts(&mut inv, &|node| {
        let mut f = base(node);
        f.resolv_conf = Some(ResolvFacts {
            nameservers: vec!["127.0.0.53".into()],
            search: Vec::new(),
        });
        f
    });
    assert_eq!(kinds(&f), [Kind::Dns], "{f:#?}");
    assert!(
        like(json!({"state": "loop", "nodes": ["n1"]})).matches(&f[0]),
        "the DNS pod's node: {:#?}",
        f[0]
    );
    // Without the Corefile forwarding to resolv.conf there is no loop.
    inv.cluster.dns.as_mut().unwrap().corefile = Some(".:53 {\n    forward . 8.8.8.8\n}\n".into());
    let f = with_facts(&mut inv, &|node| {
        let mut f = base(node);
        f.resolv_conf = Some(ResolvFacts {
            nameservers: vec!["127.0.0.53".into()],
            search: Vec::new(),
        });
        f
    });
    assert!(f.is_empty(), "{f:#?}");
}

#[test]
fn no_kubeconfig_on_any_node_of_a_discovered_cluster_names_the_component() {
    let mut inv = inventory(3, 1, "calico");
    let bare = |node: &str| NodeFacts {
        root: format!("/state/{node}"),
        resolv_conf: base(node).resolv_conf,
        ..NodeFacts::default()
    };
    // A lab or hand-written inventory (no discovered distribution): nothing said.
    assert!(with_facts(&mut inv, &bare).is_empty());
    let mut files = crate::inventory::NodeFiles::kubeadm();
    files.distribution = "k3s".into();
    inv.cluster.node_files = Some(files);
    let f = with_facts(&mut inv, &bare);
    assert_eq!(kinds(&f), [Kind::Misconfiguration], "{f:#?}");
    assert_eq!(f[0].severity, Severity::Warning);
    assert_eq!(
        f[0].facts().nodes(),
        ["n1", "n2", "n3"].map(String::from),
        "{f:#?}"
    );
    assert!(
        f[0].summary
            .contains("no CNI or kubelet kubeconfig on any of 3 nodes")
            && f[0]
                .summary
                .ends_with("apply deploy/components/k3s with the agents"),
        "{}",
        f[0].summary
    );
    assert_eq!(f[0].evidence.len(), 3, "{f:#?}");
    // One node with its kubelet kubeconfig: the files are mounted; nothing said.
    let f = with_facts(&mut inv, &|node| {
        if node == "n2" { base(node) } else { bare(node) }
    });
    assert!(f.is_empty(), "{f:#?}");
}
