//! The incidents as synthetic result sets: the planner's real matrix, with outcomes decided by a
//! fault model per scenario, diagnosed without any network.

use std::collections::{HashMap, HashSet};

use probe_proto::{IcmpInfo, Outcome, ProbeResult};
use serde_json::json;

use super::*;
use crate::inventory::Inventory;
use crate::model::{AgentKind, PathClass, Protocol, ResultRecord, Results};
use crate::plan::{Filter, PlannedProbe, plan};
use crate::testutil::inventory;

fn components(inv: &mut Inventory, yaml: &str) {
    inv.components = serde_saphyr::from_str(yaml).unwrap();
}

const CALICO_AND_COREDNS: &str = "
- {name: calico-node, namespace: kube-system, kind: DaemonSet, role: cni, hostNetwork: true, apiAccess: service, containers: [install-cni, calico-node]}
- {name: coredns, namespace: kube-system, kind: Deployment, role: dns, apiAccess: service, containers: [coredns], nodes: [n1]}
";

/// What the network does to one probe: `None` is `ok`.
type Model = dyn Fn(&PlannedProbe) -> Option<(Outcome, String)>;

fn run(inv: &Inventory, model: &Model) -> (Vec<ResultRecord>, Vec<Finding>) {
    run_with_agents(inv, model, &[])
}

fn run_with_agents(
    inv: &Inventory,
    model: &Model,
    agents: &[AgentStatus],
) -> (Vec<ResultRecord>, Vec<Finding>) {
    let results: Vec<ResultRecord> = plan(inv, &Filter::default())
        .to_vec()
        .iter()
        .map(|p| {
            let (outcome, detail) = model(p).unwrap_or((Outcome::Ok, "ok".into()));
            let mut result = ProbeResult::new(p.id.clone(), outcome, detail);
            if outcome.is_ok() {
                result.rtt_micros = Some(500);
            }
            // The model's shorthand for what the receiver's sniffer said, as the run records it.
            if result.detail.starts_with("never reached") {
                result.receipt = Some(probe_proto::Receipt::NotArrived);
            } else if result.detail.contains(" itself") {
                result.receipt = Some(probe_proto::Receipt::HostDropped);
            }
            // A model answer of "unknown: ..." stands for a probe that never ran.
            let unknown = result
                .detail
                .starts_with("unknown:")
                .then_some(crate::model::Unknown::AgentFailed);
            ResultRecord {
                unknown,
                path: p.path,
                from: p.from.clone(),
                to: p.to.clone(),
                result,
            }
        })
        .collect();
    let findings = diagnose(inv, &Results::of(&results), agents);
    assert_every_failure_explained(&results, &findings);
    (results, findings)
}

fn assert_every_failure_explained(results: &[ResultRecord], findings: &[Finding]) {
    let cited: HashSet<&str> = findings
        .iter()
        .flat_map(|f| f.evidence.iter().chain(&f.consequences))
        .map(String::as_str)
        .collect();
    for r in results.iter().filter(|r| !r.result.outcome.is_ok()) {
        assert!(
            cited.contains(r.result.id.as_str()),
            "failed result {} is in no finding:\n{findings:#?}",
            r.result.id
        );
    }
}

fn kinds(findings: &[Finding]) -> Vec<Kind> {
    findings.iter().map(Finding::kind).collect()
}

