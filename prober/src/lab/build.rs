//! Pure: a scenario becomes a lab layout (names, addresses) and the exact commands that build it —
//! `ip -batch` lines, `bridge -batch` lines and nftables rulesets per namespace. Nothing here runs.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use probe_proto::MacAddr;

use super::scenario::{Action, Fault, Place, Scenario};
use crate::inventory::Cidr;
use crate::model::{Direction, Protocol};

pub const VXLAN_PORT: u16 = 8472;
pub const AGENT_PORT: u16 = 9917;
pub const API_PORT: u16 = 6443;
pub const OVERLAY_MTU: u16 = 1450;
pub const API_SERVICE: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);
pub const DNS_SERVICE: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 10);
pub const POD_CIDR: &str = "10.244.0.0/16";
pub const SERVICE_CIDR: &str = "10.96.0.0/12";
/// The last octet of the DNS pod's address in its node's pod subnet.
const DNS_POD_HOST: u8 = 53;

/// One pod: its namespace, its address, and its veth's name on the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    pub ns: String,
    pub address: Ipv4Addr,
    pub host_if: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabNode {
    pub name: String,
    /// 1-based; the node's pod subnet is 10.244.<index>.0/24.
    pub index: u8,
    pub zone: usize,
    pub ns: String,
    pub address: Ipv4Addr,
    pub control_plane: bool,
    pub pod_cidr: Cidr,
    pub vtep: Ipv4Addr,
    pub mac: MacAddr,
    pub pods: Vec<Pod>,
    pub root: PathBuf,
}

impl LabNode {
    #[must_use]
    pub fn gateway(&self) -> Ipv4Addr {
        zone_router(self.zone)
    }

    #[must_use]
    pub fn switch_port(&self) -> String {
        format!("n{}", self.index)
    }
}

/// Names and addresses of everything in one lab.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub prefix: String,
    pub state_dir: PathBuf,
    pub router_ns: String,
    pub zones: Vec<String>,
    pub switch_ns: Vec<String>,
    pub nodes: Vec<LabNode>,
    pub dns_pod: Pod,
    pub dns_node: usize,
    /// The "external" resolver the cluster DNS forwards to (on the router; lab-internal).
    pub upstream_dns: Ipv4Addr,
}

fn zone_router(zone: usize) -> Ipv4Addr {
    Ipv4Addr::new(
        192,
        168,
        56 + u8::try_from(zone).expect("at most 8 zones"),
        1,
    )
}

impl Layout {
    #[must_use]
    pub fn node(&self, name: &str) -> Option<&LabNode> {
        self.nodes.iter().find(|n| n.name == name)
    }

    #[must_use]
    pub fn api_endpoints(&self) -> Vec<SocketAddr> {
        self.nodes
            .iter()
            .filter(|n| n.control_plane)
            .map(|n| SocketAddr::from((n.address, API_PORT)))
            .collect()
    }

    /// Every namespace, in creation order.
    #[must_use]
    pub fn namespaces(&self) -> Vec<String> {
        let mut v = vec![self.router_ns.clone()];
        v.extend(self.switch_ns.iter().cloned());
        for n in &self.nodes {
            v.push(n.ns.clone());
            v.extend(n.pods.iter().map(|p| p.ns.clone()));
        }
        v.push(self.dns_pod.ns.clone());
        v
    }
}

/// Lays out the lab: zone `z` is 192.168.(56+z).0/24 with its router at .1; node `i` is .(9+i).
#[must_use]
pub fn layout(s: &Scenario, prefix: &str, state_dir: &Path) -> Layout {
    let zones: Vec<String> = if s.zones.is_empty() {
        vec!["default".into()]
    } else {
        s.zones.iter().map(|z| z.name.clone()).collect()
    };
    let zone_of = |name: &str| {
        s.zones
            .iter()
            .position(|z| z.nodes.iter().any(|n| n == name))
            .unwrap_or(0)
    };
    let nodes: Vec<LabNode> = s
        .node_names()
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            let index = u8::try_from(i + 1).expect("validated: at most 250 nodes");
            let zone = zone_of(&name);
            let ns = format!("{prefix}{name}");
            let pods = (0..s.pods_per_node)
                .map(|k| Pod {
                    ns: format!("{ns}p{k}"),
                    address: Ipv4Addr::new(
                        10,
                        244,
                        index,
                        2 + u8::try_from(k).expect("validated: at most 40 pods"),
                    ),
                    host_if: format!("veth{k}"),
                })
                .collect();
            LabNode {
                index,
                zone,
                address: Ipv4Addr::new(
                    192,
                    168,
                    56 + u8::try_from(zone).expect("at most 8 zones"),
                    9 + index,
                ),
                control_plane: i < s.control_planes,
                pod_cidr: Cidr {
                    addr: Ipv4Addr::new(10, 244, index, 0),
                    len: 24,
                },
                vtep: Ipv4Addr::new(10, 244, index, 0),
                mac: MacAddr([0x02, 0x00, 0x0a, 0xf4, index, 0x00]),
                pods,
                root: state_dir.join("nodes").join(&name),
                ns,
                name,
            }
        })
        .collect();
    let dns_node = nodes.iter().position(|n| n.name == s.dns_node).unwrap_or(0);
    let dn = &nodes[dns_node];
    let dns_pod = Pod {
        ns: format!("{}dns", dn.ns),
        address: Ipv4Addr::new(10, 244, dn.index, DNS_POD_HOST),
        host_if: "vethdns".into(),
    };
    Layout {
        prefix: prefix.to_string(),
        state_dir: state_dir.to_path_buf(),
        router_ns: format!("{prefix}rt"),
        switch_ns: (0..zones.len()).map(|z| format!("{prefix}sw{z}")).collect(),
        zones,
        nodes,
        dns_pod,
        dns_node,
        upstream_dns: zone_router(0),
    }
}

