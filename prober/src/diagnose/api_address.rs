//! The address a component should reach the API server at when it must not go through the
//! `kubernetes` Service: the cluster's control-plane endpoint (in an HA cluster a load balancer
//! or virtual IP in front of every API server), never one API server picked at random. Read
//! from the server the nodes' kubelet kubeconfigs name (kubeadm writes its
//! `controlPlaneEndpoint` there); else the API endpoints, saying what pinning one of them costs.

use std::collections::BTreeMap;

use crate::model::PathClass;

use super::context::Ctx;

/// Where to point a component at the API server, and what to know about that choice.
pub(super) struct ApiAddress {
    pub(super) host: String,
    pub(super) port: u16,
    /// Set when the address ties the component to one control-plane node.
    pub(super) note: Option<String>,
}

impl std::fmt::Display for ApiAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// `https://HOST[:PORT][/]` as a kubeconfig writes a server, when HOST is an address or a DNS
/// name (nothing a shell would act on: the value goes into a command line) and not this host.
fn server(url: &str) -> Option<(String, u16)> {
    let rest = url.strip_prefix("https://")?.trim_end_matches('/');
    let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
        let (h, after) = v6.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None if after.is_empty() => 443,
            None => return None,
        };
        (h.to_string(), port)
    } else {
        match rest.split_once(':') {
            Some((h, p)) => (h.to_string(), p.parse().ok()?),
            None => (rest.to_string(), 443),
        }
    };
    let plain = !host.is_empty()
        && host.len() <= 253
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':'))
        && !host.starts_with('-');
    let local = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|a| a.is_loopback() || a.is_unspecified());
    (plain && !local && port != 0).then_some((host.to_ascii_lowercase(), port))
}

/// The address components should use for the API server, if the run knows any.
pub(super) fn api_address(ctx: &Ctx<'_>) -> Option<ApiAddress> {
    // The server most nodes' kubelets use: kubeadm's controlPlaneEndpoint when one is set.
    let mut said: BTreeMap<(String, u16), usize> = BTreeMap::new();
    for r in ctx
        .results
        .iter()
        .filter(|r| r.path == PathClass::NodeConfig)
    {
        let Some(facts) = r.result.node.as_ref() else {
            continue;
        };
        for kc in &facts.kubelet {
            if let Some(s) = kc.server.as_deref().and_then(server) {
                *said.entry(s).or_default() += 1;
            }
        }
    }
    if let Some(((host, port), _)) = said.into_iter().max_by_key(|(_, n)| *n) {
        return Some(ApiAddress {
            host,
            port,
            note: None,
        });
    }
    let eps = &ctx.inv.cluster.api.endpoints;
    let first = eps.first()?;
    let note = if eps.len() == 1 {
        format!(
            "only one API server is known ({first}), so the fix points at it: if the cluster has a control-plane endpoint (kubeadm's controlPlaneEndpoint, a load balancer or virtual IP in front of several API servers), use that instead, or the components stop when this one node does"
        )
    } else {
        format!(
            "no control-plane endpoint is known (no node's kubelet kubeconfig was read), so the fix points at the first of {} API servers ({first}) and the components stop when that node does: use the cluster's control-plane endpoint (kubeadm's controlPlaneEndpoint, a load balancer or virtual IP) instead if it has one",
            eps.len()
        )
    };
    Some(ApiAddress {
        host: first.ip().to_string(),
        port: first.port(),
        note: Some(note),
    })
}

#[cfg(test)]
mod tests {
    use super::server;

    #[test]
    fn a_kubeconfig_server_is_taken_only_when_plain_and_not_this_host() {
        assert_eq!(
            server("https://k8s-api.example.com:6443"),
            Some(("k8s-api.example.com".into(), 6443))
        );
        assert_eq!(
            server("https://10.0.0.100:8443/"),
            Some(("10.0.0.100".into(), 8443))
        );
        assert_eq!(
            server("https://[fd00::1]:6443"),
            Some(("fd00::1".into(), 6443))
        );
        assert_eq!(
            server("https://api.example"),
            Some(("api.example".into(), 443))
        );
        for refused in [
            "https://localhost:6443",
            "https://127.0.0.1:6443",
            "https://[::1]:6443",
            "http://10.0.0.1:6443",
            "https://$(reboot):6443",
            "https://a b:6443",
            "https://10.0.0.1:notaport",
            "https://-x:6443",
            "https://:6443",
        ] {
            assert_eq!(server(refused), None, "{refused}");
        }
    }
}
