//! Kubernetes errors in words. "Reached but refused" (401, 403: the cluster answered) is told
//! apart from "not reached" (connection refused, timed out, name not resolved, TLS failed), and
//! each says what to look at. The library's own text (`ApiError: Unauthorized: Unauthorized
//! (Status { … })`, `client error (Connect)`) says neither.

use std::error::Error as _;

/// One sentence for `e`, starting with whether the API server was reached.
#[must_use]
pub fn words(e: &kube::Error) -> String {
    if let kube::Error::Api(s) = e {
        return match s.code {
            401 => "the API server answered but did not accept the credentials (401 \
                    Unauthorized): the kubeconfig's token or client certificate is expired, \
                    revoked or for another cluster; get a fresh kubeconfig"
                .into(),
            403 => format!(
                "the API server answered but these credentials may not do this (403 Forbidden: \
                 {}); bind the RBAC that `prober manifests --rbac` prints (deploy/base/rbac.yaml)",
                s.message
            ),
            code => format!("the API server answered {code} {}: {}", s.reason, s.message),
        };
    }
    let causes = causes(e);
    let text = causes.join(": ").to_lowercase();
    let io = io_kind(e);
    let why = if io == Some(std::io::ErrorKind::ConnectionRefused)
        || text.contains("connection refused")
    {
        "not reached: connection refused at the server's address (nothing listens there: is the \
         API server up, are the kubeconfig's address and port right?)"
    } else if io == Some(std::io::ErrorKind::TimedOut)
        || text.contains("timed out")
        || text.contains("deadline has elapsed")
    {
        "not reached: no answer in time (a firewall dropping the port, or a wrong address)"
    } else if text.contains("tunnel error") {
        "not reached: the proxy (HTTPS_PROXY, or the kubeconfig's proxy-url) did not open a \
         tunnel to the API server; check the proxy, or add the server to NO_PROXY"
    } else if text.contains("dns error") || text.contains("failed to lookup address") {
        "not reached: the server's name does not resolve from here"
    } else if text.contains("network is unreachable") || text.contains("no route to host") {
        "not reached: no route to the server's address from here"
    } else if text.contains("certificate")
        || text.contains("tls")
        || text.contains("handshake")
        || text.contains("corrupt message")
    {
        "reached, but TLS failed (the server's certificate is not the one the kubeconfig trusts: \
         another cluster, or a proxy in between; or the address is not an API server)"
    } else {
        "not reached"
    };
    let last = causes.last().cloned().unwrap_or_default();
    format!("the cluster was {why} [{last}]")
}

/// The error's message and its causes', outermost first, without repeats.
fn causes(e: &kube::Error) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cur {
        let m = c.to_string();
        if out.last() != Some(&m) {
            out.push(m);
        }
        cur = c.source();
    }
    out
}

/// The kind of the first I/O error among the causes.
fn io_kind(e: &kube::Error) -> Option<std::io::ErrorKind> {
    let mut cur = e.source();
    while let Some(c) = cur {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            return Some(io.kind());
        }
        cur = c.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::words;

    fn api(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure(&format!("{reason} says the server"), reason)
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn answered_is_told_apart_from_not_reached() {
        let w = words(&api(401, "Unauthorized"));
        assert!(
            w.contains("answered but did not accept the credentials"),
            "{w}"
        );
        assert!(!w.contains("Status {"), "{w}");
        let w = words(&api(403, "Forbidden"));
        assert!(
            w.contains("may not do this") && w.contains("`prober manifests --rbac`"),
            "{w}"
        );
        let refused = kube::Error::Service(Box::new(std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused,
        )));
        let w = words(&refused);
        assert!(
            w.starts_with("the cluster was not reached: connection refused"),
            "{w}"
        );
        let timed_out =
            kube::Error::Service(Box::new(std::io::Error::from(std::io::ErrorKind::TimedOut)));
        assert!(words(&timed_out).contains("not reached: no answer in time"));
    }
}
