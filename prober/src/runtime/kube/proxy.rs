//! Pure: whether the API server is reached through `HTTPS_PROXY`, by `NO_PROXY` as kubectl
//! (Go's `net/http` `ProxyFromEnvironment`) reads it. kube-client 5 checks `NO_PROXY` against the
//! proxy's own address rather than the server's, so a `NO_PROXY` that covers the API server
//! would still send it through the proxy; the prober decides here instead.

use std::net::IpAddr;

/// Whether `no_proxy` (comma-separated: `*`, IP addresses, CIDRs, `host`, `.domain`, each with
/// an optional `:port`) covers `host:port`. As Go's `httpproxy`: `example.com` covers it and
/// its subdomains, `.example.com` only the subdomains, an address or a range by the address.
#[must_use]
pub fn covers(no_proxy: &str, host: &str, port: u16) -> bool {
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    let ip: Option<IpAddr> = host.parse().ok();
    no_proxy
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .any(|entry| {
            if entry == "*" {
                return true;
            }
            if let (Some(ip), Some((net, len))) = (ip, cidr(entry)) {
                return in_range(ip, net, len);
            }
            let (name, want_port) = split_port(entry);
            if want_port.is_some_and(|p| p != port) {
                return false;
            }
            if let (Some(ip), Ok(e)) = (ip, name.parse::<IpAddr>()) {
                return ip == e;
            }
            let name = name.to_ascii_lowercase();
            match name.strip_prefix('.') {
                Some(domain) => host.ends_with(&format!(".{domain}")),
                None => host == name || host.ends_with(&format!(".{name}")),
            }
        })
}

/// `10.0.0.0/8` or `fd00::/8`: the network and its prefix length.
fn cidr(entry: &str) -> Option<(IpAddr, u32)> {
    let (addr, len) = entry.split_once('/')?;
    let addr: IpAddr = addr.parse().ok()?;
    let len: u32 = len.parse().ok()?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    (len <= max).then_some((addr, len))
}

fn in_range(ip: IpAddr, net: IpAddr, len: u32) -> bool {
    let (a, b, bits) = match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(b)) => (u128::from(a.to_bits()), u128::from(b.to_bits()), 32),
        (IpAddr::V6(a), IpAddr::V6(b)) => (a.to_bits(), b.to_bits(), 128),
        _ => return false,
    };
    if len == 0 {
        return true;
    }
    let shift = bits - len;
    (a >> shift) == (b >> shift)
}

/// `host:port` or `[v6]:port` into its parts; a bare name or address has no port.
fn split_port(entry: &str) -> (&str, Option<u16>) {
    if let Some(rest) = entry.strip_prefix('[')
        && let Some((addr, tail)) = rest.split_once(']')
    {
        return (addr, tail.strip_prefix(':').and_then(|p| p.parse().ok()));
    }
    match entry.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') => match port.parse() {
            Ok(p) => (name, Some(p)),
            Err(_) => (entry, None),
        },
        _ => (entry, None),
    }
}

/// The proxy `url` with any user and password removed, for a message.
#[must_use]
pub fn shown(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.rsplit('@').next().unwrap_or_default().to_string();
    };
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let host = authority.rsplit('@').next().unwrap_or_default();
    if path.is_empty() {
        format!("{scheme}://{host}")
    } else {
        format!("{scheme}://{host}/{path}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_proxy_is_matched_against_the_api_server_as_go_does() {
        let np = "localhost,.svc,cluster.local,10.0.0.0/8,192.168.1.5,api.example.com:6443";
        assert!(covers(np, "10.1.2.3", 6443), "CIDR");
        assert!(covers(np, "192.168.1.5", 443), "address");
        assert!(!covers(np, "192.168.1.6", 443));
        assert!(covers(np, "kubernetes.default.svc", 443), ".domain");
        assert!(!covers(np, "svc", 443), ".domain is subdomains only");
        assert!(covers(np, "cluster.local", 443) && covers(np, "api.cluster.local", 443));
        assert!(covers(np, "API.example.com", 6443) && !covers(np, "api.example.com", 443));
        assert!(!covers(np, "example.com", 6443));
        assert!(covers("*", "anything", 1));
        assert!(covers("::1,fd00::/8", "[fd00::5]", 6443));
        assert!(!covers("", "10.0.0.1", 6443));
    }

    #[test]
    fn a_proxy_is_shown_without_its_credentials() {
        assert_eq!(
            shown("http://user:secret@proxy.corp:3128/"),
            "http://proxy.corp:3128"
        );
        assert_eq!(shown("socks5://proxy:1080"), "socks5://proxy:1080");
    }
}
