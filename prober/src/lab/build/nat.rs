//! kube-proxy emulated in nftables: the Services' DNAT on each node, flannel's and kube-proxy's
//! masquerade rules, and the router that drops Service IPs nobody translated.

use std::fmt::Write as _;

use super::{
    API_PORT, API_SERVICE, API_SERVICE6, DNS_SERVICE, DNS_SERVICE6, LabNode, Layout, POD_CIDR,
    POD_CIDR6, SERVICE_CIDR, SERVICE_CIDR6,
};

/// Like a cloud network: packets for Service IPs that no kube-proxy translated vanish silently
/// (the IPv6 Service range's too, in a dual-stack lab).
pub(super) fn router_ruleset(dual_stack: bool) -> String {
    let six = if dual_stack {
        format!("\n    ip6 daddr {SERVICE_CIDR6} drop")
    } else {
        String::new()
    };
    format!(
        "table inet prober-lab {{\n  chain prerouting {{\n    type filter hook prerouting priority -10; policy accept;\n    \
         ip daddr {SERVICE_CIDR} drop{six}\n  }}\n}}\n"
    )
}

/// Where kube-proxy sends the `kubernetes` Service: its one endpoint, else one at random.
fn dnat_target(api: &[std::net::SocketAddr]) -> String {
    if let [one] = api {
        return one.to_string();
    }
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
}

/// kube-proxy's DNAT for the two Services, flannel's masquerade rules, and kube-proxy's hairpin
/// masquerade for endpoints that reach themselves through their Service.
pub(super) fn node_nat(l: &Layout, n: &LabNode, kube_proxy: bool) -> String {
    let mut dnat = String::new();
    if kube_proxy {
        let api: Vec<std::net::SocketAddr> = l
            .api_endpoints()
            .into_iter()
            .filter(std::net::SocketAddr::is_ipv4)
            .collect();
        let api_target = dnat_target(&api);
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

/// kube-proxy's IPv6 DNAT and masquerade in a dual-stack lab, as its own `ip6` table (kube-proxy
/// programs ip6tables, or its nftables `ip6` table, beside the IPv4 one): the same rules, over
/// the IPv6 Services, endpoints and pod range. Empty in an IPv4-only lab.
pub(super) fn node_nat6(l: &Layout, n: &LabNode, kube_proxy: bool) -> String {
    let Some(dns) = l.dns_pod.address6 else {
        return String::new();
    };
    let mut dnat = String::new();
    if kube_proxy {
        let api: Vec<std::net::SocketAddr> = l
            .api_endpoints()
            .into_iter()
            .filter(std::net::SocketAddr::is_ipv6)
            .collect();
        let api_target = dnat_target(&api);
        let _ = writeln!(
            dnat,
            "    ip6 daddr {API_SERVICE6} tcp dport 443 dnat to {api_target}"
        );
        for proto in ["udp", "tcp"] {
            let _ = writeln!(
                dnat,
                "    ip6 daddr {DNS_SERVICE6} {proto} dport 53 dnat to [{dns}]:53"
            );
        }
    }
    format!(
        "table ip6 prober-lab {{\n  chain prerouting {{\n    type nat hook prerouting priority dstnat; policy accept;\n{dnat}  }}\n  \
         chain output {{\n    type nat hook output priority -100; policy accept;\n{dnat}  }}\n  \
         chain postrouting {{\n    type nat hook postrouting priority srcnat; policy accept;\n    \
         ip6 saddr {dns} ip6 daddr {dns} masquerade\n    \
         ip6 saddr {POD_CIDR6} ip6 daddr {POD_CIDR6} return\n    \
         ip6 saddr {POD_CIDR6} ip6 daddr != ff00::/8 masquerade\n    \
         ip6 saddr != {POD_CIDR6} ip6 daddr {cidr} return\n    \
         ip6 saddr != {POD_CIDR6} ip6 daddr {POD_CIDR6} masquerade\n  }}\n}}\n",
        cidr = n.pod_cidr6()
    )
}
