//! Faults as nftables rules and link settings, each in the place that would drop the packet in a
//! real network: the router between zones, the zone's switch port, or the receiver's own input.

use std::fmt::Write as _;

use super::{LabNode, Layout, NsSetup};
use crate::inventory::Family;
use crate::lab::scenario::{
    Action, Fault, Place, PolicyDirection, PolicyDrop, PolicyPeers, Ports, Scenario,
};
use crate::model::{Direction, Protocol};

/// The nftables match for a protocol and optional port.
fn proto_match(protocol: Protocol, port: Option<&Ports>) -> String {
    match (protocol, port) {
        (Protocol::Icmp, _) => "meta l4proto icmp".into(),
        (Protocol::Ipip, _) => "ip protocol 4".into(),
        (Protocol::Tcp, Some(p)) => format!("tcp dport {}", p.nft()),
        (Protocol::Udp, Some(p)) => format!("udp dport {}", p.nft()),
        (Protocol::Tcp, None) => "meta l4proto tcp".into(),
        (Protocol::Udp, None) => "meta l4proto udp".into(),
    }
}

/// [`proto_match`] for a family: ICMP is `ICMPv6` over IPv6.
fn family_match(family: Family, protocol: Protocol, port: Option<&Ports>) -> String {
    match (family, protocol) {
        (Family::Ipv6, Protocol::Icmp) => "meta l4proto ipv6-icmp".into(),
        _ => proto_match(protocol, port),
    }
}

/// [`verdict`] for a family: an IPv6 rejection is `ICMPv6`'s administratively prohibited.
fn family_verdict(family: Family, action: Action) -> &'static str {
    match (family, action) {
        (Family::Ipv6, Action::Reject) => "reject with icmpv6 type admin-prohibited",
        _ => verdict(action),
    }
}

fn verdict(action: Action) -> &'static str {
    match action {
        Action::Drop => "drop",
        Action::Reject => "reject with icmp type admin-prohibited",
        Action::Reset => "reject with tcp reset",
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
            .chain(&l.candidate)
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

/// A node of the lab or its candidate, by name: link faults apply to either.
fn host<'a>(l: &'a Layout, name: &str) -> Option<&'a LabNode> {
    l.node(name)
        .or(l.candidate.as_ref().filter(|c| c.name == name))
}

/// Rules collected per place before they become rulesets.
#[derive(Default)]
struct FaultRules {
    router: Vec<String>,
    /// The second router's forward rules (`routers: 2`).
    router2: Vec<String>,
    /// Per switch: per ingress port, netdev rules.
    ports: Vec<Vec<(String, String)>>,
    /// Per switch: bridge forward rules.
    bridge: Vec<Vec<String>>,
    /// Per host namespace (a node's or the candidate's): input rules.
    host: std::collections::BTreeMap<String, Vec<String>>,
    /// Per pod namespace: a policy's (input, output) rules.
    pod: std::collections::BTreeMap<String, (Vec<String>, Vec<String>)>,
    mtu: Vec<(usize, String, u16)>,
    /// Per node namespace: `ip` lines that change its routes (an IPv6 path MTU).
    routes: std::collections::BTreeMap<String, Vec<String>>,
    /// Per node namespace: ICMP drops on every hook.
    icmp: std::collections::BTreeMap<String, Vec<String>>,
}

/// A smaller MTU to and from `node`: its switch port's, or (IPv6) its IPv6 routes'.
fn mtu_fault(
    s: &Scenario,
    l: &Layout,
    node: &str,
    mtu: u16,
    family: Family,
    rules: &mut FaultRules,
) {
    match family {
        Family::Ipv4 => {
            if let Some(n) = host(l, node) {
                rules.mtu.push((n.zone, n.switch_port(), mtu));
            }
        }
        Family::Ipv6 => {
            if let Some(n) = l.node(node) {
                ipv6_route_mtu(s, l, n, mtu, rules);
            }
        }
    }
}

/// The nodes' own firewalls drop `types` of ICMP (`ICMPv6` over IPv6) on every hook.
fn icmp_filter(l: &Layout, nodes: &[String], types: &[u8], family: Family, rules: &mut FaultRules) {
    let list: Vec<String> = types.iter().map(u8::to_string).collect();
    let rule = match family {
        Family::Ipv4 => format!("icmp type {{ {} }} drop", list.join(", ")),
        Family::Ipv6 => format!("icmpv6 type {{ {} }} drop", list.join(", ")),
    };
    for n in l
        .nodes
        .iter()
        .filter(|n| nodes.is_empty() || nodes.contains(&n.name))
    {
        rules
            .icmp
            .entry(n.ns.clone())
            .or_default()
            .push(rule.clone());
    }
}

