//! The inventory the lab writes for what it built: what `prober run` reads to probe the lab.

use std::net::SocketAddr;

use super::{AGENT_PORT, API_SERVICE, DNS_SERVICE, Layout, POD_CIDR, SERVICE_CIDR};
use crate::inventory::Cidr;

/// The agents' port, as the inventory types it.
const AGENT: probe_proto::Port = probe_proto::Port::new(AGENT_PORT).expect("non-zero");
use crate::lab::scenario::Scenario;

/// The inventory describing what `layout` builds, with `ip netns exec` exec prefixes.
#[must_use]
pub fn inventory(s: &Scenario, l: &Layout) -> crate::inventory::Inventory {
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
    Inventory {
        cluster: Cluster {
            cni: s.cni,
            pod_cidr: cidr(POD_CIDR),
            pod_cidrs: Vec::new(),
            service_cidr: cidr(SERVICE_CIDR),
            service_cidrs: Vec::new(),
            overlay: Some(s.overlay()),
            api: Api { service: SocketAddr::from((API_SERVICE, 443)), services: Vec::new(), endpoints: l.api_endpoints() },
            dns: Some(Dns {
                service: SocketAddr::from((DNS_SERVICE, 53)),
                services: Vec::new(),
                endpoints: vec![SocketAddr::from((l.dns_pod.address, 53))],
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
        },
        nodes: l
            .nodes
            .iter()
            .map(|n| Node {
                name: n.name.clone(),
                roles: if n.control_plane { vec!["control-plane".into()] } else { Vec::new() },
                address: n.address,
                address6: None,
                pod_cidr: Some(n.pod_cidr),
                pod_cidrs: Vec::new(),
                host_root: Some(n.root.clone()),
                vtep: s.overlay.is_none_or(|o| o.vteps_known).then_some(Vtep {
                    address: n.vtep,
                    mac: Some(n.mac),
                }),
                vtep6: None,
                zone: Some(l.zones[n.zone].clone()),
                serves: None,
                agents: Agents {
                    host: Some(Agent { exec: exec(&n.ns), address: n.address, address6: None, port: AGENT }),
                    pod: n.pods.first().map(|p| Agent { exec: exec(&p.ns), address: p.address, address6: None, port: AGENT }),
                },
            })
            .collect(),
        components: s.components.clone(),
        agent_bin: None,
    }
}
