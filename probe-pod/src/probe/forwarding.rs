//! The forwarding sysctls kubeadm's preflight checks: `ip_forward`, IPv6 forwarding and
//! `br_netfilter`'s bridge one.

use std::path::{Path, PathBuf};

use crate::proto::ForwardingFacts;

/// The forwarding sysctls under `net` (`/proc/sys/net`: the agent's own network namespace, which
/// is the node's for a host agent, the candidate's through its exec prefix; never the host root,
/// whose `/proc` would answer for the reader's namespace anyway). A file that cannot be read is
/// an error in `errors`; an absent `bridge/` means `br_netfilter` is not loaded, an absent `ipv6/`
/// a kernel without IPv6.
pub fn read(net: &Path, errors: &mut Vec<String>) -> ForwardingFacts {
    use std::io::Read as _;
    let mut flag = |path: PathBuf, absent_ok: bool| -> Option<bool> {
        let mut text = String::new();
        let read = std::fs::File::open(&path).and_then(|f| f.take(64).read_to_string(&mut text));
        match read {
            Ok(_) => match text.trim() {
                "1" => Some(true),
                "0" => Some(false),
                other => {
                    errors.push(format!("{}: {other:?} is not 0 or 1", path.display()));
                    None
                }
            },
            Err(e) if absent_ok && e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                errors.push(format!("{}: {e}", path.display()));
                None
            }
        }
    };
    let br_netfilter = net.join("bridge").is_dir();
    ForwardingFacts {
        ip_forward: flag(net.join("ipv4/ip_forward"), false),
        ipv6_forward: flag(net.join("ipv6/conf/all/forwarding"), true),
        bridge_nf_call_iptables: flag(net.join("bridge/bridge-nf-call-iptables"), true),
        bridge_nf_call_ip6tables: flag(net.join("bridge/bridge-nf-call-ip6tables"), true),
        br_netfilter,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwarding_reads_the_sysctls_and_an_absent_bridge_is_no_module() {
        let dir = tempfile::tempdir().unwrap();
        let net = dir.path();
        std::fs::create_dir_all(net.join("ipv4")).unwrap();
        std::fs::write(net.join("ipv4/ip_forward"), "0\n").unwrap();
        let mut errors = Vec::new();
        let f = read(net, &mut errors);
        assert_eq!(
            (f.ip_forward, f.bridge_nf_call_iptables, f.br_netfilter),
            (Some(false), None, false)
        );
        assert!(errors.is_empty(), "{errors:?}");
        std::fs::create_dir_all(net.join("bridge")).unwrap();
        std::fs::write(net.join("bridge/bridge-nf-call-iptables"), "1\n").unwrap();
        std::fs::write(net.join("bridge/bridge-nf-call-ip6tables"), "0\n").unwrap();
        std::fs::write(net.join("ipv4/ip_forward"), "1\n").unwrap();
        let f = read(net, &mut errors);
        assert_eq!(
            (f.ip_forward, f.bridge_nf_call_iptables, f.br_netfilter),
            (Some(true), Some(true), true)
        );
        assert_eq!(f.bridge_nf_call_ip6tables, Some(false));
        std::fs::remove_file(net.join("ipv4/ip_forward")).unwrap();
        let f = read(net, &mut errors);
        assert_eq!(f.ip_forward, None);
        assert_eq!(errors.len(), 1, "{errors:?}");
    }

    #[test]
    fn ipv6_forwarding_is_read_and_a_kernel_without_ipv6_is_no_error() {
        let dir = tempfile::tempdir().unwrap();
        let net = dir.path();
        std::fs::create_dir_all(net.join("ipv4")).unwrap();
        std::fs::write(net.join("ipv4/ip_forward"), "1\n").unwrap();
        let mut errors = Vec::new();
        assert_eq!(read(net, &mut errors).ipv6_forward, None);
        assert!(errors.is_empty(), "{errors:?}");
        std::fs::create_dir_all(net.join("ipv6/conf/all")).unwrap();
        for (text, want) in [("0\n", Some(false)), ("1\n", Some(true))] {
            std::fs::write(net.join("ipv6/conf/all/forwarding"), text).unwrap();
            assert_eq!(read(net, &mut errors).ipv6_forward, want);
        }
        assert!(errors.is_empty(), "{errors:?}");
    }
}
