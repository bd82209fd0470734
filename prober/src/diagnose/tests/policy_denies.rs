//! Network policies at the pod agents: the probes a policy of the inventory denies are a
//! `policy` finding naming it (untested, not broken), never a firewall gap; the same pattern with
//! no readable policy is a `policy` warning read from the pattern.

use super::*;
use crate::diagnose::policy::tests::{ANP_DENY, DEFAULT_DENY_INGRESS};
use crate::diagnose::policy::{Agents, Policies, Routes, Verdict};
use crate::inventory::PolicyObject;
use crate::runtime::kube::manifests::{self, AgentSpec};

fn with_policies(mut inv: Inventory, yamls: &[&str]) -> Inventory {
    inv.cluster.policies = yamls
        .iter()
        .map(|y| serde_saphyr::from_str::<PolicyObject>(y).unwrap())
        .collect();
    inv
}

/// Into a pod agent from another node.
fn into_pod_agent(p: &PlannedProbe) -> bool {
    let (from, to) = node_of(p);
    p.to.agent == Some(AgentKind::Pod) && !to.is_empty() && from != to
}

fn no_gap_nor_unexplained(f: &[Finding]) {
    for k in [
        Kind::FirewallGap,
        Kind::Unexplained,
        Kind::Overlay,
        Kind::Partition,
    ] {
        assert!(!kinds(f).contains(&k), "{k:?}: {f:#?}");
    }
}

/// Calico's `GlobalNetworkPolicy` reference, its rule made a deny of the agents' port.
const CALICO_DENY_AGENT_PORT: &str = "
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: default-deny}
spec:
  order: 1000
  selector: all()
  types: [Ingress]
  ingress:
  - {action: Deny, protocol: TCP, destination: {ports: [9917]}}
  - {action: Allow}
";

#[test]
fn a_calico_deny_of_the_agent_port_is_the_policys_not_a_firewall_gap() {
    let inv = with_policies(inventory(3, 1, "calico"), &[CALICO_DENY_AGENT_PORT]);
    let (_, f) = run(&inv, &|p| {
        (into_pod_agent(p) && p.to.protocol == Protocol::Tcp && p.to.port == Some(9917))
            .then(|| (Outcome::Timeout, "no answer within 2000 ms".into()))
    });
    assert_eq!(kinds(&f), [Kind::Policy], "{f:#?}");
    assert!(
        like(json!({"kind": "policy", "state": "denied", "severity": "warning", "nodes": ["n1", "n2", "n3"]}))
            .matches(&f[0]),
        "{:#?}",
        f[0]
    );
    assert!(
        f[0].summary.starts_with(
            "GlobalNetworkPolicy default-deny (order 1000) drops tcp/9917 to the pod agents"
        ) && f[0]
            .summary
            .ends_with("the pod paths below are untested, not broken"),
        "{}",
        f[0].summary
    );
    // The fix is a Calico policy ordered before it, allowing the agents.
    assert!(
        f[0].fix.iter().any(|l| l.contains("order 999")),
        "{:?}",
        f[0].fix
    );
    assert!(
        f[0].fix.iter().any(|l| l.starts_with("echo '")
            && l.contains("\"kind\":\"GlobalNetworkPolicy\"")
            && l.contains("\"order\":999.0")
            && l.ends_with("| kubectl apply -f -")),
        "{:?}",
        f[0].fix
    );
    assert!(
        f[0].fix.iter().all(|l| !l.contains("nft ")),
        "{:?}",
        f[0].fix
    );
}

#[test]
fn a_namespace_default_deny_names_prober_s_own_allow_policy_as_the_fix() {
    let inv = with_policies(inventory(3, 1, "flannel"), &[DEFAULT_DENY_INGRESS]);
    let (_, f) = run(&inv, &|p| into_pod_agent(p).then(timeout).flatten());
    assert_eq!(kinds(&f), [Kind::Policy], "{f:#?}");
    let s = &f[0].summary;
    assert!(
        s.starts_with("NetworkPolicy prober-system/default-deny-ingress drops ")
            && s.contains("icmp")
            && s.contains("tcp/9917")
            && s.contains(" to the pod agents (it selects them and allows none of it)"),
        "{s}"
    );
    assert!(
        f[0].fix
            .iter()
            .any(|l| l.contains("\"name\":\"prober-agents\"") && l.contains("\"ingress\":[{}]")),
        "{:?}",
        f[0].fix
    );
}

#[test]
fn with_the_shipped_allow_policy_a_namespace_default_deny_denies_no_probe() {
    let inv = inventory(3, 1, "flannel");
    let mut allow = serde_json::to_value(manifests::network_policy(&AgentSpec::default())).unwrap();
    allow["apiVersion"] = "networking.k8s.io/v1".into();
    allow["kind"] = "NetworkPolicy".into();
    let objects = vec![
        serde_saphyr::from_str::<PolicyObject>(DEFAULT_DENY_INGRESS).unwrap(),
        serde_json::from_value::<PolicyObject>(allow).unwrap(),
    ];
    let alone = Policies::new(&objects[..1], Agents::deployed());
    let both = Policies::new(&objects, Agents::deployed());
    assert!(both.notes.is_empty(), "{:?}", both.notes);
    let mut denied_alone = 0;
    let routes = Routes::new(&inv);
    for p in plan(&inv, &Filter::default()).to_vec() {
        let r = routes.of(p.path, &p.from, &p.to);
        if matches!(alone.probe_verdict(&r), Verdict::Denied(_)) {
            denied_alone += 1;
        }
        assert_eq!(both.probe_verdict(&r), Verdict::Allowed, "{}", p.id);
    }
    assert!(denied_alone > 0, "the default deny alone denies probes");
}