/// The IPv6 path to and from `n` carries at most `mtu` bytes: each other node's route toward
/// `n`'s IPv6 pods, and `n`'s own toward theirs, get that MTU (the routes `node_setup` adds, on
/// the device that carries the pods' IPv6).
fn ipv6_route_mtu(s: &Scenario, l: &Layout, n: &LabNode, mtu: u16, rules: &mut FaultRules) {
    let device = super::overlay_device6(s);
    let mut change = |on: &LabNode, toward: &LabNode| {
        rules.routes.entry(on.ns.clone()).or_default().push(format!(
            "route change {} via {} dev {device} onlink mtu {mtu}",
            toward.pod_cidr6(),
            l.vtep6_next_hop(toward)
        ));
    };
    for other in l.nodes.iter().filter(|o| o.name != n.name) {
        change(other, n);
        change(n, other);
    }
}

/// The `ICMPv6` types of neighbour and router discovery, which IPv6 needs to reach a neighbour
/// at all (RFC 4861).
const NEIGHBOUR_DISCOVERY: &str =
    "nd-router-solicit, nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert";

pub(super) fn apply_faults(
    scenario: &Scenario,
    l: &Layout,
    out: &mut [NsSetup],
    (router, router2): (&mut NsSetup, Option<&mut NsSetup>),
) {
    let mut rules = FaultRules {
        ports: vec![Vec::new(); l.switch_ns.len()],
        bridge: vec![Vec::new(); l.switch_ns.len()],
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
                family,
            } => {
                let matcher = family_match(*family, *protocol, port.as_ref());
                let action = family_verdict(*family, *action);
                let ip = match family {
                    Family::Ipv4 => "ip",
                    Family::Ipv6 => "ip6",
                };
                for (a, b) in pairs(l, from, to, *direction) {
                    let (Some(sa), Some(da)) = (a.ip(*family), b.ip(*family)) else {
                        continue;
                    };
                    let rule = format!("{ip} saddr {sa} {ip} daddr {da} {matcher} {action}");
                    match place {
                        Place::Host => rules
                            .host
                            .entry(b.ns.clone())
                            .or_default()
                            .push(format!("{ip} saddr {sa} {matcher} {action}")),
                        Place::SecondRouter => rules.router2.push(rule),
                        // Between two zones behind the second router, it is the only one.
                        Place::Network
                            if a.zone != b.zone
                                && super::routers::behind_second(l, a.zone)
                                && super::routers::behind_second(l, b.zone) =>
                        {
                            rules.router2.push(rule);
                        }
                        Place::Network if a.zone != b.zone => rules.router.push(rule),
                        // Within one zone the switch filters frames as they enter from the sender
                        // (netdev ingress can both drop and reject).
                        Place::Network => rules.ports[a.zone].push((a.switch_port(), rule)),
                    }
                }
            }
            Fault::Mtu { node, mtu, family } => {
                mtu_fault(scenario, l, node, *mtu, *family, &mut rules);
            }
            Fault::IcmpFilter {
                nodes,
                types,
                family,
            } => icmp_filter(l, nodes, types, *family, &mut rules),
            Fault::Loss { node, percent } => {
                if let Some(n) = host(l, node) {
                    // nftables refuses `< 100` on a value that is always below 100.
                    let share = if *percent >= 100 {
                        String::new()
                    } else {
                        format!("numgen random mod 100 < {percent} ")
                    };
                    // IP alone: ARP and IPv6 neighbour discovery keep working, so loss looks
                    // like loss, not like a dead neighbour (which the kernel reports as host
                    // unreachable after 3 s).
                    let mut matches = vec!["ether type ip".to_string()];
                    if scenario.dual_stack() {
                        matches.extend([
                            "ether type ip6 meta l4proto != ipv6-icmp".to_string(),
                            format!("ether type ip6 icmpv6 type != {{ {NEIGHBOUR_DISCOVERY} }}"),
                        ]);
                    }
                    for dir in ["iifname", "oifname"] {
                        for m in &matches {
                            rules.bridge[n.zone]
                                .push(format!("{dir} \"{}\" {m} {share}drop", n.switch_port()));
                        }
                    }
                }
            }
            Fault::Policy { drop, .. } => {
                for d in drop {
                    policy_drop(l, d, &mut rules);
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
    if let Some(r) = router2.filter(|_| !rules.router2.is_empty()) {
        r.nft
            .push_str(&chain("inet", "forward", "forward", &rules.router2));
    }
    place(&rules, l, out);
}

/// Writes the collected rules into their namespaces' setups.
fn place(rules: &FaultRules, l: &Layout, out: &mut [NsSetup]) {
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
        } else if rules.host.contains_key(&st.ns)
            || rules.routes.contains_key(&st.ns)
            || rules.icmp.contains_key(&st.ns)
        {
            if let Some(host_rules) = rules.host.get(&st.ns) {
                st.nft
                    .push_str(&chain("inet", "input", "input", host_rules));
            }
            if let Some(lines) = rules.routes.get(&st.ns) {
                st.config.extend(lines.iter().cloned());
            }
            if let Some(icmp) = rules.icmp.get(&st.ns) {
                let hooks = [
                    ("input", icmp.as_slice()),
                    ("forward", icmp.as_slice()),
                    ("output", icmp.as_slice()),
                ];
                // Its own table: a host fault's input chain may be in `prober-fault`.
                st.nft.push_str(&chains("inet", "prober-icmp", &hooks));
            }
        } else if let Some((input, output)) = rules.pod.get(&st.ns) {
            st.nft.push_str(&chains(
                "inet",
                "prober-fault",
                &[("input", input.as_slice()), ("output", output.as_slice())],
            ));
        }
    }
}