/// What to run in one namespace, phase by phase.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NsSetup {
    pub ns: String,
    /// Phase 1: create veth pairs whose peers go to other namespaces (`ip -batch`).
    pub links: Vec<String>,
    /// Phase 2: addresses, devices, routes, neighbours (`ip -batch`).
    pub config: Vec<String>,
    /// Phase 3: forwarding database entries (`bridge -batch`).
    pub fdb: Vec<String>,
    /// Phase 4: one nftables ruleset.
    pub nft: String,
    pub sysctl: Vec<(String, String)>,
}

impl NsSetup {
    fn new(ns: &str) -> Self {
        Self {
            ns: ns.to_string(),
            // Lab namespaces speak IPv4 only: no router solicitations or DAD noise on the wire.
            sysctl: vec![
                ("net.ipv6.conf.all.disable_ipv6".into(), "1".into()),
                ("net.ipv6.conf.default.disable_ipv6".into(), "1".into()),
            ],
            ..Self::default()
        }
    }
}

/// The commands that build the lab, namespace by namespace.
#[must_use]
pub fn setups(s: &Scenario, l: &Layout) -> Vec<NsSetup> {
    let mut out = Vec::new();
    let mut router = NsSetup::new(&l.router_ns);
    router
        .sysctl
        .push(("net.ipv4.ip_forward".into(), "1".into()));
    // Like a cloud network: packets for Service IPs that no kube-proxy translated vanish silently.
    router.nft = format!(
        "table inet prober-lab {{\n  chain prerouting {{\n    type filter hook prerouting priority -10; policy accept;\n    \
         ip daddr {SERVICE_CIDR} drop\n  }}\n}}\n"
    );
    for (z, sw) in l.switch_ns.iter().enumerate() {
        let mut setup = NsSetup::new(sw);
        setup.links.push(format!(
            "link add rt type veth peer name z{z} netns {}",
            l.router_ns
        ));
        setup.config.push("link add br0 type bridge".into());
        setup.config.push("link set br0 up".into());
        setup.config.push("link set rt master br0 up".into());
        router
            .config
            .push(format!("addr add {}/24 dev z{z}", zone_router(z)));
        router.config.push(format!("link set z{z} up"));
        for n in l.nodes.iter().filter(|n| n.zone == z) {
            setup.links.push(format!(
                "link add {} type veth peer name eth0 netns {}",
                n.switch_port(),
                n.ns
            ));
            setup
                .config
                .push(format!("link set {} master br0 up", n.switch_port()));
        }
        out.push(setup);
    }
    for n in &l.nodes {
        out.push(node_setup(s, l, n));
        for p in &n.pods {
            out.push(pod_setup(p, n));
        }
        if l.nodes[l.dns_node].name == n.name {
            out.push(pod_setup(&l.dns_pod, n));
        }
    }
    apply_faults(s, l, &mut out, &mut router);
    out.insert(0, router);
    out
}

