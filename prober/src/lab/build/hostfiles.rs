//! Each node's host root as the lab writes it: kubeconfigs, resolv.conf, the CNI configuration and
//! the CNI's service-account token, with the node faults that change them.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use super::{API_PORT, API_SERVICE, Layout};
use crate::lab::pki;
use crate::lab::scenario::{Fault, Scenario};

/// Token material for the CNI kubeconfigs the lab writes.
pub struct Tokens {
    pub now: u64,
    pub key: Vec<u8>,
}

/// What the lab writes to disk: each node's host root, and the tokens the API stand-in accepts.
pub struct HostFiles {
    pub files: Vec<(PathBuf, String)>,
    pub allowed_tokens: Vec<String>,
}

pub(super) const HOUR: u64 = 3600;

fn kubeconfig(server: &str, ca_b64: &str, user: &str, credential: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kubernetes\n  cluster:\n    server: {server}\n    \
         certificate-authority-data: {ca_b64}\nusers:\n- name: {user}\n  user:\n{credential}\ncontexts:\n- name: default\n  \
         context:\n    cluster: kubernetes\n    user: {user}\ncurrent-context: default\n"
    )
}

/// Each node's `/etc` as the host agent will read it: kubelet.conf, resolv.conf, the CNI config,
/// and — for Calico or a token fault — a CNI kubeconfig holding a service-account token.
#[must_use]
pub fn host_files(s: &Scenario, l: &Layout, ca_pem: &str, tokens: &Tokens) -> HostFiles {
    use base64::Engine as _;
    let ca_b64 = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    // The API server as the kubelet reaches it: over IPv6 on the IPv6 underlay.
    let cp = l.nodes.iter().find(|n| n.control_plane).map_or(
        SocketAddr::from((Ipv4Addr::LOCALHOST, API_PORT)),
        |n| match n.address6.filter(|_| s.ipv6_underlay()) {
            Some(a6) => SocketAddr::from((a6, API_PORT)),
            None => SocketAddr::from((n.address, API_PORT)),
        },
    );
    let has = |f: &dyn Fn(&Fault) -> bool| s.faults.iter().any(f);
    let dns_loop = has(&|f| matches!(f, Fault::DnsLoop));
    let mut files = Vec::new();
    let mut allowed = Vec::new();
    for n in &l.nodes {
        let etc = n.root.join("etc");
        let server = if kubelet_localhost(s, &n.name) {
            "https://localhost:6443".to_string()
        } else {
            format!("https://{cp}")
        };
        files.push(kubelet_conf(&etc, &server, &ca_b64, &n.name));
        files.push((etc.join("kubernetes/pki/ca.crt"), ca_pem.to_string()));
        // With the loop fault the node points at a local stub resolver, as systemd-resolved does:
        // CoreDNS's `forward . /etc/resolv.conf` then forwards to itself.
        let resolv = if dns_loop {
            "nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch .\n".to_string()
        } else {
            format!("nameserver {}\n", l.upstream_resolver())
        };
        files.push((etc.join("resolv.conf"), resolv));
        let insecure =
            has(&|f| matches!(f, Fault::CniKubeconfigInsecure { node } if *node == n.name));
        let age = token_fault(s, &n.name)
            .or((s.cni == crate::inventory::Cni::Calico || insecure).then_some(TokenAge::Fresh));
        if has(&|f| matches!(f, Fault::MultusTokenStale { node } if *node == n.name)) {
            let jwt = multus_token(tokens);
            files.push(multus_kubeconfig(&etc, &ca_b64, &jwt));
            allowed.push(jwt);
        }
        match age {
            Some(age) => {
                let jwt = cni_token(tokens, age);
                let mut cni = calico_cni_files(&etc, &ca_b64, &jwt);
                if insecure {
                    cni[0].1 = cni[0].1.replace(
                        &format!("certificate-authority-data: {ca_b64}"),
                        "insecure-skip-tls-verify: true",
                    );
                }
                files.extend(cni);
                // Outside the host root: the token alone, so reachability expectations can send it.
                files.push((l.state_dir.join("tokens").join(&n.name), format!("{jwt}\n")));
                allowed.push(jwt);
            }
            None => files.push((
                etc.join("cni/net.d/10-flannel.conflist"),
                cni_conflist("flannel", ""),
            )),
        }
    }
    files.extend(super::candidate::host_files(s, l, &ca_b64, tokens));
    HostFiles {
        files,
        allowed_tokens: allowed,
    }
}