/// A policy's drop at the pod agents of its nodes: stateful (new connections only, so the
/// answers of allowed ones pass), and on ingress never from the pod's own node (its `cni0`
/// address and its node address), whose traffic the policy engines always let through; never on
/// the pod's loopback either (a pod reaching its own address, as the agent's self-check does,
/// never passes the CNI's hooks).
fn policy_drop(l: &Layout, d: &PolicyDrop, rules: &mut FaultRules) {
    let matcher = d
        .protocol
        .map(|p| format!(" {}", proto_match(p, d.port.as_ref())))
        .unwrap_or_default();
    let pods: Vec<String> = l
        .nodes
        .iter()
        .flat_map(|n| n.pods.iter().map(|p| p.address.to_string()))
        .chain([l.dns_pod.address.to_string()])
        .collect();
    for n in &l.nodes {
        if !d.nodes.is_empty() && !d.nodes.contains(&n.name) {
            continue;
        }
        let Some(agent) = n.pods.first() else {
            continue;
        };
        let bridge = n.bridge();
        let (input, output) = rules.pod.entry(agent.ns.clone()).or_default();
        match d.direction {
            PolicyDirection::Ingress => {
                let peers = match d.peers {
                    PolicyPeers::All => String::new(),
                    PolicyPeers::Pods => format!(" ip saddr {{ {} }}", pods.join(", ")),
                };
                input.push(format!(
                    "ct state new iifname != \"lo\" ip saddr != {{ {bridge}, {} }}{peers}{matcher} drop",
                    n.address
                ));
            }
            PolicyDirection::Egress => {
                let peers = match d.peers {
                    PolicyPeers::All => String::new(),
                    PolicyPeers::Pods => format!(" ip daddr {{ {} }}", pods.join(", ")),
                };
                output.push(format!(
                    "ct state new oifname != \"lo\"{peers}{matcher} drop"
                ));
            }
        }
    }
}

/// One table with a filter chain per hook, each accepting by default.
fn chains(family: &str, table: &str, hooks: &[(&str, &[String])]) -> String {
    let mut out = format!("table {family} {table} {{\n");
    for (hook, rules) in hooks.iter().filter(|(_, r)| !r.is_empty()) {
        let _ = write!(
            out,
            "  chain {hook} {{\n    type filter hook {hook} priority 0; policy accept;\n    {}\n  }}\n",
            rules.join("\n    ")
        );
    }
    out.push_str("}\n");
    out
}

fn chain(family: &str, name: &str, hook: &str, rules: &[String]) -> String {
    format!(
        "table {family} prober-fault {{\n  chain {name} {{\n    type filter hook {hook} priority 0; policy accept;\n    {}\n  }}\n}}\n",
        rules.join("\n    ")
    )
}