/// The expectation `want` names, typed as a scenario's `findings` entry is: a misspelled key or an
/// unknown state fails the test instead of matching nothing.
fn like(want: serde_json::Value) -> FindingPattern {
    let text = want.to_string();
    serde_json::from_value(want).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn node_of(p: &PlannedProbe) -> (&str, &str) {
    (p.from.node.as_str(), p.to.node.as_deref().unwrap_or(""))
}

/// True when the probe's traffic rides the overlay between `a` and another node.
fn crosses_overlay(p: &PlannedProbe, a: &str) -> bool {
    let (from, to) = node_of(p);
    let dns_pod_node = "n1";
    let to = if p.path == PathClass::Dns {
        dns_pod_node
    } else {
        to
    };
    let overlay = matches!(
        p.path,
        PathClass::PodToPod | PathClass::NodeToPod | PathClass::Overlay | PathClass::Dns
    );
    overlay && !to.is_empty() && (from == a) != (to == a)
}

#[allow(clippy::unnecessary_wraps)] // reads as the model's answer: `if x { timeout() } else { None }`
fn timeout() -> Option<(Outcome, String)> {
    Some((Outcome::Timeout, "no answer within 2000 ms".into()))
}

#[test]
fn healthy_cluster_has_no_findings() {
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run(&inv, &|_| None);
    assert!(f.is_empty(), "{f:#?}");
}

#[test]
fn healthy_cluster_on_the_service_path_has_only_a_latent_cycle() {
    let mut inv = inventory(3, 1, "calico");
    components(&mut inv, CALICO_AND_COREDNS);
    let (_, f) = run(&inv, &|_| None);
    assert_eq!(kinds(&f), [Kind::BootstrapCycle], "{f:#?}");
    assert_eq!(f[0].severity, Severity::Warning);
    assert!(like(json!({"kind": "bootstrap-cycle", "state": "latent", "components": ["calico-node", "coredns"]})).matches(&f[0]), "{:#?}", f[0]);
    assert_eq!(
        f[0].facts().cycle().first(),
        Some(&"calico-node".to_string())
    );
    assert!(
        f[0].fix
            .iter()
            .any(|l| l.contains("KUBERNETES_SERVICE_HOST=192.168.56.10")
                && l.contains("-c install-cni")),
        "{:#?}",
        f[0].fix
    );
    assert!(f[0].consequences.is_empty());
}

#[test]
fn incident_1_flannel_port_blocked_to_the_new_worker() {
    let inv = inventory(3, 1, "flannel");
    let (results, f) = run(&inv, &|p| {
        if !crosses_overlay(p, "n3") {
            return None;
        }
        if p.path == PathClass::Overlay && p.to.protocol == Protocol::Udp {
            let to = p.to.node.clone().unwrap_or_default();
            return Some((
                Outcome::Timeout,
                format!(
                    "never reached {to}: dropped on the way (the network, or the sender's own firewall)"
                ),
            ));
        }
        timeout()
    });
    assert_eq!(kinds(&f), [Kind::FirewallGap], "{f:#?}");
    let gap = &f[0];
    assert!(
        like(json!({"kind": "firewall-gap", "protocol": "udp", "port": 8472, "from": ["n3"], "to": ["n1", "n2"], "direction": "both", "where": "network"})).matches(gap),
        "{gap:#?}"
    );
    assert_eq!(gap.evidence.len(), 4, "the four VXLAN receipts");
    let failed = results.iter().filter(|r| !r.result.outcome.is_ok()).count();
    assert_eq!(
        gap.evidence.len() + gap.consequences.len(),
        failed,
        "every pod and DNS failure is its consequence"
    );
    assert!(
        gap.consequences
            .iter()
            .any(|c| c.starts_with("pod-to-pod:n1/pod->n3/pod"))
    );
    // The packets died on the network: the fix is the network's, not nine host rules.
    assert_eq!(gap.facts().places(), [crate::diagnose::Where::Network]);
    assert!(
        gap.fix[0].starts_with("on the firewall, router or security group")
            && gap.fix[0].contains("udp/8472 from 192.168.56.12 to 192.168.56.10/31 and back"),
        "{:#?}",
        gap.fix
    );
    assert!(
        !gap.fix
            .iter()
            .any(|l| l.contains("nft ") || l.contains("iptables ")),
        "{:#?}",
        gap.fix
    );
}

#[test]
fn incident_2_clusterip_broken_is_an_active_cycle_not_a_gap() {
    let mut inv = inventory(2, 1, "calico");
    components(&mut inv, CALICO_AND_COREDNS);
    let (_, f) = run(&inv, &|p| {
        let service = matches!(p.path, PathClass::PodToService | PathClass::NodeToService)
            || (p.path == PathClass::Dns && p.to.service.as_deref() == Some("kube-dns"));
        if service { timeout() } else { None }
    });
    assert_eq!(kinds(&f), [Kind::BootstrapCycle], "{f:#?}");
    let c = &f[0];
    assert!(like(json!({"kind": "bootstrap-cycle", "state": "active", "components": ["calico-node", "coredns"], "nodes": ["n1", "n2"]})).matches(c), "{c:#?}");
    assert_eq!(c.severity, Severity::Error);
    assert_eq!(c.facts().components()[0], "calico-node", "the CNI first");
    // Broken on every node: the service proxy is named, and its fix comes before the env fix.
    assert!(
        c.summary.contains("kube-proxy") && !c.summary.contains("(es)"),
        "{}",
        c.summary
    );
    assert!(c.fix[0].contains("kube-proxy"), "{:#?}", c.fix);
    for ct in ["install-cni", "calico-node"] {
        assert!(
            c.fix
                .iter()
                .any(|l| l.contains(&format!("set env ds/calico-node -c {ct} "))),
            "{:#?}",
            c.fix
        );
    }
    assert!(
        c.consequences.iter().any(|id| id.starts_with("dns:")),
        "DNS through its Service is a consequence: {c:#?}"
    );
}

#[test]
fn api_port_blocked_is_a_gap_whose_clusterip_failure_is_a_consequence() {
    let mut inv = inventory(3, 1, "calico");
    components(&mut inv, CALICO_AND_COREDNS);
    let (_, f) = run(&inv, &|p| {
        let from_n3 = p.from.node == "n3";
        let to_api = p.to.port == Some(6443)
            || matches!(p.path, PathClass::PodToService | PathClass::NodeToService);
        if from_n3 && to_api { timeout() } else { None }
    });
    assert_eq!(
        kinds(&f),
        [Kind::FirewallGap, Kind::BootstrapCycle],
        "{f:#?}"
    );
    assert!(like(json!({"kind": "firewall-gap", "protocol": "tcp", "port": 6443, "from": ["n3"], "to": ["n1"], "direction": "one"})).matches(&f[0]), "{:#?}", f[0]);
    assert!(
        f[0].consequences
            .iter()
            .any(|c| c.starts_with("node-to-service:n3/host")),
        "{:#?}",
        f[0]
    );
    assert!(
        f[0].consequences
            .iter()
            .any(|c| c.starts_with("pod-to-service:n3/pod")),
        "{:#?}",
        f[0]
    );
    assert_eq!(
        f[1].facts().state().map(State::as_str),
        Some("latent"),
        "not an active cycle: {:#?}",
        f[1]
    );
}

#[test]
fn asymmetric_gap_says_the_reverse_works() {
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run(&inv, &|p| {
        let (from, to) = node_of(p);
        if p.path == PathClass::NodeToNode && from == "n2" && to == "n3" && p.to.port == Some(10250)
        {
            Some((
                Outcome::Rejected,
                "ICMP communication administratively prohibited".into(),
            ))
        } else {
            None
        }
    });
    assert_eq!(kinds(&f), [Kind::FirewallGap]);
    assert!(
        like(json!({"port": 10250, "from": ["n2"], "to": ["n3"], "direction": "one"}))
            .matches(&f[0]),
        "{:#?}",
        f[0]
    );
    assert!(
        f[0].summary.contains("the reverse direction works"),
        "{}",
        f[0].summary
    );
}

#[test]
fn rejected_by_the_host_itself_says_where() {
    let inv = inventory(2, 1, "flannel");
    let (results, f) = {
        let plan_results = plan(&inv, &Filter::default()).to_vec();
        let results: Vec<ResultRecord> = plan_results
            .iter()
            .map(|p| {
                let mut r = ProbeResult::new(p.id.clone(), Outcome::Ok, "ok");
                if p.path == PathClass::NodeToNode
                    && p.from.node == "n2"
                    && p.to.port == Some(10250)
                {
                    r = ProbeResult::new(p.id.clone(), Outcome::Rejected, "ICMP admin prohibited");
                    r.icmp = Some(IcmpInfo {
                        icmp_type: 3,
                        code: 13,
                        from: Some(p.to.address),
                    });
                }
                ResultRecord {
                    unknown: None,
                    path: p.path,
                    from: p.from.clone(),
                    to: p.to.clone(),
                    result: r,
                }
            })
            .collect();
        let f = diagnose(&inv, &Results::of(&results), &[]);
        (results, f)
    };
    assert_every_failure_explained(&results, &f);
    assert_eq!(
        f[0].facts().places(),
        [Where::Host("n1".into())],
        "{:#?}",
        f[0]
    );
}

#[test]
fn a_tcp_port_dropped_by_the_receivers_own_firewall_says_host() {
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run(&inv, &|p| {
        let (_, to) = node_of(p);
        (p.to.protocol == Protocol::Tcp && p.to.port == Some(10250) && to == "n2").then(|| {
            (
                Outcome::Timeout,
                "reached n2's eth0 but n2 never answered: dropped by n2 itself".into(),
            )
        })
    });
    assert_eq!(kinds(&f), [Kind::FirewallGap], "{f:#?}");
    assert!(
        like(json!({"protocol": "tcp", "port": 10250, "to": ["n2"], "where": "host:n2"}))
            .matches(&f[0]),
        "{:#?}",
        f[0]
    );
    assert!(
        f[0].fix.iter().all(|l| l.starts_with("on n2 ")),
        "{:#?}",
        f[0].fix
    );
    // The same port dropped on the way: the network.
    let (_, f) = run(&inv, &|p| {
        let (_, to) = node_of(p);
        (p.to.protocol == Protocol::Tcp && p.to.port == Some(10250) && to == "n2").then(|| {
            (
                Outcome::Timeout,
                "never reached n2: dropped on the way".into(),
            )
        })
    });
    assert!(
        like(json!({"protocol": "tcp", "port": 10250, "where": "network"})).matches(&f[0]),
        "{:#?}",
        f[0]
    );
}

#[test]
fn host_firewall_drop_of_vxlan_says_host() {
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run(&inv, &|p| {
        if !crosses_overlay(p, "n2") {
            return None;
        }
        let (_, to) = node_of(p);
        if p.path == PathClass::Overlay && p.to.protocol == Protocol::Udp {
            return Some(if to == "n2" {
                (
                    Outcome::Timeout,
                    "reached n2's eth0 but never its VXLAN device: dropped by n2 itself".into(),
                )
            } else {
                // n2's own outbound VXLAN works; the receivers decapsulate it.
                (Outcome::Ok, "decapsulated".into())
            });
        }
        timeout()
    });
    assert_eq!(kinds(&f), [Kind::FirewallGap], "{f:#?}");
    assert!(like(json!({"protocol": "udp", "port": 8472, "from": ["n1", "n3"], "to": ["n2"], "direction": "one", "where": "host:n2"})).matches(&f[0]), "{:#?}", f[0]);
}

#[test]
fn kube_proxy_missing_without_components_is_service_proxy() {
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run(&inv, &|p| {
        let service = matches!(p.path, PathClass::PodToService | PathClass::NodeToService)
            || (p.path == PathClass::Dns && p.to.service.as_deref() == Some("kube-dns"));
        if service && p.from.node == "n2" {
            timeout()
        } else {
            None
        }
    });
    assert_eq!(kinds(&f), [Kind::ServiceProxy], "{f:#?}");
    assert_eq!(f[0].facts().nodes(), ["n2"]);
    assert!(
        f[0].consequences
            .iter()
            .any(|c| c.starts_with("dns:n2/pod->svc/kube-dns")),
        "{:#?}",
        f[0]
    );
}

#[test]
fn mtu_black_hole() {
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run(&inv, &|p| {
        let is_mtu = p.path == PathClass::Overlay && p.to.agent == Some(AgentKind::Pod);
        if is_mtu && (p.from.node == "n3") != (p.to.node.as_deref() == Some("n3")) {
            timeout()
        } else {
            None
        }
    });
    assert_eq!(kinds(&f), [Kind::Mtu], "{f:#?}");
    assert_eq!(f[0].facts().nodes(), ["n3"], "{:#?}", f[0]);
    assert_eq!(f[0].evidence.len(), 4);
    // Issue 25, item 8: the ping to paste names an address (a node's name needs a resolver
    // that knows it), and how to read its answer is a note, not part of the command.
    let ping = f[0]
        .fix
        .iter()
        .find(|l| l.contains("ping -M do"))
        .unwrap_or_else(|| panic!("no ping: {:#?}", f[0].fix));
    let target = ping.rsplit(' ').next().unwrap_or_default();
    assert!(
        target.parse::<std::net::Ipv4Addr>().is_ok() && ping.starts_with("on n"),
        "{ping}"
    );
    assert!(!ping.contains('#') && !ping.contains('<'), "{ping}");
    assert!(
        f[0].notes.iter().any(|n| n.contains("plus 28")),
        "{:#?}",
        f[0]
    );
}

#[test]
fn overlay_broken_while_vxlan_port_is_open() {
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run(&inv, &|p| {
        let vxlan = p.path == PathClass::Overlay && p.to.protocol == Protocol::Udp;
        let pair = [p.from.node.as_str(), p.to.node.as_deref().unwrap_or("")];
        let n1_n2 = pair.contains(&"n1") && pair.contains(&"n2");
        let rides = matches!(
            p.path,
            PathClass::PodToPod | PathClass::NodeToPod | PathClass::Overlay
        );
        if n1_n2 && rides && !vxlan {
            timeout()
        } else {
            None
        }
    });
    assert_eq!(kinds(&f), [Kind::Overlay], "{f:#?}");
    assert_eq!(f[0].facts().nodes(), ["n1", "n2"]);
}

#[test]
fn missing_agent_is_unknown_not_failed() {
    let inv = inventory(3, 1, "flannel");
    let agents = [AgentStatus {
        node: "n3".into(),
        agent: AgentKind::Pod,
        ran: false,
        detail: "exec failed".into(),
    }];
    let (_, f) = run_with_agents(
        &inv,
        &|p| {
            if p.from.node == "n3" && p.from.agent == AgentKind::Pod {
                Some((
                    Outcome::Error,
                    "unknown: agent n3/pod could not run: exec failed".into(),
                ))
            } else {
                None
            }
        },
        &agents,
    );
    assert_eq!(kinds(&f), [Kind::AgentMissing], "{f:#?}");
    assert_eq!(f[0].severity, Severity::Warning);
    assert!(!f[0].consequences.is_empty());
}

#[test]
fn anything_else_is_named_unexplained() {
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run(&inv, &|p| {
        let (from, to) = node_of(p);
        if p.path == PathClass::NodeToNode && to == "n2" && from == "n1" && p.to.port == Some(10250)
        {
            Some((Outcome::HttpError, "HTTP 500".into()))
        } else {
            None
        }
    });
    assert_eq!(kinds(&f), [Kind::Unexplained], "{f:#?}");
    assert!(
        f[0].summary.contains("http-error") || f[0].summary.contains("HTTP"),
        "{}",
        f[0].summary
    );
}

#[test]
fn refused_on_an_open_path_is_not_listening_never_a_gap() {
    // Table: who refuses (every other node: a port refused to some only is a firewall, see
    // tests/selective_refusal.rs), and the one finding it must give.
    let cases: [(&[&str], &str, u16); 2] =
        [(&["n1", "n3"], "n2", 10250), (&["n2", "n3"], "n1", 10250)];
    for (senders, receiver, port) in cases {
        let inv = inventory(3, 1, "flannel");
        let (_, f) = run(&inv, &move |p| {
            let (from, to) = node_of(p);
            (matches!(p.path, PathClass::NodeToNode | PathClass::PodToNode)
                && senders.contains(&from)
                && to == receiver
                && p.to.port == Some(port))
            .then(|| (Outcome::Refused, "connection refused".into()))
        });
        assert_eq!(kinds(&f), [Kind::NotListening], "{senders:?}: {f:#?}");
        assert_eq!(f[0].facts().nodes(), [receiver]);
        assert_eq!(f[0].facts().port(), Some(port));
        assert!(f[0].summary.contains("(the kubelet)"), "{}", f[0].summary);
    }
}

/// The healthy matrix's results, with `tweak` applied to each.
fn tweaked(inv: &Inventory, tweak: &dyn Fn(usize, &mut ResultRecord)) -> Vec<ResultRecord> {
    let (mut results, _) = run(inv, &|_| None);
    for (i, r) in results.iter_mut().enumerate() {
        tweak(i, r);
    }
    results
}

fn intermittent(r: &mut ResultRecord, attempts: u32, ok: u32) {
    r.result.attempts = Some(attempts);
    r.result.ok_attempts = Some(ok);
    if ok == 0 {
        r.result.outcome = Outcome::Timeout;
        r.result.detail = format!("no answer within 2000 ms (failed all {attempts} attempts)");
    }
}

#[test]
fn loss_is_a_warning_never_a_gap() {
    // (every how many results is lossy, a node with extra loss, the nodes the finding must name)
    let cases: [(usize, Option<&str>, &[&str]); 3] = [
        (1, None, &["n1", "n2", "n3"]),
        (1000, Some("n3"), &["n3"]),
        (20, Some("n2"), &["n2"]),
    ];
    for (every, hot, named) in cases {
        let inv = inventory(3, 1, "flannel");
        let results = tweaked(&inv, &move |i, r| {
            let on_hot = hot.is_some_and(|h| r.from.node == h || r.to.node.as_deref() == Some(h))
                && r.to.node.as_deref() != Some(r.from.node.as_str());
            if i % every == 0 || (on_hot && i % 2 == 0) {
                intermittent(r, 2, 1);
            }
        });
        assert!(results.iter().any(|r| r.result.is_intermittent()));
        let f = diagnose(&inv, &Results::of(&results), &[]);
        assert_eq!(kinds(&f), [Kind::Loss], "{every}/{hot:?}: {f:#?}");
        assert_eq!(f[0].severity, Severity::Warning);
        assert_eq!(f[0].facts().nodes(), named, "{}", f[0].summary);
        assert!(f[0].summary.contains(" %"), "{}", f[0].summary);
        let lossy = results
            .iter()
            .filter(|r| r.result.is_intermittent())
            .count();
        assert_eq!(f[0].evidence.len(), lossy);
    }
}

#[test]
fn loss_next_to_a_real_block_gets_the_gap_and_only_it() {
    let inv = inventory(3, 1, "flannel");
    let results = tweaked(&inv, &|i, r| {
        let blocked = r.path == PathClass::NodeToNode
            && r.from.node == "n1"
            && r.to.node.as_deref() == Some("n2")
            && r.to.port == Some(10250);
        if blocked {
            intermittent(r, 3, 0);
        } else if i % 5 == 0 {
            intermittent(r, 3, 2);
        }
    });
    let f = diagnose(&inv, &Results::of(&results), &[]);
    assert_every_failure_explained(&results, &f);
    assert_eq!(kinds(&f), [Kind::FirewallGap, Kind::Loss], "{f:#?}");
    assert!(
        like(json!({"port": 10250, "from": ["n1"], "to": ["n2"]})).matches(&f[0]),
        "{:#?}",
        f[0]
    );
}

#[test]
fn an_unanswered_query_where_the_same_server_answers_is_loss_not_dns() {
    // A lossy run: one of n3's pod's cluster-DNS queries failed all three attempts while its
    // other queries to the same server were answered. The loss's, not a DNS fault.
    let mut inv = inventory(3, 1, "flannel");
    // Two names, so each sender asks the same server twice over the same transport.
    let dns = inv
        .cluster
        .dns
        .as_mut()
        .expect("the test inventory has cluster DNS");
    dns.names.push("example.com".into());
    let first_dns = std::cell::Cell::new(true);
    let results = tweaked(&inv, &|i, r| {
        let mine = r.path == PathClass::Dns
            && r.from.node == "n3"
            && r.from.agent == AgentKind::Pod
            && r.to.node.is_none();
        if mine && first_dns.replace(false) {
            intermittent(r, 3, 0);
        } else if i % 7 == 0 {
            intermittent(r, 3, 2);
        }
    });
    assert!(
        !first_dns.get(),
        "the plan has a DNS query from n3's pod to a Service"
    );
    let f = diagnose(&inv, &Results::of(&results), &[]);
    assert_every_failure_explained(&results, &f);
    assert_eq!(kinds(&f), [Kind::Loss], "{f:#?}");
}

#[test]
fn a_node_failing_one_kind_of_probe_only_is_not_cut_off() {
    // Only the DNS paths were probed (`--paths dns`) and n3's all fail: a DNS finding, not a
    // partition, since nothing else of n3 was probed.
    let inv = inventory(3, 1, "flannel");
    let (results, _) = run(&inv, &|_| None);
    let results: Vec<ResultRecord> = results
        .into_iter()
        .filter(|r| r.path == PathClass::Dns)
        .map(|mut r| {
            if r.from.node == "n3" {
                r.result.outcome = Outcome::Timeout;
            }
            r
        })
        .collect();
    let f = diagnose(&inv, &Results::of(&results), &[]);
    assert_every_failure_explained(&results, &f);
    assert!(!kinds(&f).contains(&Kind::Partition), "{f:#?}");
}

#[test]
fn dns_rcode_is_a_dns_finding() {
    let inv = inventory(3, 1, "flannel");
    let (results, _) = run(&inv, &|_| None);
    let mut results = results;
    for r in results
        .iter_mut()
        .filter(|r| r.path == PathClass::Dns && r.from.node == "n2")
    {
        r.result.outcome = Outcome::DnsError;
        r.result.dns = Some(Box::new(probe_proto::DnsInfo {
            server: "10.96.0.10:53".parse().unwrap(),
            name: "kubernetes.default.svc.cluster.local".into(),
            rcode: Some("SERVFAIL".into()),
            answers: Vec::new(),
        }));
    }
    let f = diagnose(&inv, &Results::of(&results), &[]);
    assert_every_failure_explained(&results, &f);
    assert_eq!(kinds(&f), [Kind::Dns]);
    assert_eq!(f[0].facts().state().map(State::as_str), Some("servfail"));
}

#[test]
fn a_node_cut_off_is_one_finding_not_a_gap_per_port() {
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run(&inv, &|p| {
        let (from, to) = node_of(p);
        let to = if p.path == PathClass::Dns
            || matches!(p.path, PathClass::PodToService | PathClass::NodeToService)
        {
            "elsewhere"
        } else {
            to
        };
        let cross = !to.is_empty() && from != to;
        if cross && (from == "n3" || to == "n3") {
            timeout()
        } else {
            None
        }
    });
    assert_eq!(kinds(&f), [Kind::Partition], "{f:#?}");
    assert!(
        like(json!({"state": "unreachable", "nodes": ["n3"]})).matches(&f[0]),
        "{:#?}",
        f[0]
    );
    assert!(f[0].summary.contains("n3 is cut off"));
}

#[test]
fn the_agents_port_blocked_is_the_probers_problem_not_a_gap() {
    // Only tcp/9917 (the agents' own port) from n3 to n1 is rejected on the network: the cluster
    // does not need that port, so this is "the prober cannot use its port", never a firewall gap.
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run(&inv, &|p| {
        let (from, to) = node_of(p);
        if p.path == PathClass::PodToNode && from == "n3" && to == "n1" {
            Some((
                Outcome::Rejected,
                "ICMP communication administratively prohibited".into(),
            ))
        } else {
            None
        }
    });
    assert_eq!(kinds(&f), [Kind::ProberPort], "{f:#?}");
    assert_eq!(f[0].severity, Severity::Warning);
    assert!(
        like(json!({"protocol": "tcp", "port": 9917, "to": ["n1"]})).matches(&f[0]),
        "{:#?}",
        f[0]
    );
    assert_eq!(f[0].evidence.len(), 1, "{:#?}", f[0]);
}

mod node_checks {
    use super::*;

    mod credential_owner;
    mod cycle_endpoint;
    use probe_proto::{CheckFacts, KubeconfigFacts, NodeFacts, ResolvFacts, TokenFacts};
    use std::path::PathBuf;

    const NOW: u64 = 1_800_000_000;

    fn token(iat: u64, exp: Option<u64>, bound: bool) -> TokenFacts {
        TokenFacts {
            format: "jwt".into(),
            subject: Some("system:serviceaccount:kube-system:calico-cni-plugin".into()),
            issued_at: Some(iat),
            expires_at: exp,
            bound,
            service_account: Some("calico-cni-plugin".into()),
            namespace: Some("kube-system".into()),
            checked_at: NOW,
            ..TokenFacts::default()
        }
    }

    fn kubeconfig(path: &str, t: Option<TokenFacts>, api: Option<Outcome>) -> KubeconfigFacts {
        KubeconfigFacts {
            path: path.into(),
            server: Some("https://10.96.0.1:443".into()),
            auth: if t.is_some() {
                "token".into()
            } else {
                "client-certificate".into()
            },
            token: t,
            check: api.map(|o| CheckFacts {
                outcome: o,
                http_status: None,
                detail: String::new(),
            }),
            ..KubeconfigFacts::default()
        }
    }

    /// A run where every probe works and each node's host agent read `facts(node)`.
    fn with_facts(inv: &mut Inventory, facts: &dyn Fn(&str) -> NodeFacts) -> Vec<Finding> {
        for n in &mut inv.nodes {
            n.host_root = Some(PathBuf::from(format!("/state/{}", n.name)));
        }
        let results: Vec<ResultRecord> = plan(inv, &Filter::default())
            .to_vec()
            .iter()
            .map(|p| {
                let mut result = ProbeResult::new(p.id.clone(), Outcome::Ok, "ok");
                if p.path == PathClass::NodeConfig {
                    result.node = Some(Box::new(facts(&p.from.node)));
                }
                ResultRecord {
                    unknown: None,
                    path: p.path,
                    from: p.from.clone(),
                    to: p.to.clone(),
                    result,
                }
            })
            .collect();
        diagnose(inv, &Results::of(&results), &[])
    }

    fn base(node: &str) -> NodeFacts {
        NodeFacts {
            root: format!("/state/{node}"),
            kubelet: vec![KubeconfigFacts {
                path: "/etc/kubernetes/kubelet.conf".into(),
                server: Some("https://192.168.56.10:6443".into()),
                auth: "client-certificate".into(),
                check: Some(CheckFacts {
                    outcome: Outcome::Ok,
                    http_status: None,
                    detail: String::new(),
                }),
                ..KubeconfigFacts::default()
            }],
            resolv_conf: Some(ResolvFacts {
                nameservers: vec!["192.168.56.1".into()],
                search: Vec::new(),
            }),
            ..NodeFacts::default()
        }
    }

    #[test]
    fn an_impostor_or_rotated_ca_is_an_error_and_skip_verify_a_warning() {
        let mut inv = inventory(3, 1, "calico");
        let f = with_facts(&mut inv, &|node| {
            let mut f = base(node);
            let mut kc = kubeconfig(
                "/etc/cni/net.d/calico-kubeconfig",
                Some(token(NOW - 60, Some(NOW + 86_400), true)),
                None,
            );
            match node {
                "n1" => kc.server_trust = Some(probe_proto::ServerTrust::Untrusted),
                "n2" => {
                    kc.insecure_skip_tls_verify = true;
                    kc.server_trust = Some(probe_proto::ServerTrust::InsecureSkipVerify);
                    kc.check = Some(CheckFacts {
                        outcome: Outcome::Ok,
                        http_status: None,
                        detail: String::new(),
                    });
                }
                _ => kc.server_trust = Some(probe_proto::ServerTrust::Verified),
            }
            f.cni_kubeconfigs = vec![kc];
            f
        });
        assert_eq!(kinds(&f), [Kind::Credential, Kind::Credential], "{f:#?}");
        let untrusted = f
            .iter()
            .find(|x| x.facts().state().map(State::as_str) == Some("untrusted-server"))
            .expect("untrusted finding");
        assert_eq!(untrusted.severity, Severity::Error);
        assert_eq!(untrusted.facts().nodes(), ["n1"]);
        assert!(
            untrusted.summary.contains("rotated CA or an impostor"),
            "{}",
            untrusted.summary
        );
        let insecure = f
            .iter()
            .find(|x| x.facts().state().map(State::as_str) == Some("insecure"))
            .expect("insecure finding");
        assert_eq!(insecure.severity, Severity::Warning);
        assert_eq!(insecure.facts().nodes(), ["n2"]);
    }

    #[test]
    fn credentials_by_state() {
        let mut inv = inventory(3, 1, "calico");
        let f = with_facts(&mut inv, &|node| {
            let mut f = base(node);
            let kc = match node {
                "n1" => kubeconfig(
                    "/etc/cni/net.d/calico-kubeconfig",
                    Some(token(NOW - 90_000, Some(NOW - 3600), true)),
                    Some(Outcome::Unauthorized),
                ),
                "n2" => kubeconfig(
                    "/etc/cni/net.d/multus.d/multus.kubeconfig",
                    Some(token(NOW - 3 * 3600, Some(NOW + 86_400), true)),
                    Some(Outcome::Ok),
                ),
                _ => kubeconfig(
                    "/etc/cni/net.d/calico-kubeconfig",
                    Some(token(NOW - 60, Some(NOW + 86_400), true)),
                    Some(Outcome::Ok),
                ),
            };
            f.cni_kubeconfigs = vec![kc];
            f
        });
        assert_eq!(kinds(&f), [Kind::Credential, Kind::Credential], "{f:#?}");
        assert!(
            f.iter().any(|x| like(
                json!({"state": "expired", "severity": "error", "nodes": ["n1"]})
            )
            .matches(x)),
            "{f:#?}"
        );
        assert!(
            f.iter().any(|x| like(
                json!({"state": "stale", "severity": "warning", "nodes": ["n2"]})
            )
            .matches(x)),
            "{f:#?}"
        );
        let expired = f
            .iter()
            .find(|x| x.facts().state().map(State::as_str) == Some("expired"))
            .unwrap();
        assert!(
            expired.summary.contains("rejects it (HTTP 401)")
                && expired.summary.contains("calico-cni-plugin"),
            "{}",
            expired.summary
        );
        assert!(
            expired
                .fix
                .iter()
                .any(|l| l.contains("spec.nodeName=n1") && l.contains("TokenRequest")),
            "{:#?}",
            expired.fix
        );
    }

    #[test]
    fn rejected_and_legacy_tokens() {
        let mut inv = inventory(2, 1, "calico");
        let f = with_facts(&mut inv, &|node| {
            let mut f = base(node);
            f.cni_kubeconfigs = vec![match node {
                "n1" => kubeconfig(
                    "/etc/cni/net.d/calico-kubeconfig",
                    Some(token(NOW - 60, Some(NOW + 3600), true)),
                    Some(Outcome::Unauthorized),
                ),
                _ => kubeconfig(
                    "/etc/cni/net.d/flannel.kubeconfig",
                    Some(token(NOW - 86_400 * 400, None, false)),
                    Some(Outcome::Ok),
                ),
            }];
            f
        });
        assert!(
            f.iter().any(|x| like(
                json!({"kind": "credential", "state": "rejected", "nodes": ["n1"]})
            )
            .matches(x)),
            "{f:#?}"
        );
        assert!(f.iter().any(|x| like(json!({"kind": "credential", "state": "non-expiring", "severity": "warning", "nodes": ["n2"]})).matches(x)), "{f:#?}");
    }

    #[test]
    fn an_unreadable_cni_kubeconfig_is_a_credential_error_and_other_files_a_warning() {
        let mut inv = inventory(3, 1, "calico");
        let f = with_facts(&mut inv, &|node| {
            let mut f = base(node);
            match node {
                "n1" => {
                    let e = "/etc/cni/net.d/calico-kubeconfig is not a valid kubeconfig: `users[0].user` is a string, expected a mapping".to_string();
                    f.cni_kubeconfigs = vec![KubeconfigFacts {
                        path: "/etc/cni/net.d/calico-kubeconfig".into(),
                        auth: "none".into(),
                        error: Some(e.clone()),
                        ..KubeconfigFacts::default()
                    }];
                    f.errors = vec![e];
                }
                "n2" => {
                    f.errors =
                        vec!["resolv.conf /etc/resolv.conf: No such file or directory".into()];
                }
                _ => {}
            }
            f
        });
        assert_eq!(
            kinds(&f),
            [Kind::Credential, Kind::Misconfiguration],
            "{f:#?}"
        );
        let cred = &f[0];
        assert_eq!(cred.severity, Severity::Error);
        assert_eq!(cred.facts().state().map(State::as_str), Some("unreadable"));
        assert_eq!(cred.facts().nodes(), ["n1"]);
        assert!(
            cred.summary.contains(
                "/etc/cni/net.d/calico-kubeconfig on n1 is not a valid kubeconfig: `users[0].user`"
            ) && cred.summary.contains("the CNI cannot reach the API server"),
            "{}",
            cred.summary
        );
        assert_eq!(
            cred.summary.matches("calico-kubeconfig").count(),
            1,
            "{}",
            cred.summary
        );
        assert_eq!(cred.evidence.len(), 1, "{cred:#?}");
        let other = &f[1];
        assert_eq!(other.severity, Severity::Warning);
        assert_eq!(other.facts().nodes(), ["n2"]);
        assert!(
            other.summary.contains("/etc/resolv.conf"),
            "{}",
            other.summary
        );
    }

    #[test]
    fn certificates_and_fresh_tokens_are_fine() {
        let mut inv = inventory(2, 1, "calico");
        let f = with_facts(&mut inv, &|node| {
            let mut f = base(node);
            f.cni_kubeconfigs = vec![
                kubeconfig("/etc/cni/net.d/a.kubeconfig", None, None),
                kubeconfig(
                    "/etc/cni/net.d/calico-kubeconfig",
                    Some(token(NOW - 60, Some(NOW + 3600), true)),
                    Some(Outcome::Ok),
                ),
            ];
            f
        });
        assert!(f.is_empty(), "{f:#?}");
    }

    #[test]
    fn kubelet_at_localhost_on_a_worker() {
        let mut inv = inventory(3, 1, "flannel");
        let f = with_facts(&mut inv, &|node| {
            let mut f = base(node);
            if node != "n2" {
                return f;
            }
            f.kubelet[0].server = Some("https://localhost:6443".into());
            f.kubelet[0].check = Some(CheckFacts {
                outcome: Outcome::Refused,
                http_status: None,
                detail: "connection refused".into(),
            });
            f
        });
        assert_eq!(kinds(&f), [Kind::Misconfiguration], "{f:#?}");
        assert_eq!(f[0].facts().nodes(), ["n2"]);
        assert!(
            f[0].fix[0].contains("https://192.168.56.10:6443"),
            "{:#?}",
            f[0].fix
        );
    }

    #[test]
    fn dns_forward_loop() {
        let mut inv = inventory(3, 1, "flannel");
        inv.cluster.dns.as_mut().unwrap().corefile =
            Some(".:53 {\n    forward . /etc/resolv.conf\n}\n".into());
        let f = with_facts(&mut inv, &|node| {
            let mut f = base(node);
            f.resolv_conf = Some(ResolvFacts {
                nameservers: vec!["127.0.0.53".into()],
                search: Vec::new(),
            });
            f
        });
        assert_eq!(kinds(&f), [Kind::Dns], "{f:#?}");
        assert!(
            like(json!({"state": "loop", "nodes": ["n1"]})).matches(&f[0]),
            "the DNS pod's node: {:#?}",
            f[0]
        );
        // Without the Corefile forwarding to resolv.conf there is no loop.
        inv.cluster.dns.as_mut().unwrap().corefile =
            Some(".:53 {\n    forward . 8.8.8.8\n}\n".into());
        let f = with_facts(&mut inv, &|node| {
            let mut f = base(node);
            f.resolv_conf = Some(ResolvFacts {
                nameservers: vec!["127.0.0.53".into()],
                search: Vec::new(),
            });
            f
        });
        assert!(f.is_empty(), "{f:#?}");
    }

    #[test]
    fn no_kubeconfig_on_any_node_of_a_discovered_cluster_names_the_component() {
        let mut inv = inventory(3, 1, "calico");
        let bare = |node: &str| NodeFacts {
            root: format!("/state/{node}"),
            resolv_conf: base(node).resolv_conf,
            ..NodeFacts::default()
        };
        // A lab or hand-written inventory (no discovered distribution): nothing said.
        assert!(with_facts(&mut inv, &bare).is_empty());
        let mut files = crate::inventory::NodeFiles::kubeadm();
        files.distribution = "k3s".into();
        inv.cluster.node_files = Some(files);
        let f = with_facts(&mut inv, &bare);
        assert_eq!(kinds(&f), [Kind::Misconfiguration], "{f:#?}");
        assert_eq!(f[0].severity, Severity::Warning);
        assert_eq!(
            f[0].facts().nodes(),
            ["n1", "n2", "n3"].map(String::from),
            "{f:#?}"
        );
        assert!(
            f[0].summary
                .contains("no CNI or kubelet kubeconfig on any of 3 nodes")
                && f[0]
                    .summary
                    .ends_with("apply deploy/components/k3s with the agents"),
            "{}",
            f[0].summary
        );
        assert_eq!(f[0].evidence.len(), 3, "{f:#?}");
        // One node with its kubelet kubeconfig: the files are mounted; nothing said.
        let f = with_facts(&mut inv, &|node| {
            if node == "n2" { base(node) } else { bare(node) }
        });
        assert!(f.is_empty(), "{f:#?}");
    }
}

#[test]
fn a_port_blocked_between_every_pair_is_one_finding() {
    // (nodes in the cluster, nodes between which tcp/10250 is blocked, the words it must use)
    let cases: [(usize, &[&str], &str); 2] = [
        (
            5,
            &["n1", "n2", "n3", "n4", "n5"],
            "everywhere: between every pair of the 5 nodes",
        ),
        (5, &["n1", "n2", "n4"], "between every pair of n1, n2, n4"),
    ];
    for (n, among, words) in cases {
        let inv = inventory(n, 1, "flannel");
        let (_, f) = run(&inv, &move |p| {
            let (from, to) = node_of(p);
            (matches!(p.path, PathClass::NodeToNode | PathClass::PodToNode)
                && from != to
                && among.contains(&from)
                && among.contains(&to)
                && p.to.port == Some(10250))
            .then(timeout)
            .flatten()
        });
        assert_eq!(kinds(&f), [Kind::FirewallGap], "{among:?}: {f:#?}");
        assert!(f[0].summary.contains(words), "{}", f[0].summary);
        assert_eq!(f[0].facts().from(), among);
        assert_eq!(f[0].facts().to(), among);
    }
}

/// `n` nodes in `zones` zones of consecutive nodes (`z0`, `z1`, ...).
fn zoned(n: usize, zones: usize) -> Inventory {
    let mut inv = inventory(n, 1, "flannel");
    for (i, node) in inv.nodes.iter_mut().enumerate() {
        node.zone = Some(format!("z{}", i * zones / n));
    }
    inv
}

#[test]
fn a_zone_to_zone_block_is_one_finding_per_zone_pair() {
    // 100 nodes in 4 zones of 25; the kubelet port is blocked both ways between z0 and z1 and
    // between z1 and z2, and nowhere else.
    let inv = zoned(100, 4);
    let zone: HashMap<String, String> = inv
        .nodes
        .iter()
        .map(|n| (n.name.clone(), n.zone.clone().unwrap()))
        .collect();
    let (_, f) = run(&inv, &move |p| {
        let (from, to) = node_of(p);
        if p.path != PathClass::NodeToNode || p.to.port != Some(10250) {
            return None;
        }
        let mut pair = [zone[from].as_str(), zone[to].as_str()];
        pair.sort_unstable();
        matches!(pair, ["z0", "z1"] | ["z1", "z2"])
            .then(timeout)
            .flatten()
    });
    assert_eq!(kinds(&f), [Kind::FirewallGap, Kind::FirewallGap], "{f:#?}");
    let mut summaries: Vec<&str> = f.iter().map(|g| g.summary.as_str()).collect();
    summaries.sort_unstable();
    assert!(
        summaries[0].starts_with("tcp/10250 (the kubelet) is blocked between zone z0 (n1, "),
        "{summaries:#?}"
    );
    assert!(
        summaries[0].contains(" and zone z1 (n26, "),
        "{summaries:#?}"
    );
    assert!(
        summaries[1].contains("between zone z1 (n26, ")
            && summaries[1].contains(" and zone z2 (n51, "),
        "{summaries:#?}"
    );
    for g in &f {
        assert_eq!(g.facts().direction(), Some(crate::model::Direction::Both));
        assert_eq!(
            (g.facts().from().len(), g.facts().to().len()),
            (25, 25),
            "{g:#?}"
        );
        assert_eq!(
            g.evidence.len(),
            2 * 25 * 25,
            "every blocked pair is evidence"
        );
        // The zone's addresses are a few CIDR blocks, not 25 literals.
        let net = g.fix.iter().find(|l| l.contains("router")).unwrap();
        assert!(net.matches(", ").count() < 12, "{net}");
        assert!(net.contains(" between zone z"), "{net}");
    }
}

#[test]
fn a_zone_pair_blocked_one_way_among_two_zones_is_one_finding() {
    let inv = zoned(100, 2);
    let (_, f) = run(&inv, &|p| {
        let (from, to) = node_of(p);
        let n = |s: &str| s[1..].parse::<usize>().unwrap();
        (p.path == PathClass::NodeToNode && p.to.port == Some(10250) && n(from) <= 50 && n(to) > 50)
            .then(timeout)
            .flatten()
    });
    assert_eq!(kinds(&f), [Kind::FirewallGap], "{f:#?}");
    assert!(
        f[0].summary
            .starts_with("tcp/10250 (the kubelet) is blocked from zone z0 (n1, ")
            && f[0].summary.contains(" to zone z1 (n51, ")
            && f[0].summary.ends_with("; the reverse direction works"),
        "{}",
        f[0].summary
    );
    // And the same port blocked between every pair is still one finding, "everywhere".
    let (_, f) = run(&inv, &|p| {
        (p.path == PathClass::NodeToNode && p.to.port == Some(10250))
            .then(timeout)
            .flatten()
    });
    assert_eq!(kinds(&f), [Kind::FirewallGap], "{f:#?}");
    assert!(f[0].summary.contains("everywhere"), "{}", f[0].summary);
}

mod hop_where;
mod inferred_tunnel;
mod mtu_unknown;
mod narrowed_run;
mod optional_port;
mod router_reject;
mod selective_refusal;
