//! Pure: whether the API server is reached through `HTTPS_PROXY`, by `NO_PROXY` as kubectl
//! (Go's `net/http` `ProxyFromEnvironment`) reads it. kube-client 5 checks `NO_PROXY` against the
//! proxy's own address rather than the server's, so a `NO_PROXY` that covers the API server
//! would still send it through the proxy; the prober decides here instead. And the proxy URL
//! read strictly, so that a message names its scheme, host and port and never its user or
//! password, whatever its shape.

use std::net::IpAddr;

use kube::config::Kubeconfig;

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

/// Why a proxy URL cannot be used. It never holds the URL, which may hold a password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProxyError {
    #[error("it has no scheme (http://, https:// or socks5://)")]
    NoScheme,
    #[error("its scheme {0} is not one prober can use (http, https, socks5)")]
    Scheme(String),
    /// A '/', '?', '#' or '@' in the user or password ends the address early: the rest, the
    /// password's tail included, would be read as a path, and the proxy's real host lost.
    #[error(
        "a '/', '?', '#' or '@' in its user or password is not percent-encoded (%2F, %3F, %23, %40)"
    )]
    Unencoded,
    #[error("its address is not HOST or HOST:PORT")]
    Address,
}

/// A proxy URL's parts a message may show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Parts<'a> {
    scheme: Option<&'a str>,
    host: &'a str,
    port: Option<u16>,
}

/// A scheme as RFC 3986 writes one (a letter, then letters, digits, `+`, `-`, `.`), short.
fn is_scheme(s: &str) -> bool {
    s.len() <= 16
        && s.starts_with(|c: char| c.is_ascii_alphabetic())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// `url` read strictly: `[scheme://][user[:password]@]host[:port][/path]`. The user and
/// password are skipped, never kept; anything that makes the address ambiguous is an error
/// rather than a guess that could print part of a password as a host.
fn parts(url: &str) -> Result<Parts<'_>, ProxyError> {
    let url = url.trim();
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) if is_scheme(scheme) => (Some(scheme), rest),
        Some(_) => return Err(ProxyError::Address),
        None => (None, url),
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    if tail.contains('@') {
        return Err(ProxyError::Unencoded);
    }
    // After the last '@': a user or password holding an unencoded '@' is still skipped whole.
    let address = authority.rsplit('@').next().unwrap_or_default();
    let (host, port) = if let Some(v6) = address.strip_prefix('[') {
        let (host, after) = v6.split_once(']').ok_or(ProxyError::Address)?;
        host.parse::<std::net::Ipv6Addr>()
            .map_err(|_| ProxyError::Address)?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or(ProxyError::Address)?),
        };
        (&v6[..host.len()], port)
    } else {
        match address.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (address, None),
        }
    };
    let host_ok = !host.is_empty()
        && (host.contains(':')
            || host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')));
    let port = match port {
        None => None,
        Some(p) => Some(p.parse::<u16>().map_err(|_| ProxyError::Address)?),
    };
    if !host_ok {
        return Err(ProxyError::Address);
    }
    Ok(Parts { scheme, host, port })
}

/// Whether prober (kube's connectors) can use the proxy `url`: a scheme it supports and an
/// address read without ambiguity.
pub fn check(url: &str) -> Result<(), ProxyError> {
    let p = parts(url)?;
    match p.scheme.map(str::to_ascii_lowercase).as_deref() {
        None => Err(ProxyError::NoScheme),
        Some("http" | "https" | "socks5") => Ok(()),
        Some(other) => Err(ProxyError::Scheme(other.to_string())),
    }
}

/// The proxy `url` for a message: its scheme, host and port, nothing else. One whose address
/// cannot be read without ambiguity is not shown at all (its scheme, when it has one).
#[must_use]
pub fn shown(url: &str) -> String {
    match parts(url) {
        Ok(p) => {
            let host = if p.host.contains(':') {
                format!("[{}]", p.host)
            } else {
                p.host.to_string()
            };
            let port = p.port.map_or(String::new(), |p| format!(":{p}"));
            match p.scheme {
                Some(s) => format!("{s}://{host}{port}"),
                None => format!("{host}{port}"),
            }
        }
        Err(_) => match url.trim().split_once("://") {
            Some((scheme, _)) if is_scheme(scheme) => format!("{scheme}://(address not shown)"),
            _ => "(a proxy URL not shown)".to_string(),
        },
    }
}

/// The proxy URL kube will use for the kubeconfig's `context` (else its current one), as
/// written, and the variable it came from: its cluster's `proxy-url` (`None`), else
/// `env("HTTPS_PROXY")`, else `env("https_proxy")`, kube's own order. `None`: no proxy.
pub fn configured(
    kc: &Kubeconfig,
    context: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
) -> Option<(String, Option<&'static str>)> {
    let cluster = super::context_of(kc, context).map(|c| c.cluster);
    let own = cluster.and_then(|name| {
        kc.clusters
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.cluster.as_ref())
            .and_then(|c| c.proxy_url.clone())
    });
    let nonempty = |s: Option<String>| s.filter(|s| !s.is_empty());
    nonempty(own).map(|u| (u, None)).or_else(|| {
        ["HTTPS_PROXY", "https_proxy"]
            .into_iter()
            .find_map(|var| nonempty(env(var)).map(|u| (u, Some(var))))
    })
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
        for (url, want) in [
            (
                "http://user:secret@proxy.corp:3128/",
                "http://proxy.corp:3128",
            ),
            ("socks5://proxy:1080", "socks5://proxy:1080"),
            ("ftp://user:secret@127.0.0.1:9", "ftp://127.0.0.1:9"),
            ("user:secret@127.0.0.1:9", "127.0.0.1:9"),
            ("http://u@s:p@ss@[fd00::1]:3128", "http://[fd00::1]:3128"),
            (
                "http://user:se/cret@127.0.0.1:9",
                "http://(address not shown)",
            ),
            (
                "http://user:pa#secret@127.0.0.1:9",
                "http://(address not shown)",
            ),
            // As http::Uri shows the last one: the fragment dropped, "pa" left as a port.
            ("http://user:pa", "http://(address not shown)"),
            ("http://us er:x@h:1", "http://h:1"),
            ("\u{1b}[2J://user:secret@h:1", "(a proxy URL not shown)"),
        ] {
            assert_eq!(shown(url), want, "{url}");
        }
    }

    #[test]
    fn only_an_unambiguous_proxy_of_a_supported_scheme_is_used() {
        assert_eq!(check("http://user:secret@proxy:3128"), Ok(()));
        assert_eq!(check("socks5://[::1]:1080"), Ok(()));
        assert_eq!(check("HTTPS://proxy"), Ok(()));
        assert_eq!(
            check("ftp://proxy:21"),
            Err(ProxyError::Scheme("ftp".into()))
        );
        assert_eq!(check("user:secret@proxy:3128"), Err(ProxyError::NoScheme));
        assert_eq!(
            check("http://user:se/cret@proxy:3128"),
            Err(ProxyError::Unencoded)
        );
        assert_eq!(
            check("http://user:12#secret@proxy:3128"),
            Err(ProxyError::Unencoded)
        );
        assert_eq!(check("http://user:pa"), Err(ProxyError::Address));
        assert_eq!(check("http://proxy:99999"), Err(ProxyError::Address));
        // Every message is free of the URL.
        for e in [
            ProxyError::NoScheme,
            ProxyError::Unencoded,
            ProxyError::Address,
        ] {
            assert!(!e.to_string().contains("secret"));
        }
    }
}
