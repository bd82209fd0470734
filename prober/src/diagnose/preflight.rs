//! What trips a joining node that is not a path: a port it must serve once joined is already
//! taken there, as kubeadm's own preflight would say (found when the stand-ins start, not from a
//! probe); its resolv.conf naming a loopback resolver, a DNS forward loop once it is a node; and
//! kubeadm's forwarding checks (`ip_forward`, IPv6 forwarding in a cluster with IPv6,
//! `br_netfilter`).

use std::net::IpAddr;

use crate::inventory::Inventory;
use crate::model::{PathClass, Protocol, Results};

use super::finding::{
    self, Dns, DnsState, Finding, Misconfiguration, MisconfigurationState, Severity,
};

pub use crate::plan::preflight::PortConflict;

/// One error finding per taken port, naming the candidate and, when known, the process.
#[must_use]
pub fn port_conflicts(candidate: &str, conflicts: &[PortConflict]) -> Vec<Finding> {
    conflicts
        .iter()
        .map(|c| {
            let proto = c.protocol.as_str();
            let holder = c
                .process
                .as_deref()
                .map_or_else(String::new, |p| format!(" by {p}"));
            let mut f = Finding::new(
                finding::PortConflict {
                    protocol: c.protocol,
                    port: c.port,
                    from: Vec::new(),
                    to: Vec::new(),
                    nodes: vec![candidate.to_string()],
                },
                Severity::Error,
                format!(
                    "{proto}/{} is already in use on {candidate}{holder}: the node cannot serve it once joined",
                    c.port
                ),
            );
            f.fix = vec![
                format!("on {candidate}: ss -lnp{} 'sport = :{}'   # what holds it", if c.protocol == Protocol::Udp { "u" } else { "t" }, c.port),
                "stop or move that service before joining (kubeadm's preflight would refuse too)".into(),
            ];
            f
        })
        .collect()
}

/// The candidate's `resolv.conf` naming a loopback resolver (a systemd-resolved stub, 127.0.0.53):
/// once it is a node, a `CoreDNS` pod scheduled there forwards to itself when the Corefile forwards
/// to `/etc/resolv.conf` (docs/incidents.md, incident 2). Today's DNS nodes are judged by the
/// matrix's own check; this one looks ahead, at the node that is not one yet. An error when the
/// Corefile is known to forward there, a warning when the Corefile is unknown, nothing when it
/// forwards elsewhere.
#[must_use]
pub fn candidate_resolver(candidate: &str, inv: &Inventory, results: &Results) -> Option<Finding> {
    let r = results
        .iter()
        .find(|r| r.path == PathClass::NodeConfig && r.from.node == candidate)?;
    let rc = r.result.node.as_ref()?.resolv_conf.as_ref()?;
    let looping: Vec<&str> = rc
        .nameservers
        .iter()
        .filter(|n| n.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback()))
        .map(String::as_str)
        .collect();
    if looping.is_empty() {
        return None;
    }
    let corefile = inv.cluster.dns.as_ref().and_then(|d| d.corefile.as_deref());
    let forwards = corefile.map(|c| {
        c.lines().any(|l| {
            let l = l.trim();
            l.starts_with("forward") && l.contains("/etc/resolv.conf")
        })
    });
    let (severity, because) = match forwards {
        Some(false) => return None,
        Some(true) => (Severity::Error, "the Corefile forwards to /etc/resolv.conf"),
        None => (
            Severity::Warning,
            "if the Corefile forwards to /etc/resolv.conf, as kubeadm's does",
        ),
    };
    let mut f = Finding::new(
        Dns {
            state: DnsState::Loop,
            nodes: vec![candidate.to_string()],
        },
        severity,
        format!(
            "resolv.conf on {candidate} names {}: once it joins, a CoreDNS pod scheduled there forwards to itself ({because}; CoreDNS: plugin/loop: Loop detected)",
            looping.join(", ")
        ),
    );
    f.evidence = vec![r.result.id.to_string()];
    f.fix = vec![
        format!(
            "on {candidate}, before joining: give the kubelet a resolv.conf with real upstreams (KubeletConfiguration resolvConf: /run/systemd/resolve/resolv.conf)"
        ),
        "or, in the coredns ConfigMap, replace `forward . /etc/resolv.conf` with `forward . <your real upstream resolvers>`".into(),
    ];
    Some(f)
}