/// How old the token in a CNI kubeconfig is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TokenAge {
    Fresh,
    /// Issued three hours ago and never refreshed, still valid (docs/incidents.md, incident 4).
    Stale,
    /// Expired an hour ago (docs/incidents.md, incident 3).
    Expired,
}

/// The token fault the scenario puts on `node` (a node or the candidate), if any.
pub(super) fn token_fault(s: &Scenario, node: &str) -> Option<TokenAge> {
    s.faults.iter().find_map(|f| match f {
        Fault::CniTokenExpired { node: n } if n == node => Some(TokenAge::Expired),
        Fault::CniTokenStale { node: n } if n == node => Some(TokenAge::Stale),
        _ => None,
    })
}

/// Whether the scenario points `node`'s kubelet.conf at `https://localhost:6443`.
pub(super) fn kubelet_localhost(s: &Scenario, node: &str) -> bool {
    s.faults
        .iter()
        .any(|f| matches!(f, Fault::KubeletLocalhost { node: n } if n == node))
}

/// A bound service-account token of Calico's CNI plugin, of the given age.
pub(super) fn cni_token(tokens: &Tokens, age: TokenAge) -> String {
    let (iat, exp) = match age {
        TokenAge::Expired => (tokens.now - 25 * HOUR, tokens.now - HOUR),
        TokenAge::Stale => (tokens.now - 3 * HOUR, tokens.now + 365 * 24 * HOUR),
        TokenAge::Fresh => (tokens.now, tokens.now + 24 * HOUR),
    };
    pki::token(
        &pki::TokenClaims {
            namespace: "kube-system",
            service_account: "calico-cni-plugin",
            issued_at: iat,
            expires_at: exp,
        },
        &tokens.key,
    )
}

/// A token of Multus's own service account, issued three hours ago, valid for a year: stale.
fn multus_token(tokens: &Tokens) -> String {
    pki::token(
        &pki::TokenClaims {
            namespace: "kube-system",
            service_account: "multus",
            issued_at: tokens.now - 3 * HOUR,
            expires_at: tokens.now + 365 * 24 * HOUR,
        },
        &tokens.key,
    )
}

/// Multus's kubeconfig as its thin plugin writes it once, at start-up.
fn multus_kubeconfig(etc: &Path, ca_b64: &str, jwt: &str) -> (PathBuf, String) {
    (
        etc.join("cni/net.d/multus.d/multus.kubeconfig"),
        kubeconfig(
            &format!("https://{API_SERVICE}:443"),
            ca_b64,
            "multus",
            &format!("    token: {jwt}"),
        ),
    )
}

/// `etc/kubernetes/kubelet.conf` of node `name`, pointing at `server`.
pub(super) fn kubelet_conf(
    etc: &Path,
    server: &str,
    ca_b64: &str,
    name: &str,
) -> (PathBuf, String) {
    let user = format!("system:node:{name}");
    let cert = "    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem\n    \
                client-key: /var/lib/kubelet/pki/kubelet-client-current.pem";
    (
        etc.join("kubernetes/kubelet.conf"),
        kubeconfig(server, ca_b64, &user, cert),
    )
}

/// Calico's CNI kubeconfig holding `jwt` and the conflist naming it, under `etc/cni/net.d`.
pub(super) fn calico_cni_files(etc: &Path, ca_b64: &str, jwt: &str) -> [(PathBuf, String); 2] {
    let net_d = etc.join("cni/net.d");
    [
        (
            net_d.join("calico-kubeconfig"),
            kubeconfig(
                &format!("https://{API_SERVICE}:443"),
                ca_b64,
                "calico",
                &format!("    token: {jwt}"),
            ),
        ),
        (
            net_d.join("10-calico.conflist"),
            cni_conflist("calico", "/etc/cni/net.d/calico-kubeconfig"),
        ),
    ]
}

fn cni_conflist(plugin: &str, kubeconfig: &str) -> String {
    let inner = if plugin == "calico" {
        serde_json::json!({"type": "calico", "datastore_type": "kubernetes", "kubernetes": {"kubeconfig": kubeconfig}})
    } else {
        serde_json::json!({"type": "flannel", "delegate": {"hairpinMode": true, "isDefaultGateway": true}})
    };
    let list = serde_json::json!({"name": format!("k8s-pod-network-{plugin}"), "cniVersion": "0.3.1", "plugins": [inner, {"type": "portmap", "capabilities": {"portMappings": true}}]});
    serde_json::to_string_pretty(&list).unwrap_or_default() + "\n"
}