fn node_setup(s: &Scenario, l: &Layout, n: &LabNode) -> NsSetup {
    let mut st = NsSetup::new(&n.ns);
    st.sysctl.push(("net.ipv4.ip_forward".into(), "1".into()));
    let c = &mut st.config;
    c.push("link set eth0 up".into());
    c.push(format!("addr add {}/24 dev eth0", n.address));
    c.push(format!("route add default via {}", n.gateway()));
    c.push(format!(
        "link add flannel.1 address {} type vxlan id 1 local {} dev eth0 dstport {VXLAN_PORT} nolearning",
        n.mac, n.address
    ));
    c.push(format!("link set flannel.1 mtu {OVERLAY_MTU}"));
    c.push(format!("addr add {}/32 dev flannel.1", n.vtep));
    c.push("link set flannel.1 up".into());
    c.push("link add cni0 type bridge".into());
    c.push(format!("link set cni0 mtu {OVERLAY_MTU}"));
    c.push(format!(
        "addr add {}/24 dev cni0",
        Ipv4Addr::from(u32::from(n.pod_cidr.addr) + 1)
    ));
    c.push("link set cni0 up".into());
    let mut pods: Vec<&Pod> = n.pods.iter().collect();
    if l.nodes[l.dns_node].name == n.name {
        pods.push(&l.dns_pod);
    }
    for p in pods {
        st.links.push(format!(
            "link add {} type veth peer name eth0 netns {}",
            p.host_if, p.ns
        ));
        st.config.push(format!(
            "link set {} master cni0 mtu {OVERLAY_MTU} up",
            p.host_if
        ));
    }
    // What flanneld programs for every other node: route, permanent neighbour, fdb entry.
    for peer in l.nodes.iter().filter(|p| p.name != n.name) {
        st.config.push(format!(
            "route add {} via {} dev flannel.1 onlink",
            peer.pod_cidr, peer.vtep
        ));
        st.config.push(format!(
            "neigh add {} lladdr {} dev flannel.1 nud permanent",
            peer.vtep, peer.mac
        ));
        st.fdb.push(format!(
            "fdb append {} dev flannel.1 dst {}",
            peer.mac, peer.address
        ));
    }
    let kube_proxy = !s
        .faults
        .iter()
        .any(|f| matches!(f, Fault::KubeProxyMissing { node } if *node == n.name));
    st.nft = node_nat(l, n, kube_proxy);
    st
}

fn pod_setup(p: &Pod, n: &LabNode) -> NsSetup {
    let mut st = NsSetup::new(&p.ns);
    // What the agent DaemonSet sets: ICMP echo without CAP_NET_RAW.
    st.sysctl
        .push(("net.ipv4.ping_group_range".into(), "0 2147483647".into()));
    st.config
        .push(format!("link set eth0 mtu {OVERLAY_MTU} up"));
    st.config
        .push(format!("addr add {}/24 dev eth0", p.address));
    st.config.push(format!(
        "route add default via {}",
        Ipv4Addr::from(u32::from(n.pod_cidr.addr) + 1)
    ));
    st
}

/// kube-proxy's DNAT for the two Services, flannel's masquerade rules, and kube-proxy's hairpin
/// masquerade for endpoints that reach themselves through their Service.
fn node_nat(l: &Layout, n: &LabNode, kube_proxy: bool) -> String {
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

/// The nftables match for a protocol and optional port.
fn proto_match(protocol: Protocol, port: Option<&super::scenario::Ports>) -> String {
    match (protocol, port) {
        (Protocol::Icmp, _) => "meta l4proto icmp".into(),
        (Protocol::Tcp, Some(p)) => format!("tcp dport {}", p.nft()),
        (Protocol::Udp, Some(p)) => format!("udp dport {}", p.nft()),
        (Protocol::Tcp, None) => "meta l4proto tcp".into(),
        (Protocol::Udp, None) => "meta l4proto udp".into(),
    }
}

fn verdict(action: Action) -> &'static str {
    match action {
        Action::Drop => "drop",
        Action::Reject => "reject with icmp type admin-prohibited",
    }
}

/// The (from, to) node pairs a firewall fault covers.
fn pairs<'a>(
    l: &'a Layout,
    from: &[String],
    to: &[String],
    direction: Direction,
) -> Vec<(&'a LabNode, &'a LabNode)> {
    let pick = |names: &[String], other: &[String]| -> Vec<&LabNode> {
        l.nodes
            .iter()
            .filter(|n| {
                if names.is_empty() {
                    !other.contains(&n.name)
                } else {
                    names.contains(&n.name)
                }
            })
            .collect()
    };
    let (f, t) = (pick(from, to), pick(to, from));
    let mut out = Vec::new();
    for a in &f {
        for b in &t {
            if a.name != b.name {
                out.push((*a, *b));
                if direction == Direction::Both {
                    out.push((*b, *a));
                }
            }
        }
    }
    out.sort_by_key(|(a, b)| (a.index, b.index));
    out.dedup();
    out
}

/// Rules collected per place before they become rulesets.
#[derive(Default)]
struct FaultRules {
    router: Vec<String>,
    /// Per switch: per ingress port, netdev rules.
    ports: Vec<Vec<(String, String)>>,
    /// Per switch: bridge forward rules.
    bridge: Vec<Vec<String>>,
    /// Per node index: input rules.
    host: Vec<Vec<String>>,
    mtu: Vec<(usize, String, u16)>,
}