/// Skew past this is worth a warning: certificates and tokens start to misbehave at their edges.
const SKEW_WARN_MS: u64 = 5_000;
/// Skew past this is an error: a bootstrap token or a fresh certificate looks not yet valid or
/// expired to one side, and the join fails.
const SKEW_ERROR_MS: u64 = 60_000;

/// The candidate's clock against the API server's, from the `Date` header its TLS probes of the
/// API endpoints read: the largest skew seen, a warning past a few seconds, an error past a
/// minute.
#[must_use]
pub fn clock_skew(candidate: &str, results: &Results) -> Option<Finding> {
    let (r, skew) = results
        .iter()
        .filter(|r| r.path == PathClass::NodeToApiserver && r.from.node == candidate)
        .filter_map(|r| Some((r, r.result.tls.as_ref()?.clock_skew_ms?)))
        .max_by_key(|(_, s)| s.unsigned_abs())?;
    let off = skew.unsigned_abs();
    let severity = match off {
        o if o > SKEW_ERROR_MS => Severity::Error,
        o if o > SKEW_WARN_MS => Severity::Warning,
        _ => return None,
    };
    // The server's clock minus the candidate's: positive, the candidate is behind.
    let way = if skew > 0 { "behind" } else { "ahead of" };
    let server = r.to.address;
    let secs = (off + 500) / 1000;
    let mut f = Finding::new(
        Misconfiguration {
            state: Some(MisconfigurationState::ClockSkew),
            nodes: vec![candidate.to_string()],
        },
        severity,
        format!(
            "the clock of {candidate} is {secs} s {way} the API server's ({server}, by its Date header): {}",
            if severity == Severity::Error {
                "the join's bootstrap token and the kubelet's certificates look not yet valid or expired to one side"
            } else {
                "certificates and tokens near their validity edges will be refused"
            }
        ),
    );
    f.evidence = vec![r.result.id.to_string()];
    f.fix = vec![
        format!(
            "on {candidate}: timedatectl set-ntp true   # or chronyc makestep; then check with chronyc tracking"
        ),
        "point it at the same time source as the control plane before joining".into(),
    ];
    Some(f)
}

/// kubeadm's local forwarding checks on the candidate, from its node check's facts (read in the
/// candidate's own network namespace): `net.ipv4.ip_forward` 0 is an error (its pods' traffic
/// would never leave it); `br_netfilter` not loaded or `bridge-nf-call-iptables` 0 is a warning
/// (kube-proxy's iptables rules and bridge CNIs miss bridged traffic; eBPF dataplanes do not
/// need it, and kubeadm refuses the join either way). In a cluster with IPv6 (its nodes have
/// IPv6 addresses), `net.ipv6.conf.all.forwarding` 0 is an error too: its pods' IPv6 would
/// never leave it (kubeadm checks IPv6 forwarding for IPv6 clusters,
/// `cmd/kubeadm/app/preflight/checks.go`).
#[must_use]
pub fn forwarding(candidate: &str, inv: &Inventory, results: &Results) -> Vec<Finding> {
    let Some((r, f)) = results
        .iter()
        .filter(|r| r.path == PathClass::NodeConfig && r.from.node == candidate)
        .find_map(|r| {
            let f = r.result.node.as_ref()?.forwarding.clone()?;
            Some((r.result.id.to_string(), f))
        })
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let finding = |state, severity, summary: String, fix: Vec<String>| {
        let mut f = Finding::new(
            Misconfiguration {
                state: Some(state),
                nodes: vec![candidate.to_string()],
            },
            severity,
            summary,
        );
        f.evidence = vec![r.clone()];
        f.fix = fix;
        f
    };
    if f.ip_forward == Some(false) {
        out.push(finding(
            MisconfigurationState::IpForwardOff,
            Severity::Error,
            format!("{candidate} does not forward IPv4 (net.ipv4.ip_forward is 0): once joined, its pods' traffic never leaves it, and kubeadm's preflight refuses the join"),
            vec![
                format!("on {candidate}: sysctl -w net.ipv4.ip_forward=1"),
                format!("on {candidate}, to keep it across reboots: echo net.ipv4.ip_forward=1 > /etc/sysctl.d/99-ip-forward.conf"),
            ],
        ));
    }
    let ipv6_cluster = inv
        .nodes
        .iter()
        .any(|n| n.name != candidate && n.ip(crate::model::Family::Ipv6).is_some());
    if ipv6_cluster && f.ipv6_forward == Some(false) {
        out.push(finding(
            MisconfigurationState::Ipv6ForwardOff,
            Severity::Error,
            format!("{candidate} does not forward IPv6 (net.ipv6.conf.all.forwarding is 0) and the cluster has IPv6: once joined, its pods' IPv6 traffic never leaves it, and kubeadm's preflight refuses the join of an IPv6 node"),
            vec![
                format!("on {candidate}: sysctl -w net.ipv6.conf.all.forwarding=1"),
                format!("on {candidate}, to keep it across reboots: echo net.ipv6.conf.all.forwarding=1 > /etc/sysctl.d/99-ipv6-forward.conf"),
                "before that: a host that takes its IPv6 address or default route from router advertisements needs net.ipv6.conf.IFACE.accept_ra=2 on that interface, or forwarding drops them".into(),
            ],
        ));
    }
    if let Some((why, fix)) = bridge_nf(candidate, &f, ipv6_cluster) {
        out.push(finding(
            MisconfigurationState::BridgeNfOff,
            Severity::Warning,
            format!("on {candidate}, bridged traffic skips iptables ({why}): kube-proxy's iptables rules and a bridge CNI miss pod traffic on the node's bridge (eBPF dataplanes do not need it), and kubeadm's preflight refuses the join"),
            fix,
        ));
    }
    out
}

