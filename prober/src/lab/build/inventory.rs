//! The inventory the lab writes for what it built: what `prober run` reads to probe the lab.

use std::net::SocketAddr;

use super::{
    AGENT_PORT, API_SERVICE, API_SERVICE6, DNS_SERVICE, DNS_SERVICE6, Layout, POD_CIDR, POD_CIDR6,
    SERVICE_CIDR, SERVICE_CIDR6,
};
use crate::inventory::Cidr;

/// The agents' port, as the inventory types it.
const AGENT: probe_proto::Port = probe_proto::Port::new(AGENT_PORT).expect("non-zero");
use crate::lab::scenario::Scenario;

/// The inventory describing what `layout` builds, with `ip netns exec` exec prefixes; of an
/// IPv6-only scenario, its IPv6 half alone.
#[must_use]
pub fn inventory(s: &Scenario, l: &Layout) -> crate::inventory::Inventory {
    let mut inv = wired(s, l);
    if !s.ip_families.contains(&crate::inventory::Family::Ipv4) {
        only_ipv6(&mut inv);
    }
    inv
}

/// Keeps the IPv6 addresses, ranges and Services of a dual-stack inventory, the IPv6 ones
/// becoming the primary (and only) ones; the IPv4 tunnel endpoints go too.
fn only_ipv6(inv: &mut crate::inventory::Inventory) {
    use crate::inventory::{Family, NO_IPV4};
    let six = |a: &SocketAddr| a.is_ipv6();
    let c = &mut inv.cluster;
    let last = |v: &mut Vec<Cidr>, first: &mut Cidr| {
        if let Some(x) = v.iter().copied().find(|x| x.family() == Family::Ipv6) {
            *first = x;
        }
        v.clear();
    };
    last(&mut c.pod_cidrs, &mut c.pod_cidr);
    last(&mut c.service_cidrs, &mut c.service_cidr);
    if let Some(s) = c.api.services.iter().copied().find(six) {
        c.api.service = s;
    }
    c.api.services.clear();
    c.api.endpoints.retain(six);
    if let Some(d) = c.dns.as_mut() {
        if let Some(s) = d.services.iter().copied().find(six) {
            d.service = s;
        }
        d.services.clear();
        d.endpoints.retain(six);
    }
    for n in &mut inv.nodes {
        n.address = NO_IPV4;
        n.pod_cidr = n
            .pod_cidrs
            .iter()
            .copied()
            .find(|x| x.family() == Family::Ipv6);
        n.pod_cidrs.clear();
        n.vtep = None;
        for a in [n.agents.host.as_mut(), n.agents.pod.as_mut()]
            .into_iter()
            .flatten()
        {
            a.address = NO_IPV4;
        }
    }
}

fn wired(s: &Scenario, l: &Layout) -> crate::inventory::Inventory {
    use crate::inventory::{Agent, Agents, Api, Cluster, Dns, Inventory, Node, Vtep};
    let exec = |ns: &str| {
        vec![
            "ip".to_string(),
            "netns".into(),
            "exec".into(),
            ns.to_string(),
        ]
    };
    let cidr = |t: &str| Cidr::try_from(t.to_string()).expect("constant CIDR");
    let dual = s.dual_stack();
    // Dual-stack: every range and Service of both families, IPv4 first (the lab's Services are
    // dual-stack, the `kubernetes` one too).
    let both = |v4: Cidr, v6: &str| if dual { vec![v4, cidr(v6)] } else { Vec::new() };
    let api_service = SocketAddr::from((API_SERVICE, 443));
    let dns_service = SocketAddr::from((DNS_SERVICE, 53));
    let services = |v4: SocketAddr, v6: std::net::Ipv6Addr| {
        if dual {
            vec![v4, SocketAddr::from((v6, v4.port()))]
        } else {
            Vec::new()
        }
    };
    Inventory {
        cluster: Cluster {
            cni: s.cni,
            pod_cidr: cidr(POD_CIDR),
            pod_cidrs: both(cidr(POD_CIDR), POD_CIDR6),
            service_cidr: cidr(SERVICE_CIDR),
            service_cidrs: both(cidr(SERVICE_CIDR), SERVICE_CIDR6),
            overlay: Some(s.overlay()),
            api: Api { service: api_service, services: services(api_service, API_SERVICE6), endpoints: l.api_endpoints() },
            dns: Some(Dns {
                service: dns_service,
                services: services(dns_service, DNS_SERVICE6),
                endpoints: std::iter::once(SocketAddr::from((l.dns_pod.address, 53)))
                    .chain(l.dns_pod.address6.map(|a| SocketAddr::from((a, 53))))
                    .collect(),
                // An external name too: the lab's own upstream answers it (never a real one).
                names: vec!["kubernetes.default.svc.cluster.local".into(), "example.com".into()],
                corefile: Some(".:53 {\n    errors\n    kubernetes cluster.local in-addr.arpa ip6.arpa\n    forward . /etc/resolv.conf\n    cache 30\n    loop\n}\n".into()),
            }),
            bgp: None,
            node_files: None,
            policies: s
                .faults
                .iter()
                .filter_map(|f| match f {
                    crate::lab::scenario::Fault::Policy { object, .. } => Some(object.clone()),
                    _ => None,
                })
                .collect(),
            agents_namespace: None,
        },
        nodes: l
            .nodes
            .iter()
            .map(|n| Node {
                name: n.name.clone(),
                roles: if n.control_plane { vec!["control-plane".into()] } else { Vec::new() },
                address: n.address,
                address6: n.address6,
                pod_cidr: Some(n.pod_cidr),
                pod_cidrs: if dual { vec![n.pod_cidr, n.pod_cidr6()] } else { Vec::new() },
                host_root: Some(n.root.clone()),
                vtep: s.overlay.is_none_or(|o| o.vteps_known).then_some(Vtep {
                    address: n.vtep,
                    mac: Some(n.mac),
                }),
                vtep6: l.vtep6_of(n).filter(|_| s.overlay.is_none_or(|o| o.vteps_known)).map(|(address, mac)| Vtep {
                    address,
                    mac: Some(mac),
                }),
                zone: Some(l.zones[n.zone].clone()),
                serves: None,
                agents: Agents {
                    host: Some(Agent { exec: exec(&n.ns), address: n.address, address6: n.address6, port: AGENT }),
                    pod: n.pods.first().map(|p| Agent { exec: exec(&p.ns), address: p.address, address6: p.address6, port: AGENT }),
                },
            })
            .collect(),
        components: s.components.clone(),
        agent_bin: None,
    }
}