fn apply_faults(scenario: &Scenario, l: &Layout, out: &mut [NsSetup], router: &mut NsSetup) {
    let mut rules = FaultRules {
        ports: vec![Vec::new(); l.switch_ns.len()],
        bridge: vec![Vec::new(); l.switch_ns.len()],
        host: vec![Vec::new(); l.nodes.len()],
        ..FaultRules::default()
    };
    for f in &scenario.faults {
        match f {
            Fault::Firewall {
                action,
                protocol,
                port,
                from,
                to,
                direction,
                place,
            } => {
                let matcher = proto_match(*protocol, port.as_ref());
                let action = verdict(*action);
                for (a, b) in pairs(l, from, to, *direction) {
                    let rule = format!(
                        "ip saddr {} ip daddr {} {matcher} {action}",
                        a.address, b.address
                    );
                    match place {
                        Place::Host => rules.host[usize::from(b.index) - 1]
                            .push(format!("ip saddr {} {matcher} {action}", a.address)),
                        Place::Network if a.zone != b.zone => rules.router.push(rule),
                        // Within one zone the switch filters frames as they enter from the sender
                        // (netdev ingress can both drop and reject).
                        Place::Network => rules.ports[a.zone].push((a.switch_port(), rule)),
                    }
                }
            }
            Fault::Mtu { node, mtu } => {
                if let Some(n) = l.node(node) {
                    rules.mtu.push((n.zone, n.switch_port(), *mtu));
                }
            }
            Fault::Loss { node, percent } => {
                if let Some(n) = l.node(node) {
                    // nftables refuses `< 100` on a value that is always below 100.
                    let share = if *percent >= 100 {
                        String::new()
                    } else {
                        format!("numgen random mod 100 < {percent} ")
                    };
                    // IPv4 only: ARP keeps working, so loss looks like loss, not like a dead
                    // neighbour (which the kernel reports as host unreachable after 3 s).
                    for dir in ["iifname", "oifname"] {
                        rules.bridge[n.zone].push(format!(
                            "{dir} \"{}\" ether type ip {share}drop",
                            n.switch_port()
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    if !rules.router.is_empty() {
        router
            .nft
            .push_str(&chain("inet", "forward", "forward", &rules.router));
    }
    for st in out.iter_mut() {
        if let Some(z) = l.switch_ns.iter().position(|sw| *sw == st.ns) {
            for (zone, port, mtu) in &rules.mtu {
                if *zone == z {
                    st.config.push(format!("link set {port} mtu {mtu}"));
                }
            }
            let mut text = String::new();
            if !rules.bridge[z].is_empty() {
                text.push_str(&chain("bridge", "forward", "forward", &rules.bridge[z]));
            }
            let mut ports: Vec<&String> = rules.ports[z].iter().map(|(p, _)| p).collect();
            ports.sort();
            ports.dedup();
            if !ports.is_empty() {
                let _ = writeln!(text, "table netdev prober-fault {{");
                for p in ports {
                    let chain_rules: Vec<&str> = rules.ports[z]
                        .iter()
                        .filter(|(q, _)| q == p)
                        .map(|(_, rule)| rule.as_str())
                        .collect();
                    let _ = writeln!(
                        text,
                        "  chain in-{p} {{\n    type filter hook ingress device \"{p}\" priority 0; policy accept;\n    {}\n  }}",
                        chain_rules.join("\n    ")
                    );
                }
                text.push_str("}\n");
            }
            st.nft = text;
        } else if let Some(n) = l.nodes.iter().find(|n| n.ns == st.ns) {
            let host_rules = &rules.host[usize::from(n.index) - 1];
            if !host_rules.is_empty() {
                st.nft
                    .push_str(&chain("inet", "input", "input", host_rules));
            }
        }
    }
}

fn chain(family: &str, name: &str, hook: &str, rules: &[String]) -> String {
    format!(
        "table {family} prober-fault {{\n  chain {name} {{\n    type filter hook {hook} priority 0; policy accept;\n    {}\n  }}\n}}\n",
        rules.join("\n    ")
    )
}

/// A long-running program the lab starts in one of its namespaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    pub ns: String,
    pub argv: Vec<String>,
    /// For logs and messages: `host-agent`, `apiserver`, ...
    pub what: &'static str,
}

fn dnsmasq(listen: Ipv4Addr, extra: &[String]) -> Vec<String> {
    let mut v: Vec<String> = [
        "dnsmasq",
        "-k",
        "--no-resolv",
        "--no-hosts",
        "--conf-file=/dev/null",
        "--bind-interfaces",
        "--port=53",
        // No cache: every probe must reach the server it names.
        "--cache-size=0",
        "--pid-file=",
        "--user=root",
        "--log-facility=-",
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    v.push(format!("--listen-address={listen}"));
    v.extend(extra.iter().cloned());
    v
}

/// The servers and agents of the lab: the "external" resolver on the router, the cluster DNS pod,
/// the API server stand-in on every control-plane node, and an agent in every node and pod.
#[must_use]
pub fn processes(s: &Scenario, l: &Layout, agent: &Path, prober: &Path) -> Vec<Process> {
    let mut out = vec![Process {
        ns: l.router_ns.clone(),
        argv: dnsmasq(
            l.upstream_dns,
            &["--address=/example.com/192.0.2.10".into()],
        ),
        what: "upstream-dns",
    }];
    let forward = if s.faults.iter().any(|f| matches!(f, Fault::DnsLoop)) {
        DNS_SERVICE
    } else {
        l.upstream_dns
    };
    out.push(Process {
        ns: l.dns_pod.ns.clone(),
        argv: dnsmasq(
            l.dns_pod.address,
            &[
                "--local=/cluster.local/".into(),
                format!("--host-record=kubernetes.default.svc.cluster.local,{API_SERVICE}"),
                format!("--host-record=kube-dns.kube-system.svc.cluster.local,{DNS_SERVICE}"),
                format!("--server={forward}"),
            ],
        ),
        what: "cluster-dns",
    });
    let pki = l.state_dir.join("pki");
    let path = |p: PathBuf| p.display().to_string();
    for n in l.nodes.iter().filter(|n| n.control_plane) {
        let argv = vec![
            path(prober.to_path_buf()),
            "lab".into(),
            "apiserver".into(),
            "--listen".into(),
            format!("0.0.0.0:{API_PORT}"),
            "--cert".into(),
            path(pki.join("apiserver.crt")),
            "--key".into(),
            path(pki.join("apiserver.key")),
            "--tokens".into(),
            path(pki.join("tokens")),
        ];
        out.push(Process {
            ns: n.ns.clone(),
            argv,
            what: "apiserver",
        });
    }
    let agent = path(agent.to_path_buf());
    for n in &l.nodes {
        // The host agent also stands in for what listens on a real node: the kubelet, etcd on
        // control planes, and the CNI's TCP ports.
        // (The API server's own port is the stand-in's, not the agent's.)
        let ports = crate::plan::served_tcp_ports(s.cni, n.control_plane);
        let list: Vec<String> = ports
            .iter()
            .filter(|&&p| p != API_PORT)
            .map(u16::to_string)
            .collect();
        out.push(Process {
            ns: n.ns.clone(),
            argv: vec![
                agent.clone(),
                "serve".into(),
                "--extra-tcp-port".into(),
                list.join(","),
            ],
            what: "host-agent",
        });
        for p in &n.pods {
            let argv = vec![
                agent.clone(),
                "serve".into(),
                "--sniff".into(),
                "never".into(),
            ];
            out.push(Process {
                ns: p.ns.clone(),
                argv,
                what: "pod-agent",
            });
        }
    }
    out
}

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

const HOUR: u64 = 3600;

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
    let cp = l
        .nodes
        .iter()
        .find(|n| n.control_plane)
        .map_or(Ipv4Addr::LOCALHOST, |n| n.address);
    let has = |f: &dyn Fn(&Fault) -> bool| s.faults.iter().any(f);
    let dns_loop = has(&|f| matches!(f, Fault::DnsLoop));
    let mut files = Vec::new();
    let mut allowed = Vec::new();
    for n in &l.nodes {
        let etc = n.root.join("etc");
        let localhost = has(&|f| matches!(f, Fault::KubeletLocalhost { node } if *node == n.name));
        let server = if localhost {
            "https://localhost:6443".to_string()
        } else {
            format!("https://{cp}:{API_PORT}")
        };
        let user = format!("system:node:{}", n.name);
        let cert = "    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem\n    \
                    client-key: /var/lib/kubelet/pki/kubelet-client-current.pem";
        files.push((
            etc.join("kubernetes/kubelet.conf"),
            kubeconfig(&server, &ca_b64, &user, cert),
        ));
        files.push((etc.join("kubernetes/pki/ca.crt"), ca_pem.to_string()));
        // With the loop fault the node points at a local stub resolver, as systemd-resolved does:
        // CoreDNS's `forward . /etc/resolv.conf` then forwards to itself.
        let resolv = if dns_loop {
            "nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch .\n".to_string()
        } else {
            format!("nameserver {}\n", l.upstream_dns)
        };
        files.push((etc.join("resolv.conf"), resolv));
        let expired = has(&|f| matches!(f, Fault::CniTokenExpired { node } if *node == n.name));
        let stale = has(&|f| matches!(f, Fault::CniTokenStale { node } if *node == n.name));
        let net_d = etc.join("cni/net.d");
        if s.cni == crate::inventory::Cni::Calico || expired || stale {
            let (iat, exp) = match (expired, stale) {
                (true, _) => (tokens.now - 25 * HOUR, tokens.now - HOUR),
                (_, true) => (tokens.now - 3 * HOUR, tokens.now + 365 * 24 * HOUR),
                _ => (tokens.now, tokens.now + 24 * HOUR),
            };
            let jwt = super::pki::token(
                &super::pki::TokenClaims {
                    namespace: "kube-system",
                    service_account: "calico-cni-plugin",
                    issued_at: iat,
                    expires_at: exp,
                },
                &tokens.key,
            );
            let credential = format!("    token: {jwt}");
            files.push((
                net_d.join("calico-kubeconfig"),
                kubeconfig(
                    &format!("https://{API_SERVICE}:443"),
                    &ca_b64,
                    "calico",
                    &credential,
                ),
            ));
            files.push((
                net_d.join("10-calico.conflist"),
                cni_conflist("calico", "/etc/cni/net.d/calico-kubeconfig"),
            ));
            // Outside the host root: the token alone, so reachability expectations can send it.
            files.push((l.state_dir.join("tokens").join(&n.name), format!("{jwt}\n")));
            allowed.push(jwt);
        } else {
            files.push((
                net_d.join("10-flannel.conflist"),
                cni_conflist("flannel", ""),
            ));
        }
    }
    HostFiles {
        files,
        allowed_tokens: allowed,
    }
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

/// The inventory describing what `layout` builds, with `ip netns exec` exec prefixes.
#[must_use]
pub fn inventory(s: &Scenario, l: &Layout) -> crate::inventory::Inventory {
    use crate::inventory::{Agent, Agents, Api, Cluster, Dns, Inventory, Node, Overlay, Vtep};
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
            service_cidr: cidr(SERVICE_CIDR),
            overlay: Some(Overlay { mode: "vxlan".into(), port: VXLAN_PORT, vni: 1, mtu: Some(OVERLAY_MTU) }),
            api: Api { service: SocketAddr::from((API_SERVICE, 443)), endpoints: l.api_endpoints() },
            dns: Some(Dns {
                service: SocketAddr::from((DNS_SERVICE, 53)),
                endpoints: vec![SocketAddr::from((l.dns_pod.address, 53))],
                // An external name too: the lab's own upstream answers it (never a real one).
                names: vec!["kubernetes.default.svc.cluster.local".into(), "example.com".into()],
                corefile: Some(".:53 {\n    errors\n    kubernetes cluster.local in-addr.arpa ip6.arpa\n    forward . /etc/resolv.conf\n    cache 30\n    loop\n}\n".into()),
            }),
            bgp: None,
            node_files: None,
        },
        nodes: l
            .nodes
            .iter()
            .map(|n| Node {
                name: n.name.clone(),
                roles: if n.control_plane { vec!["control-plane".into()] } else { Vec::new() },
                address: n.address,
                pod_cidr: Some(n.pod_cidr),
                host_root: Some(n.root.clone()),
                vtep: Some(Vtep { address: n.vtep, mac: n.mac }),
                zone: Some(l.zones[n.zone].clone()),
                serves: None,
                agents: Agents {
                    host: Some(Agent { exec: exec(&n.ns), address: n.address, port: AGENT_PORT }),
                    pod: n.pods.first().map(|p| Agent { exec: exec(&p.ns), address: p.address, port: AGENT_PORT }),
                },
            })
            .collect(),
        components: s.components.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lab(yaml: &str) -> (Layout, Vec<NsSetup>) {
        let s = Scenario::parse(yaml).unwrap();
        let l = layout(&s, "plab-t-", Path::new("/run/prober-lab/plab-t-"));
        let st = setups(&s, &l);
        (l, st)
    }

    fn ns<'a>(st: &'a [NsSetup], name: &str) -> &'a NsSetup {
        st.iter()
            .find(|s| s.ns == name)
            .unwrap_or_else(|| panic!("no namespace {name}"))
    }

    #[test]
    fn three_nodes_like_flanneld_programs_them() {
        let (l, st) = lab("{}");
        assert_eq!(
            l.namespaces(),
            [
                "plab-t-rt",
                "plab-t-sw0",
                "plab-t-n1",
                "plab-t-n1p0",
                "plab-t-n2",
                "plab-t-n2p0",
                "plab-t-n3",
                "plab-t-n3p0",
                "plab-t-n1dns"
            ]
        );
        assert_eq!(l.nodes[0].address, Ipv4Addr::new(192, 168, 56, 10));
        assert!(l.nodes[0].control_plane && !l.nodes[1].control_plane);
        let n1 = ns(&st, "plab-t-n1");
        for line in [
            "addr add 192.168.56.10/24 dev eth0",
            "link add flannel.1 address 02:00:0a:f4:01:00 type vxlan id 1 local 192.168.56.10 dev eth0 dstport 8472 nolearning",
            "addr add 10.244.1.0/32 dev flannel.1",
            "addr add 10.244.1.1/24 dev cni0",
            "route add 10.244.2.0/24 via 10.244.2.0 dev flannel.1 onlink",
            "neigh add 10.244.3.0 lladdr 02:00:0a:f4:03:00 dev flannel.1 nud permanent",
        ] {
            assert!(
                n1.config.contains(&line.to_string()),
                "n1 lacks {line:?}: {:#?}",
                n1.config
            );
        }
        assert_eq!(
            n1.fdb,
            [
                "fdb append 02:00:0a:f4:02:00 dev flannel.1 dst 192.168.56.11",
                "fdb append 02:00:0a:f4:03:00 dev flannel.1 dst 192.168.56.12"
            ]
        );
        assert_eq!(
            n1.links,
            [
                "link add veth0 type veth peer name eth0 netns plab-t-n1p0",
                "link add vethdns type veth peer name eth0 netns plab-t-n1dns"
            ]
        );
        assert!(
            n1.nft
                .contains("ip daddr 10.96.0.1 tcp dport 443 dnat to 192.168.56.10:6443"),
            "{}",
            n1.nft
        );
        assert!(
            n1.nft
                .contains("ip daddr 10.96.0.10 udp dport 53 dnat to 10.244.1.53:53")
        );
        let pod = ns(&st, "plab-t-n2p0");
        assert_eq!(
            pod.config,
            [
                "link set eth0 mtu 1450 up",
                "addr add 10.244.2.2/24 dev eth0",
                "route add default via 10.244.2.1"
            ]
        );
        let sw = ns(&st, "plab-t-sw0");
        assert!(
            sw.links
                .contains(&"link add n3 type veth peer name eth0 netns plab-t-n3".to_string())
        );
        let rt = &ns(&st, "plab-t-rt").nft;
        assert!(
            sw.nft.is_empty() && !rt.contains("prober-fault"),
            "healthy: no fault rules"
        );
        assert!(
            rt.contains("ip daddr 10.96.0.0/12 drop"),
            "untranslated Service IPs vanish: {rt}"
        );
    }

    #[test]
    fn firewall_across_zones_sits_on_the_router() {
        let (_, st) = lab(
            "zones: [{name: a, nodes: [n1, n2]}, {name: b, nodes: [n3]}]\n\
             faults: [{kind: firewall, action: drop, protocol: udp, port: 8472, from: [n3], direction: both}]",
        );
        let rt = &ns(&st, "plab-t-rt").nft;
        for rule in [
            "ip saddr 192.168.57.12 ip daddr 192.168.56.10 udp dport 8472 drop",
            "ip saddr 192.168.56.10 ip daddr 192.168.57.12 udp dport 8472 drop",
            "ip saddr 192.168.57.12 ip daddr 192.168.56.11 udp dport 8472 drop",
            "ip saddr 192.168.56.11 ip daddr 192.168.57.12 udp dport 8472 drop",
        ] {
            assert!(rt.contains(rule), "router lacks {rule}:\n{rt}");
        }
        assert_eq!(
            rt.matches("udp dport 8472 drop").count(),
            4,
            "n1<->n2 untouched:\n{rt}"
        );
        assert!(
            ns(&st, "plab-t-n3")
                .config
                .contains(&"route add default via 192.168.57.1".to_string())
        );
    }

    #[test]
    fn same_zone_network_reject_sits_on_the_switch_port() {
        let (_, st) = lab(
            "faults: [{kind: firewall, action: reject, protocol: tcp, port: 6443, from: [n2], to: [n1]}]",
        );
        let sw = &ns(&st, "plab-t-sw0").nft;
        assert!(sw.contains("hook ingress device \"n2\""), "{sw}");
        assert!(sw.contains("ip saddr 192.168.56.11 ip daddr 192.168.56.10 tcp dport 6443 reject with icmp type admin-prohibited"), "{sw}");
        assert!(!ns(&st, "plab-t-rt").nft.contains("prober-fault"));
    }

    #[test]
    fn host_faults_go_to_the_receivers_input_chain() {
        let (_, st) = lab(
            "faults: [{kind: firewall, action: drop, protocol: udp, port: 8472, to: [n2], place: host}]",
        );
        let n2 = &ns(&st, "plab-t-n2").nft;
        assert!(n2.contains("hook input"), "{n2}");
        assert!(
            n2.contains("ip saddr 192.168.56.10 udp dport 8472 drop")
                && n2.contains("ip saddr 192.168.56.12 udp dport 8472 drop"),
            "{n2}"
        );
        assert!(!ns(&st, "plab-t-n1").nft.contains("hook input"));
    }

    #[test]
    fn other_faults() {
        let (_, st) = lab(
            "faults: [{kind: kube-proxy-missing, node: n2}, {kind: mtu, node: n3, mtu: 1400}, {kind: loss, node: n1, percent: 30}]",
        );
        assert!(
            !ns(&st, "plab-t-n2").nft.contains("dnat"),
            "no Service rules on n2"
        );
        assert!(ns(&st, "plab-t-n3").nft.contains("dnat"));
        let sw = ns(&st, "plab-t-sw0");
        assert!(sw.config.contains(&"link set n3 mtu 1400".to_string()));
        assert!(
            sw.nft
                .contains("iifname \"n1\" ether type ip numgen random mod 100 < 30 drop")
                && sw.nft.contains("oifname \"n1\"")
        );
    }

    #[test]
    fn twenty_nodes_fit() {
        let (l, st) = lab("nodes: 20\ncontrolPlanes: 3");
        assert_eq!(l.nodes[19].address, Ipv4Addr::new(192, 168, 56, 29));
        assert_eq!(l.api_endpoints().len(), 3);
        let n5 = ns(&st, "plab-t-n5");
        assert_eq!(n5.fdb.len(), 19);
        assert!(n5.nft.contains("numgen random mod 3 map { 0 : 192.168.56.10, 1 : 192.168.56.11, 2 : 192.168.56.12 } : 6443"), "{}", n5.nft);
    }

    #[test]
    fn processes_of_a_lab() {
        let s = Scenario::parse("faults: [{kind: dns-loop}]").unwrap();
        let l = layout(&s, "plab-t-", Path::new("/state"));
        let procs = processes(
            &s,
            &l,
            Path::new("/bin/probe-pod"),
            Path::new("/bin/prober"),
        );
        let what: Vec<&str> = procs.iter().map(|p| p.what).collect();
        assert_eq!(what.iter().filter(|w| **w == "host-agent").count(), 3);
        assert_eq!(what.iter().filter(|w| **w == "pod-agent").count(), 3);
        assert_eq!(what.iter().filter(|w| **w == "apiserver").count(), 1);
        let dns = procs.iter().find(|p| p.what == "cluster-dns").unwrap();
        assert!(
            dns.argv.contains(&"--server=10.96.0.10".to_string()),
            "the loop: it forwards to itself"
        );
        assert!(
            dns.argv
                .contains(&"--listen-address=10.244.1.53".to_string())
        );
        let healthy = processes(&Scenario::default(), &l, Path::new("a"), Path::new("b"));
        let dns = healthy.iter().find(|p| p.what == "cluster-dns").unwrap();
        assert!(dns.argv.contains(&"--server=192.168.56.1".to_string()));
    }

    #[test]
    fn host_files_carry_the_node_faults() {
        let s = Scenario::parse(
            "faults: [{kind: cni-token-expired, node: n2}, {kind: cni-token-stale, node: n3}, {kind: kubelet-localhost, node: n3}, {kind: dns-loop}]",
        )
        .unwrap();
        let l = layout(&s, "plab-t-", Path::new("/state"));
        let hf = host_files(
            &s,
            &l,
            "CA",
            &Tokens {
                now: 100_000,
                key: b"k".to_vec(),
            },
        );
        let file = |p: &str| {
            hf.files
                .iter()
                .find(|(f, _)| f == Path::new(p))
                .map_or_else(|| panic!("no {p}"), |(_, t)| t.clone())
        };
        assert!(
            file("/state/nodes/n1/etc/kubernetes/kubelet.conf")
                .contains("server: https://192.168.56.10:6443")
        );
        assert!(
            file("/state/nodes/n3/etc/kubernetes/kubelet.conf")
                .contains("server: https://localhost:6443")
        );
        assert!(file("/state/nodes/n1/etc/resolv.conf").contains("127.0.0.53"));
        assert!(file("/state/nodes/n1/etc/cni/net.d/10-flannel.conflist").contains("flannel"));
        let expired = file("/state/nodes/n2/etc/cni/net.d/calico-kubeconfig");
        let jwt = expired
            .lines()
            .find_map(|l| l.trim().strip_prefix("token: "))
            .unwrap();
        assert_eq!(super::super::pki::expiry(jwt), Some(100_000 - HOUR));
        assert!(
            file("/state/nodes/n3/etc/cni/net.d/calico-kubeconfig")
                .contains("server: https://10.96.0.1:443")
        );
        assert_eq!(
            hf.allowed_tokens.len(),
            2,
            "the stand-in knows both tokens; it rejects the expired one by its exp"
        );
    }

    #[test]
    fn inventory_describes_the_lab() {
        let s = Scenario::parse("zones: [{name: a, nodes: [n1, n2]}, {name: dmz, nodes: [n3]}]")
            .unwrap();
        let l = layout(&s, "plab-t-", Path::new("/state"));
        let inv = inventory(&s, &l);
        inv.validate().unwrap();
        assert_eq!(inv.nodes[2].zone.as_deref(), Some("dmz"));
        assert_eq!(
            inv.nodes[0].agents.host.as_ref().unwrap().exec,
            ["ip", "netns", "exec", "plab-t-n1"]
        );
        assert_eq!(
            inv.nodes[1].agents.pod.as_ref().unwrap().address,
            Ipv4Addr::new(10, 244, 2, 2)
        );
        assert_eq!(
            inv.cluster.api.endpoints,
            ["192.168.56.10:6443".parse().unwrap()]
        );
        let yaml = inv.to_yaml();
        let back: crate::inventory::Inventory = serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(back, inv, "{yaml}");
    }
}