/// Why bridged traffic skips the candidate's iptables, and the fix: `br_netfilter` not loaded,
/// or its switch off for IPv4 or, in a cluster with IPv6, for IPv6 (`ip6tables`).
fn bridge_nf(
    candidate: &str,
    f: &probe_proto::ForwardingFacts,
    ipv6_cluster: bool,
) -> Option<(String, Vec<String>)> {
    // Each table's switch; the IPv6 one only where the cluster has IPv6.
    let tables = [
        ("iptables", f.bridge_nf_call_iptables),
        ("ip6tables", f.bridge_nf_call_ip6tables),
    ];
    let tables = &tables[..if ipv6_cluster { 2 } else { 1 }];
    let set = |t: &str| format!("on {candidate}: sysctl -w net.bridge.bridge-nf-call-{t}=1");
    if !f.br_netfilter {
        let mut fix = vec![format!(
            "on {candidate}: modprobe br_netfilter && echo br_netfilter > /etc/modules-load.d/br_netfilter.conf"
        )];
        fix.extend(tables.iter().map(|(t, _)| set(t)));
        return Some((
            "the br_netfilter module is not loaded (no /proc/sys/net/bridge)".into(),
            fix,
        ));
    }
    let off: Vec<&str> = tables
        .iter()
        .filter(|(_, on)| *on == Some(false))
        .map(|(t, _)| *t)
        .collect();
    if off.is_empty() {
        return None;
    }
    let why: Vec<String> = off
        .iter()
        .map(|t| format!("net.bridge.bridge-nf-call-{t} is 0"))
        .collect();
    Some((why.join(", "), off.iter().map(|t| set(t)).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::{Kind, State};
    use crate::model::{AgentKind, AgentRef, ResultRecord, Target};
    use probe_proto::{NodeFacts, Outcome, ProbeResult, ResolvFacts};

    fn node_check(nameservers: &[&str]) -> ResultRecord {
        let mut result = ProbeResult::new("node-config:new/host->new/host:files", Outcome::Ok, "");
        result.node = Some(Box::new(NodeFacts {
            resolv_conf: Some(ResolvFacts {
                nameservers: nameservers.iter().map(ToString::to_string).collect(),
                search: Vec::new(),
            }),
            ..NodeFacts::default()
        }));
        ResultRecord {
            path: PathClass::NodeConfig,
            from: AgentRef {
                node: "new".into(),
                agent: AgentKind::Host,
            },
            to: Target {
                node: Some("new".into()),
                agent: Some(AgentKind::Host),
                service: Some("host-root".into()),
                address: "192.168.57.249".parse().unwrap(),
                port: None,
                protocol: Protocol::Tcp,
            },
            unknown: None,
            result,
        }
    }

    fn api_check(skew_ms: Option<i64>) -> ResultRecord {
        let mut r = node_check(&[]);
        r.path = PathClass::NodeToApiserver;
        r.result = ProbeResult::new(
            "node-to-apiserver:new/host->n1/apiserver:tls/6443",
            Outcome::Ok,
            "",
        );
        r.result.tls = Some(Box::new(probe_proto::TlsInfo {
            verified: false,
            verify_error: None,
            version: None,
            clock_skew_ms: skew_ms,
        }));
        r
    }

    #[test]
    fn clock_skew_warns_past_a_few_seconds_and_is_an_error_past_a_minute() {
        assert!(clock_skew("new", &Results::of(&[api_check(Some(1_200))])).is_none());
        assert!(clock_skew("new", &Results::of(&[api_check(None)])).is_none());
        let f = clock_skew("new", &Results::of(&[api_check(Some(-8_000))])).unwrap();
        assert_eq!(
            (f.kind(), f.severity),
            (Kind::Misconfiguration, Severity::Warning)
        );
        assert!(f.summary.contains("8 s ahead of"), "{}", f.summary);
        let f = clock_skew(
            "new",
            &Results::of(&[api_check(Some(3_000)), api_check(Some(90_400))]),
        )
        .unwrap();
        assert_eq!(f.severity, Severity::Error);
        assert_eq!(f.facts().state().map(State::as_str), Some("clock-skew"));
        assert_eq!(f.facts().nodes(), ["new"]);
        assert!(f.summary.contains("90 s behind"), "{}", f.summary);
        assert!(clock_skew("other", &Results::of(&[api_check(Some(90_000))])).is_none());
    }

    #[test]
    fn a_loopback_resolver_on_the_candidate_is_a_loop_once_it_joins() {
        let mut inv = crate::testutil::inventory(2, 1, "flannel");
        if let Some(d) = inv.cluster.dns.as_mut() {
            d.corefile = Some(".:53 {\n    forward . /etc/resolv.conf\n}\n".into());
        }
        let f =
            candidate_resolver("new", &inv, &Results::of(&[node_check(&["127.0.0.53"])])).unwrap();
        assert_eq!((f.kind(), f.severity), (Kind::Dns, Severity::Error));
        assert_eq!(f.facts().nodes(), ["new"]);
        assert_eq!(f.facts().state().map(State::as_str), Some("loop"));
        assert!(f.summary.contains("127.0.0.53"), "{}", f.summary);
        assert!(
            candidate_resolver("new", &inv, &Results::of(&[node_check(&["192.168.56.1"])]))
                .is_none(),
            "a real upstream is fine"
        );
        assert!(
            candidate_resolver("other", &inv, &Results::of(&[node_check(&["127.0.0.53"])]))
                .is_none()
        );
        // A Corefile forwarding elsewhere never reads resolv.conf: no loop.
        if let Some(d) = inv.cluster.dns.as_mut() {
            d.corefile = Some(".:53 {\n    forward . 1.1.1.1\n}\n".into());
        }
        assert!(
            candidate_resolver("new", &inv, &Results::of(&[node_check(&["127.0.0.53"])])).is_none()
        );
        // Unknown: a warning.
        if let Some(d) = inv.cluster.dns.as_mut() {
            d.corefile = None;
        }
        let f =
            candidate_resolver("new", &inv, &Results::of(&[node_check(&["127.0.0.53"])])).unwrap();
        assert_eq!(f.severity, Severity::Warning);
    }

    #[test]
    fn a_taken_port_is_an_error_naming_the_node_and_the_process() {
        let f = port_conflicts(
            "new",
            &[PortConflict {
                protocol: Protocol::Tcp,
                port: 10250,
                process: Some("\"nc\",pid=42".into()),
            }],
        );
        assert_eq!(f.len(), 1);
        assert_eq!(
            (f[0].kind(), f[0].severity),
            (Kind::PortConflict, Severity::Error)
        );
        assert_eq!(f[0].facts().port(), Some(10250));
        assert_eq!(f[0].facts().nodes(), ["new"]);
        assert!(f[0].summary.contains("pid=42"), "{}", f[0].summary);
    }

    /// Preflight's plan for `new` joining `inv`, each probe's outcome decided by `fail`,
    /// diagnosed as the report does.
    fn diagnosed(
        inv: &Inventory,
        fail: &dyn Fn(&crate::plan::PlannedProbe) -> Option<Outcome>,
    ) -> Vec<Finding> {
        use crate::plan::preflight::{preflight, with_candidate};
        let c = crate::testutil::candidate();
        let results: Vec<ResultRecord> = preflight(inv, &c)
            .to_vec()
            .iter()
            .map(|p| ResultRecord {
                path: p.path,
                from: p.from.clone(),
                to: p.to.clone(),
                unknown: None,
                result: ProbeResult::new(p.id.clone(), fail(p).unwrap_or(Outcome::Ok), "x"),
            })
            .collect();
        super::super::diagnose(&with_candidate(inv, &c), &Results::of(&results), &[])
    }

    #[test]
    fn full_size_df_packets_from_the_candidate_vanishing_is_an_mtu_finding_naming_it() {
        let inv = crate::testutil::inventory(3, 1, "flannel");
        let mtu = |p: &crate::plan::PlannedProbe| {
            matches!(p.probe, probe_proto::Probe::Mtu(_)).then_some(Outcome::Timeout)
        };
        let f = diagnosed(&inv, &mtu);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!((f[0].kind(), f[0].severity), (Kind::Mtu, Severity::Error));
        assert_eq!(f[0].facts().nodes(), ["new"]);
        assert_eq!(f[0].evidence.len(), 3);
        assert!(
            f[0].summary.contains("1500-byte")
                && f[0].summary.contains("1450 for pods + 50 for vxlan"),
            "{}",
            f[0].summary
        );
        // One node's path only: the pair is named, both ends.
        let one = |p: &crate::plan::PlannedProbe| {
            (matches!(p.probe, probe_proto::Probe::Mtu(_)) && p.to.node.as_deref() == Some("n2"))
                .then_some(Outcome::Timeout)
        };
        let f = diagnosed(&inv, &one);
        assert_eq!((f.len(), f[0].kind()), (1, Kind::Mtu), "{f:#?}");
        assert_eq!(f[0].facts().nodes(), ["n2", "new"]);
        // Nothing from the candidate to a node gets through: not an MTU problem.
        let cut = |p: &crate::plan::PlannedProbe| {
            (p.from.node == "new" && p.to.node.as_deref() == Some("n2")).then_some(Outcome::Timeout)
        };
        assert!(
            diagnosed(&inv, &cut).iter().all(|f| f.kind() != Kind::Mtu),
            "{:#?}",
            diagnosed(&inv, &cut)
        );
    }

    #[test]
    fn forwarding_off_on_the_candidate_is_a_misconfiguration() {
        let v4 = crate::testutil::inventory(2, 1, "flannel");
        let with = |ip_forward, bridge, loaded| {
            let mut r = node_check(&["192.168.56.1"]);
            if let Some(n) = r.result.node.as_mut() {
                n.forwarding = Some(probe_proto::ForwardingFacts {
                    ip_forward,
                    ipv6_forward: Some(false),
                    bridge_nf_call_iptables: bridge,
                    // An IPv4 cluster: its IPv6 twin is nothing to it.
                    bridge_nf_call_ip6tables: Some(false),
                    br_netfilter: loaded,
                });
            }
            // An IPv4 cluster: IPv6 forwarding off on the candidate is nothing to it.
            forwarding(
                "new",
                &crate::testutil::inventory(2, 1, "flannel"),
                &Results::of(&[r]),
            )
        };
        assert!(with(Some(true), Some(true), true).is_empty());
        // An agent that does not read them says nothing, and neither does an unreadable file.
        assert!(forwarding("new", &v4, &Results::of(&[node_check(&[])])).is_empty());
        assert!(with(None, Some(true), true).is_empty());
        let f = with(Some(false), Some(true), true);
        assert_eq!(f.len(), 1);
        assert_eq!(
            (f[0].kind(), f[0].severity),
            (Kind::Misconfiguration, Severity::Error)
        );
        assert_eq!(
            f[0].facts().state().map(State::as_str),
            Some("ip-forward-off")
        );
        assert_eq!(f[0].facts().nodes(), ["new"]);
        assert_eq!(f[0].fix[0], "on new: sysctl -w net.ipv4.ip_forward=1");
        assert_eq!(f[0].evidence, ["node-config:new/host->new/host:files"]);
        let f = with(Some(true), None, false);
        assert_eq!(f.len(), 1);
        assert_eq!(
            f[0].facts().state().map(State::as_str),
            Some("bridge-nf-off")
        );
        assert_eq!(f[0].severity, Severity::Warning);
        assert!(
            f[0].summary.contains("br_netfilter module is not loaded"),
            "{}",
            f[0].summary
        );
        assert!(
            f[0].fix[0].contains("modprobe br_netfilter"),
            "{:?}",
            f[0].fix
        );
        let f = with(Some(true), Some(false), true);
        assert!(
            f[0].summary.contains("bridge-nf-call-iptables is 0"),
            "{}",
            f[0].summary
        );
        assert_eq!(
            f[0].fix,
            ["on new: sysctl -w net.bridge.bridge-nf-call-iptables=1"]
        );
        assert!(forwarding("other", &v4, &Results::of(&[node_check(&[])])).is_empty());
    }

    #[test]
    fn ipv6_forwarding_off_on_the_candidate_of_a_cluster_with_ipv6_is_a_misconfiguration() {
        let facts = |ipv6_forward| {
            let mut r = node_check(&["192.168.56.1"]);
            if let Some(n) = r.result.node.as_mut() {
                n.forwarding = Some(probe_proto::ForwardingFacts {
                    ip_forward: Some(true),
                    ipv6_forward,
                    bridge_nf_call_iptables: Some(true),
                    bridge_nf_call_ip6tables: Some(true),
                    br_netfilter: true,
                });
            }
            r
        };
        let dual = crate::testutil::dual_stack(2, 1, "flannel");
        let f = forwarding("new", &dual, &Results::of(&[facts(Some(false))]));
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(
            (f[0].severity, f[0].facts().state().map(State::as_str)),
            (Severity::Error, Some("ipv6-forward-off"))
        );
        assert_eq!(f[0].facts().nodes(), ["new"]);
        assert!(
            f[0].summary.contains("net.ipv6.conf.all.forwarding is 0"),
            "{}",
            f[0].summary
        );
        assert_eq!(
            f[0].fix[0],
            "on new: sysctl -w net.ipv6.conf.all.forwarding=1"
        );
        // Forwarding on, or a kernel whose IPv6 could not be read: nothing.
        for ok in [Some(true), None] {
            assert!(forwarding("new", &dual, &Results::of(&[facts(ok)])).is_empty());
        }
        // The candidate's own IPv6 address does not make the cluster one with IPv6.
        let mut v4 = crate::testutil::inventory(2, 1, "flannel");
        let mut new = v4.nodes[0].clone();
        new.name = "new".into();
        new.address6 = Some("fd00::99".parse().unwrap());
        v4.nodes.push(new);
        assert!(forwarding("new", &v4, &Results::of(&[facts(Some(false))])).is_empty());
    }

    #[test]
    fn bridged_ipv6_skipping_ip6tables_in_a_cluster_with_ipv6_is_a_warning() {
        let mut r = node_check(&["192.168.56.1"]);
        if let Some(n) = r.result.node.as_mut() {
            n.forwarding = Some(probe_proto::ForwardingFacts {
                ip_forward: Some(true),
                ipv6_forward: Some(true),
                bridge_nf_call_iptables: Some(true),
                bridge_nf_call_ip6tables: Some(false),
                br_netfilter: true,
            });
        }
        let results = [r];
        let dual = crate::testutil::dual_stack(2, 1, "flannel");
        let f = forwarding("new", &dual, &Results::of(&results));
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(
            (f[0].severity, f[0].facts().state().map(State::as_str)),
            (Severity::Warning, Some("bridge-nf-off"))
        );
        assert!(
            f[0].summary
                .contains("net.bridge.bridge-nf-call-ip6tables is 0"),
            "{}",
            f[0].summary
        );
        assert_eq!(
            f[0].fix,
            ["on new: sysctl -w net.bridge.bridge-nf-call-ip6tables=1"]
        );
        // Without br_netfilter, both switches are to be set once it loads.
        let mut results = results;
        if let Some(fw) = results[0]
            .result
            .node
            .as_mut()
            .and_then(|n| n.forwarding.as_mut())
        {
            fw.br_netfilter = false;
        }
        let f = forwarding("new", &dual, &Results::of(&results));
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(
            f[0].fix
                .iter()
                .any(|l| l.ends_with("bridge-nf-call-ip6tables=1"))
        );
        assert!(
            f[0].fix
                .iter()
                .any(|l| l.ends_with("bridge-nf-call-iptables=1"))
        );
    }
}
