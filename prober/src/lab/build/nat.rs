//! kube-proxy emulated in nftables: the Services' DNAT on each node, flannel's and kube-proxy's
//! masquerade rules, and the router that drops Service IPs nobody translated.

use std::fmt::Write as _;

use super::{API_PORT, API_SERVICE, DNS_SERVICE, LabNode, Layout, POD_CIDR, SERVICE_CIDR};

/// Like a cloud network: packets for Service IPs that no kube-proxy translated vanish silently.
pub(super) fn router_ruleset() -> String {
    format!(
        "table inet prober-lab {{\n  chain prerouting {{\n    type filter hook prerouting priority -10; policy accept;\n    \
         ip daddr {SERVICE_CIDR} drop\n  }}\n}}\n"
    )
}

/// kube-proxy's DNAT for the two Services, flannel's masquerade rules, and kube-proxy's hairpin
/// masquerade for endpoints that reach themselves through their Service.
pub(super) fn node_nat(l: &Layout, n: &LabNode, kube_proxy: bool) -> String {
    let mut dnat = String::new();
    if kube_proxy {
        let api = l.api_endpoints();
        let api_target = if api.len() == 1 {
            format!("{}", api[0])
        } else {
            let map: Vec<String> = api
                .iter()
                .enumerate()
                .map(|(i, a)| format!("{i} : {}", a.ip()))
                .collect();
            format!(
                "numgen random mod {} map {{ {} }} : {API_PORT}",
                api.len(),
                map.join(", ")
            )
        };
        let dns = l.dns_pod.address;
        let _ = writeln!(
            dnat,
            "    ip daddr {API_SERVICE} tcp dport 443 dnat to {api_target}"
        );
        let _ = writeln!(
            dnat,
            "    ip daddr {DNS_SERVICE} udp dport 53 dnat to {dns}:53"
        );
        let _ = writeln!(
            dnat,
            "    ip daddr {DNS_SERVICE} tcp dport 53 dnat to {dns}:53"
        );
    }
    let hairpin = l.dns_pod.address;
    format!(
        "table ip prober-lab {{\n  chain prerouting {{\n    type nat hook prerouting priority dstnat; policy accept;\n{dnat}  }}\n  \
         chain output {{\n    type nat hook output priority -100; policy accept;\n{dnat}  }}\n  \
         chain postrouting {{\n    type nat hook postrouting priority srcnat; policy accept;\n    \
         ip saddr {hairpin} ip daddr {hairpin} masquerade\n    \
         ip saddr {POD_CIDR} ip daddr {POD_CIDR} return\n    \
         ip saddr {POD_CIDR} ip daddr != 224.0.0.0/4 masquerade\n    \
         ip saddr != {POD_CIDR} ip daddr {cidr} return\n    \
         ip saddr != {POD_CIDR} ip daddr {POD_CIDR} masquerade\n  }}\n}}\n",
        cidr = n.pod_cidr
    )
}