#[test]
fn an_admin_network_policy_deny_names_its_rule_and_a_higher_priority_allow() {
    let inv = with_policies(inventory(3, 1, "flannel"), &[ANP_DENY]);
    // Its peers are namespaces: pods only, so host agents still reach the pod agents.
    let (_, f) = run(&inv, &|p| {
        (into_pod_agent(p) && p.from.agent == AgentKind::Pod)
            .then(timeout)
            .flatten()
    });
    assert_eq!(kinds(&f), [Kind::Policy], "{f:#?}");
    let s = &f[0].summary;
    assert!(
        s.starts_with("AdminNetworkPolicy cluster-wide-deny-example (priority 10) drops ")
            && s.contains("by its rule select-all-deny-all"),
        "{s}"
    );
    assert!(
        f[0].fix
            .iter()
            .any(|l| l.contains("\"priority\":9") && l.contains("\"action\":\"Allow\"")),
        "{:?}",
        f[0].fix
    );
}

/// A Calico deny at the pod agents of one node (its pod range as the destination).
const CALICO_DENY_ONE_NODE: &str = "
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: deny-zone-b}
spec:
  order: 100
  selector: all()
  types: [Ingress]
  ingress:
  - {action: Deny, protocol: TCP, destination: {nets: [10.244.3.0/24], ports: [9917]}}
  - {action: Allow}
";

#[test]
fn a_policy_that_denies_at_one_node_names_that_node_only() {
    let inv = with_policies(inventory(3, 1, "calico"), &[CALICO_DENY_ONE_NODE]);
    let (_, f) = run(&inv, &|p| {
        (into_pod_agent(p)
            && node_of(p).1 == "n3"
            && p.to.protocol == Protocol::Tcp
            && p.to.port == Some(9917))
        .then(timeout)
        .flatten()
    });
    assert_eq!(kinds(&f), [Kind::Policy], "{f:#?}");
    assert_eq!(f[0].facts().nodes(), ["n3"]);
    assert!(
        f[0].summary
            .contains("drops tcp/9917 to the pod agents on n3"),
        "{}",
        f[0].summary
    );
}

#[test]
fn pod_agents_unreachable_while_hosts_and_the_overlay_work_is_a_policy_prober_cannot_read() {
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run(&inv, &|p| into_pod_agent(p).then(timeout).flatten());
    no_gap_nor_unexplained(&f);
    assert_eq!(kinds(&f), [Kind::Policy], "{f:#?}");
    assert!(
        like(json!({"kind": "policy", "state": "unreadable", "inferred": true, "nodes": ["n1", "n2", "n3"]}))
            .matches(&f[0]),
        "{:#?}",
        f[0]
    );
    assert!(
        f[0].fix.iter().all(|l| !l.contains("nft ")),
        "{:?}",
        f[0].fix
    );
}

#[test]
fn one_node_s_pod_agent_unreachable_one_way_is_a_policy_prober_cannot_read() {
    let inv = inventory(3, 1, "flannel");
    // n3's pod agent reaches the others; nothing new reaches it (a stateful drop at its door).
    let (_, f) = run(&inv, &|p| {
        (into_pod_agent(p) && node_of(p).1 == "n3")
            .then(timeout)
            .flatten()
    });
    assert_eq!(kinds(&f), [Kind::Policy], "{f:#?}");
    assert_eq!(f[0].facts().nodes(), ["n3"]);
    assert!(f[0].facts().inferred());
}

#[test]
fn a_policy_that_cannot_be_evaluated_is_named_in_the_unreadable_finding() {
    let tiered = CALICO_DENY_AGENT_PORT.replace("order: 1000", "order: 1000\n  tier: security");
    let inv = with_policies(inventory(3, 1, "calico"), &[&tiered]);
    let (_, f) = run(&inv, &|p| into_pod_agent(p).then(timeout).flatten());
    assert_eq!(kinds(&f), [Kind::Policy], "{f:#?}");
    assert!(
        f[0].summary.contains("prober cannot evaluate")
            && f[0].notes.iter().any(|n| n.contains("tier \"security\"")),
        "{:#?}",
        f[0]
    );
}

#[test]
fn an_ipv4_only_allow_in_a_dual_stack_cluster_denies_the_ipv6_probes_and_says_so() {
    // The policy admits the agents' peers by their IPv4 ranges alone: over IPv6 nothing from
    // another node gets in. That is the policy's, over IPv6, never a gap nor a guess.
    use crate::diagnose::policy::tests::ALLOW_IPV4_ONLY;
    let inv = with_policies(
        crate::testutil::dual_stack(3, 1, "flannel"),
        &[ALLOW_IPV4_ONLY],
    );
    let (_, f) = run(&inv, &|p| {
        (into_pod_agent(p) && p.to.family() == crate::model::Family::Ipv6)
            .then(timeout)
            .flatten()
    });
    no_gap_nor_unexplained(&f);
    assert_eq!(kinds(&f), [Kind::Policy], "{f:#?}");
    assert!(
        like(json!({"kind": "policy", "state": "denied", "inferred": false, "family": "ipv6"}))
            .matches(&f[0]),
        "{:#?}",
        f[0]
    );
    assert!(
        f[0].summary
            .starts_with("NetworkPolicy prober-system/allow-cluster-ipv4 drops ")
            && f[0].summary.contains(" over IPv6 to the pod agents"),
        "{}",
        f[0].summary
    );
}
