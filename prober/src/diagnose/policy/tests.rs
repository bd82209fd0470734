//! Unit tests of the policy evaluation, each against the upstream documentation's own examples
//! (kubernetes.io "Network Policies", network-policy-api.sigs.k8s.io "Examples", Calico's
//! `GlobalNetworkPolicy` reference and default-deny guide, Cilium's "Deny Policies" and policy
//! language pages), moved into the agents' namespace or pointed at their labels where the test
//! needs the example to select them.

use std::net::Ipv4Addr;

use super::*;
use crate::model::Protocol;

fn obj(yaml: &str) -> PolicyObject {
    serde_saphyr::from_str(yaml).expect("policy object")
}

fn policies(yamls: &[&str]) -> Policies {
    let objects: Vec<PolicyObject> = yamls.iter().map(|y| obj(y)).collect();
    let p = Policies::new(&objects, Agents::deployed());
    assert!(p.notes.is_empty(), "{:?}", p.notes);
    p
}

fn agent(node: &str, last: u8) -> Peer {
    Peer::Agent {
        node: node.into(),
        ip: Ipv4Addr::new(10, 244, last, 2).into(),
    }
}

fn host(node: &str, last: u8, local: bool) -> Peer {
    Peer::Host {
        node: node.into(),
        ip: Ipv4Addr::new(192, 168, 56, 9 + last).into(),
        local,
        apiserver: false,
    }
}

/// A flow at n2's pod agent (10.244.2.2).
fn flow(dir: Dir, peer: Peer, protocol: Protocol, port: Option<u16>) -> Flow {
    Flow {
        dir,
        node: "n2".into(),
        ip: Ipv4Addr::new(10, 244, 2, 2).into(),
        peer,
        protocol,
        port,
    }
}

fn tcp_in(peer: Peer) -> Flow {
    flow(Dir::Ingress, peer, Protocol::Tcp, Some(9917))
}

fn tcp_out(peer: Peer) -> Flow {
    flow(Dir::Egress, peer, Protocol::Tcp, Some(9917))
}

fn denied_by(v: &Verdict) -> Option<(String, Option<String>)> {
    match v {
        Verdict::Denied(d) => Some((d.policy.to_string(), d.rank.clone())),
        _ => None,
    }
}

// --- Kubernetes NetworkPolicy (kubernetes.io, "Network Policies") ---

const K8S_EXAMPLE: &str = "
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: test-network-policy, namespace: default}
spec:
  podSelector: {matchLabels: {role: db}}
  policyTypes: [Ingress, Egress]
  ingress:
  - from:
    - ipBlock: {cidr: 172.17.0.0/16, except: [172.17.1.0/24]}
    - namespaceSelector: {matchLabels: {project: myproject}}
    - podSelector: {matchLabels: {role: frontend}}
    ports: [{protocol: TCP, port: 6379}]
  egress:
  - to: [{ipBlock: {cidr: 10.0.0.0/24}}]
    ports: [{protocol: TCP, port: 5978}]
";

pub(in crate::diagnose) const DEFAULT_DENY_INGRESS: &str = "
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: default-deny-ingress, namespace: prober-system}
spec:
  podSelector: {}
  policyTypes: [Ingress]
";

const ALLOW_ALL_INGRESS: &str = "
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-all-ingress, namespace: prober-system}
spec:
  podSelector: {}
  ingress: [{}]
  policyTypes: [Ingress]
";

const DEFAULT_DENY_ALL: &str = "
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: default-deny-all, namespace: prober-system}
spec:
  podSelector: {}
  policyTypes: [Ingress, Egress]
";

#[test]
fn k8s_a_policy_of_another_namespace_or_other_labels_does_not_select_the_agents() {
    let p = policies(&[K8S_EXAMPLE]);
    assert_eq!(p.selecting(), vec![]);
    assert_eq!(p.verdict(&tcp_in(agent("n1", 1))), Verdict::Allowed);
    // The same policy in the agents' namespace still selects only `role: db`.
    let moved = K8S_EXAMPLE.replace("namespace: default", "namespace: prober-system");
    assert_eq!(policies(&[&moved]).selecting(), vec![]);
    let on_agents = moved.replace("{role: db}", "{app.kubernetes.io/name: prober}");
    let p = policies(&[&on_agents]);
    assert_eq!(p.selecting().len(), 1);
    // Selected: only TCP 6379 from the example's peers comes in, only TCP 5978 to 10.0.0.0/24
    // goes out.
    assert!(denied_by(&p.verdict(&tcp_in(agent("n1", 1)))).is_some());
    let from_block = Peer::Outside {
        ip: Ipv4Addr::new(172, 17, 0, 5).into(),
        apiserver: false,
    };
    let in_6379 = |peer| flow(Dir::Ingress, peer, Protocol::Tcp, Some(6379));
    assert_eq!(p.verdict(&in_6379(from_block)), Verdict::Allowed);
    let excepted = Peer::Outside {
        ip: Ipv4Addr::new(172, 17, 1, 5).into(),
        apiserver: false,
    };
    assert!(denied_by(&p.verdict(&in_6379(excepted))).is_some());
    let to_net = Peer::Outside {
        ip: Ipv4Addr::new(10, 0, 0, 7).into(),
        apiserver: false,
    };
    assert_eq!(
        p.verdict(&flow(
            Dir::Egress,
            to_net.clone(),
            Protocol::Tcp,
            Some(5978)
        )),
        Verdict::Allowed
    );
    assert!(denied_by(&p.verdict(&flow(Dir::Egress, to_net, Protocol::Udp, Some(5978)))).is_some());
}

#[test]
fn k8s_default_deny_isolates_per_direction_and_never_the_pods_own_node() {
    let p = policies(&[DEFAULT_DENY_INGRESS]);
    let v = p.verdict(&tcp_in(agent("n1", 1)));
    assert_eq!(
        denied_by(&v),
        Some((
            "NetworkPolicy prober-system/default-deny-ingress".into(),
            None
        ))
    );
    assert!(denied_by(&p.verdict(&tcp_in(host("n1", 1, false)))).is_some());
    assert!(
        denied_by(&p.verdict(&flow(Dir::Ingress, agent("n1", 1), Protocol::Icmp, None))).is_some()
    );
    // Its own node always reaches the pod; egress is not isolated by an Ingress-only policy.
    assert_eq!(p.verdict(&tcp_in(host("n2", 2, true))), Verdict::Allowed);
    assert_eq!(p.verdict(&tcp_out(agent("n1", 1))), Verdict::Allowed);
    let all = policies(&[DEFAULT_DENY_ALL]);
    assert!(denied_by(&all.verdict(&tcp_out(agent("n1", 1)))).is_some());
}

#[test]
fn k8s_allow_rules_add_up_across_policies() {
    let p = policies(&[DEFAULT_DENY_INGRESS, ALLOW_ALL_INGRESS]);
    assert_eq!(p.verdict(&tcp_in(agent("n1", 1))), Verdict::Allowed);
    assert_eq!(p.verdict(&tcp_in(host("n1", 1, false))), Verdict::Allowed);
    // An allow limited to the agents' named port admits the probe, not ICMP.
    let named = "
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-probe-port, namespace: prober-system}
spec:
  podSelector: {matchExpressions: [{key: app.kubernetes.io/name, operator: In, values: [prober]}]}
  ingress: [{ports: [{port: probe}]}]
";
    let p = policies(&[DEFAULT_DENY_ALL, named]);
    assert_eq!(p.verdict(&tcp_in(agent("n1", 1))), Verdict::Allowed);
    assert!(
        denied_by(&p.verdict(&flow(Dir::Ingress, agent("n1", 1), Protocol::Icmp, None))).is_some()
    );
    assert!(denied_by(&p.verdict(&tcp_out(agent("n1", 1)))).is_some());
}

#[test]
fn k8s_match_expressions_select_as_documented() {
    let sel = |op: &str, values: &str| {
        format!(
            "
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {{name: x, namespace: prober-system}}
spec:
  podSelector: {{matchExpressions: [{{key: app.kubernetes.io/component, operator: {op}{values}}}]}}
"
        )
    };
    for (op, values, selects) in [
        ("In", ", values: [pod-agent, other]", true),
        ("In", ", values: [host-agent]", false),
        ("NotIn", ", values: [host-agent]", true),
        ("NotIn", ", values: [pod-agent]", false),
        ("Exists", "", true),
        ("DoesNotExist", "", false),
    ] {
        let p = policies(&[&sel(op, values)]);
        assert_eq!(p.selecting().len(), usize::from(selects), "{op}{values}");
    }
    let p = policies(&[&sel("Gt", ", values: ['1']")]);
    assert!(matches!(p.selecting()[0].1, Tri::Unknown(_)));
    assert!(matches!(
        p.verdict(&tcp_in(agent("n1", 1))),
        Verdict::Unknown(_)
    ));
}

// --- AdminNetworkPolicy (network-policy-api.sigs.k8s.io, "Examples") ---

/// Story 1, "deny traffic at a cluster level", its subject moved to the agents' namespace.
pub(in crate::diagnose) const ANP_DENY: &str = "
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: cluster-wide-deny-example}
spec:
  priority: 10
  subject:
    namespaces: {matchLabels: {kubernetes.io/metadata.name: prober-system}}
  ingress:
  - name: select-all-deny-all
    action: Deny
    from: [{namespaces: {}}]
";

/// Story 3, "pass traffic", for every namespace.
const ANP_PASS: &str = "
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: pass-example}
spec:
  priority: 5
  subject: {namespaces: {}}
  ingress:
  - name: pass-all
    action: Pass
    from: [{namespaces: {}}]
";

/// Story 4, the baseline: deny between namespaces by default.
const BANP: &str = "
apiVersion: policy.networking.k8s.io/v1alpha1
kind: BaselineAdminNetworkPolicy
metadata: {name: default}
spec:
  subject: {namespaces: {}}
  ingress:
  - name: default-deny
    action: Deny
    from: [{namespaces: {}}]
";

#[test]
fn anp_deny_names_its_priority_and_not_selected_is_allowed() {
    let p = policies(&[ANP_DENY]);
    let v = p.verdict(&tcp_in(agent("n1", 1)));
    assert_eq!(
        denied_by(&v),
        Some((
            "AdminNetworkPolicy cluster-wide-deny-example".into(),
            Some("priority 10".into())
        ))
    );
    // Host-network peers are no namespace's pods.
    assert_eq!(p.verdict(&tcp_in(host("n1", 1, false))), Verdict::Allowed);
    let other = policies(&[&ANP_DENY.replace("prober-system", "sensitive-ns")]);
    assert_eq!(other.selecting(), vec![]);
    assert_eq!(other.verdict(&tcp_in(agent("n1", 1))), Verdict::Allowed);
}

#[test]
fn anp_priority_orders_and_pass_skips_to_networkpolicy_and_baseline() {
    // A higher-precedence Allow wins over the Deny.
    let allow = ANP_PASS
        .replace("action: Pass", "action: Allow")
        .replace("pass-example", "allow-first");
    assert_eq!(
        policies(&[ANP_DENY, &allow]).verdict(&tcp_in(agent("n1", 1))),
        Verdict::Allowed
    );
    // Pass skips the lower-precedence Deny; then nothing isolates the agents but the baseline.
    let p = policies(&[ANP_DENY, ANP_PASS]);
    assert_eq!(p.verdict(&tcp_in(agent("n1", 1))), Verdict::Allowed);
    let p = policies(&[ANP_DENY, ANP_PASS, BANP]);
    assert_eq!(
        denied_by(&p.verdict(&tcp_in(agent("n1", 1)))),
        Some(("BaselineAdminNetworkPolicy default".into(), None))
    );
    // A NetworkPolicy that isolates the agents takes over from the baseline.
    let p = policies(&[ANP_PASS, BANP, DEFAULT_DENY_INGRESS, ALLOW_ALL_INGRESS]);
    assert_eq!(p.verdict(&tcp_in(agent("n1", 1))), Verdict::Allowed);
    // An ANP Deny is not overridden by a NetworkPolicy allow.
    let p = policies(&[ANP_DENY, ALLOW_ALL_INGRESS]);
    assert!(denied_by(&p.verdict(&tcp_in(agent("n1", 1)))).is_some());
}

// --- Calico (GlobalNetworkPolicy reference; "Enable a default deny policy") ---

/// Calico's documented default deny, as its guide writes it.
const CALICO_DEFAULT_DENY: &str = r#"
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: default-deny}
spec:
  selector: projectcalico.org/namespace not in {'kube-system', 'calico-system', 'calico-apiserver'}
  types: [Ingress, Egress]
  egress:
  - action: Allow
    protocol: UDP
    destination:
      selector: k8s-app == "kube-dns"
      ports: [53]
"#;

/// The reference's sample, `allow-tcp-6379`.
const CALICO_SAMPLE: &str = "
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: allow-tcp-6379}
spec:
  selector: role == 'database'
  types: [Ingress, Egress]
  ingress:
  - action: Allow
    protocol: TCP
    source: {selector: role == 'frontend'}
    destination: {ports: [6379]}
  egress:
  - action: Allow
";

const CALICO_DENY_PORT: &str = "
apiVersion: crd.projectcalico.org/v1
kind: GlobalNetworkPolicy
metadata: {name: deny-agent-port}
spec:
  order: 100
  selector: app.kubernetes.io/name == 'prober'
  types: [Ingress]
  ingress:
  - action: Log
  - action: Deny
    protocol: TCP
    destination: {ports: [9917]}
  - action: Pass
";

#[test]
fn calico_selects_by_its_selectors_and_drops_at_the_end_of_the_tier() {
    assert_eq!(policies(&[CALICO_SAMPLE]).selecting(), vec![]);
    let p = policies(&[CALICO_DEFAULT_DENY]);
    assert_eq!(p.selecting().len(), 1);
    assert_eq!(
        denied_by(&p.verdict(&tcp_in(agent("n1", 1)))),
        Some(("GlobalNetworkPolicy default-deny".into(), None))
    );
    // Egress to a DNS pod whose labels prober does not know: cannot evaluate, not a guess.
    let dns = flow(
        Dir::Egress,
        Peer::Pod {
            ip: Ipv4Addr::new(10, 244, 1, 53).into(),
        },
        Protocol::Udp,
        Some(53),
    );
    assert!(matches!(p.verdict(&dns), Verdict::Unknown(_)));
    let kube_system =
        CALICO_DEFAULT_DENY.replace("'kube-system', ", "'kube-system', 'prober-system', ");
    assert_eq!(policies(&[&kube_system]).selecting(), vec![]);
}

#[test]
fn calico_order_decides_first_deny_or_allow_and_pass_leaves_the_tier() {
    // The shipped agents' NetworkPolicy (order 1000) comes before a default deny without order.
    let shipped = "
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: prober-agents, namespace: prober-system}
spec:
  podSelector: {matchLabels: {app.kubernetes.io/name: prober}}
  policyTypes: [Ingress, Egress]
  ingress: [{}]
  egress: [{}]
";
    let p = policies(&[CALICO_DEFAULT_DENY, shipped]);
    assert_eq!(p.verdict(&tcp_in(agent("n1", 1))), Verdict::Allowed);
    // An explicit Deny at order 100 comes first: the allow cannot override it.
    let p = policies(&[CALICO_DEFAULT_DENY, shipped, CALICO_DENY_PORT]);
    let v = p.verdict(&tcp_in(agent("n1", 1)));
    assert_eq!(
        denied_by(&v),
        Some((
            "GlobalNetworkPolicy deny-agent-port".into(),
            Some("order 100".into())
        ))
    );
    // The Log rule before it did not decide; ICMP falls to Pass: the next tier (none) allows.
    let icmp = flow(Dir::Ingress, agent("n1", 1), Protocol::Icmp, None);
    assert_eq!(
        policies(&[CALICO_DEFAULT_DENY, CALICO_DENY_PORT]).verdict(&icmp),
        Verdict::Allowed
    );
    // Without the Pass, the default deny later in the tier drops ICMP.
    let no_pass = CALICO_DENY_PORT.replace("  - action: Pass\n", "");
    assert!(denied_by(&policies(&[CALICO_DEFAULT_DENY, &no_pass]).verdict(&icmp)).is_some());
    // A policy in another tier: the tiers' order is not read.
    let tiered = CALICO_DENY_PORT.replace("order: 100", "order: 100\n  tier: security");
    assert!(matches!(
        policies(&[&tiered]).verdict(&tcp_in(agent("n1", 1))),
        Verdict::Unknown(_)
    ));
}

#[test]
fn calico_nets_on_the_agents_side_deny_only_those_nodes() {
    let zone = "
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: deny-zone-b}
spec:
  order: 10
  selector: all()
  ingress:
  - action: Deny
    protocol: TCP
    destination: {nets: [10.244.2.0/24], ports: [9917]}
  - action: Pass
";
    let p = policies(&[zone]);
    assert!(denied_by(&p.verdict(&tcp_in(agent("n1", 1)))).is_some());
    let mut at_n3 = tcp_in(agent("n1", 1));
    at_n3.ip = Ipv4Addr::new(10, 244, 3, 2).into();
    assert_eq!(p.verdict(&at_n3), Verdict::Allowed);
}

// --- Cilium ("Deny Policies", "Layer 3", "Layer 4" examples) ---

/// "Ingress deny all" of the policy language page, pointed at the agents.
const CILIUM_DENY_ALL_INGRESS: &str = "
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: deny-all-ingress, namespace: prober-system}
spec:
  endpointSelector: {matchLabels: {app.kubernetes.io/name: prober}}
  ingress: [{}]
";

/// The deny page's `external-lockdown`.
const CILIUM_LOCKDOWN: &str = "
apiVersion: cilium.io/v2
kind: CiliumClusterwideNetworkPolicy
metadata: {name: external-lockdown}
spec:
  endpointSelector: {}
  ingressDeny:
  - fromEntities: [world]
  ingress:
  - fromEntities: [all]
";

#[test]
fn cilium_selected_endpoints_are_default_deny_and_allows_add_up() {
    let other =
        CILIUM_DENY_ALL_INGRESS.replace("{app.kubernetes.io/name: prober}", "{role: restricted}");
    assert_eq!(policies(&[&other]).selecting(), vec![]);
    let p = policies(&[CILIUM_DENY_ALL_INGRESS]);
    assert_eq!(
        denied_by(&p.verdict(&tcp_in(agent("n1", 1)))),
        Some((
            "CiliumNetworkPolicy prober-system/deny-all-ingress".into(),
            None
        ))
    );
    assert!(denied_by(&p.verdict(&tcp_in(host("n1", 1, false)))).is_some());
    assert_eq!(p.verdict(&tcp_in(host("n2", 2, true))), Verdict::Allowed);
    assert_eq!(p.verdict(&tcp_out(agent("n1", 1))), Verdict::Allowed);
    let allow_port = "
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: l4-rule, namespace: prober-system}
spec:
  endpointSelector: {matchLabels: {'k8s:app.kubernetes.io/name': prober}}
  ingress:
  - fromEndpoints: [{matchLabels: {app.kubernetes.io/name: prober}}]
    toPorts: [{ports: [{port: '9917', protocol: TCP}]}]
  - fromEntities: [remote-node]
";
    let p = policies(&[CILIUM_DENY_ALL_INGRESS, allow_port]);
    assert_eq!(p.verdict(&tcp_in(agent("n1", 1))), Verdict::Allowed);
    assert_eq!(p.verdict(&tcp_in(host("n1", 1, false))), Verdict::Allowed);
    assert!(
        denied_by(&p.verdict(&flow(
            Dir::Ingress,
            agent("n1", 1),
            Protocol::Udp,
            Some(9917)
        )))
        .is_some()
    );
}

#[test]
fn cilium_deny_wins_over_every_allow() {
    let p = policies(&[CILIUM_LOCKDOWN]);
    assert_eq!(p.verdict(&tcp_in(agent("n1", 1))), Verdict::Allowed);
    let cluster = CILIUM_LOCKDOWN.replace("fromEntities: [world]", "fromEntities: [cluster]");
    let p = policies(&[&cluster]);
    assert_eq!(
        denied_by(&p.verdict(&tcp_in(agent("n1", 1)))),
        Some((
            "CiliumClusterwideNetworkPolicy external-lockdown".into(),
            None
        ))
    );
    // A Kubernetes allow-all cannot override it either.
    let p = policies(&[&cluster, ALLOW_ALL_INGRESS]);
    assert!(denied_by(&p.verdict(&tcp_in(agent("n1", 1)))).is_some());
}

#[test]
fn cilium_l7_rules_are_unknown_only_on_their_ports() {
    // The service-mesh guide's default deny: egress only to kube-dns on 53/UDP with DNS rules.
    let dd = "
apiVersion: cilium.io/v2
kind: CiliumClusterwideNetworkPolicy
metadata: {name: default-deny}
spec:
  endpointSelector:
    matchExpressions: [{key: io.kubernetes.pod.namespace, operator: NotIn, values: [kube-system]}]
  egress:
  - toEndpoints: [{matchLabels: {io.kubernetes.pod.namespace: kube-system, k8s-app: kube-dns}}]
    toPorts: [{ports: [{port: '53', protocol: UDP}], rules: {dns: [{matchPattern: '*'}]}}]
";
    let p = policies(&[dd]);
    assert!(denied_by(&p.verdict(&tcp_out(agent("n1", 1)))).is_some());
    assert_eq!(p.verdict(&tcp_in(agent("n1", 1))), Verdict::Allowed);
    let dns = flow(
        Dir::Egress,
        Peer::Pod {
            ip: Ipv4Addr::new(10, 244, 1, 53).into(),
        },
        Protocol::Udp,
        Some(53),
    );
    assert!(matches!(p.verdict(&dns), Verdict::Unknown(_)));
}

#[test]
fn staged_and_unknown_kinds_are_noted_not_evaluated() {
    let staged = "
apiVersion: projectcalico.org/v3
kind: StagedGlobalNetworkPolicy
metadata: {name: staged-deny}
spec: {selector: all(), types: [Ingress]}
";
    let p = Policies::new(&[obj(staged)], Agents::deployed());
    assert!(p.is_empty());
    assert_eq!(p.notes.len(), 1, "{:?}", p.notes);
    assert!(p.notes[0].contains("not enforced"), "{:?}", p.notes);
    assert_eq!(p.verdict(&tcp_in(agent("n1", 1))), Verdict::Allowed);
}

// --- IP families: a policy judges an IPv6 flow by its IPv6 addresses ---

/// Ingress to the agents from the cluster's IPv4 ranges alone: the dual-stack mistake.
pub(in crate::diagnose) const ALLOW_IPV4_ONLY: &str = "
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-cluster-ipv4, namespace: prober-system}
spec:
  podSelector: {}
  policyTypes: [Ingress]
  ingress:
  - from:
    - ipBlock: {cidr: 10.244.0.0/16}
    - ipBlock: {cidr: 192.168.56.0/24}
";

#[test]
fn an_ipv4_ip_block_admits_ipv4_peers_and_never_ipv6_ones() {
    let p = policies(&[ALLOW_IPV4_ONLY]);
    assert_eq!(p.verdict(&tcp_in(agent("n1", 1))), Verdict::Allowed);
    let v6_agent = Peer::Agent {
        node: "n1".into(),
        ip: "fd00:10:244:1::2".parse().unwrap(),
    };
    assert!(denied_by(&p.verdict(&tcp_in(v6_agent.clone()))).is_some());
    let six = ALLOW_IPV4_ONLY.replace(
        "    - ipBlock: {cidr: 192.168.56.0/24}\n",
        "    - ipBlock: {cidr: 192.168.56.0/24}\n    - ipBlock: {cidr: \"fd00:10:244::/56\"}\n",
    );
    assert_eq!(
        policies(&[&six]).verdict(&tcp_in(v6_agent)),
        Verdict::Allowed
    );
}

#[test]
fn cilium_world_of_one_family_is_the_outside_addresses_of_that_family() {
    let outside = |ip: &str| Peer::Outside {
        ip: ip.parse().unwrap(),
        apiserver: false,
    };
    for (entity, v4, v6) in [("world-ipv4", true, false), ("world-ipv6", false, true)] {
        assert_eq!(
            cilium::entity(entity, &outside("203.0.113.9")),
            Tri::from_bool(v4),
            "{entity}"
        );
        assert_eq!(
            cilium::entity(entity, &outside("2001:db8::9")),
            Tri::from_bool(v6),
            "{entity}"
        );
    }
}

#[test]
fn a_calico_rule_of_one_ip_version_judges_that_familys_flows_only() {
    // The same probe into n2's pod agent from n1's, over IPv6.
    let v6_in = Flow {
        ip: "fd00:10:244:2::2".parse().unwrap(),
        ..tcp_in(Peer::Agent {
            node: "n1".into(),
            ip: "fd00:10:244:1::2".parse().unwrap(),
        })
    };
    for (version, v4_denied, v6_denied) in [(4, true, false), (6, false, true)] {
        let one = CALICO_DENY_PORT.replace(
            "    protocol: TCP\n",
            &format!("    protocol: TCP\n    ipVersion: {version}\n"),
        );
        let p = policies(&[&one]);
        assert_eq!(
            denied_by(&p.verdict(&tcp_in(agent("n1", 1)))).is_some(),
            v4_denied,
            "ipVersion {version}, IPv4"
        );
        assert_eq!(
            denied_by(&p.verdict(&v6_in)).is_some(),
            v6_denied,
            "ipVersion {version}, IPv6"
        );
    }
}

// --- Hostile input: a policy read from the API or an inventory is bounded, never a crash ---

/// A Calico policy selecting with `sel` and allowing ingress from `sel`.
fn calico_selecting(sel: &str) -> PolicyObject {
    let yaml = format!(
        "apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {{name: hostile}}
spec:
  selector: \"{sel}\"
  types: [Ingress]
  ingress: [{{action: Allow, source: {{selector: \"{sel}\"}}}}]
"
    );
    obj(&yaml)
}

#[test]
fn hostile_calico_selectors_are_noted_and_never_overflow_the_stack() {
    // The issue's three shapes: 40,000 `!`, 20,000 nested parentheses, 100,000 `&&` terms.
    for sel in [
        format!("{}all()", "!".repeat(40_000)),
        format!("{}all(){}", "(".repeat(20_000), ")".repeat(20_000)),
        vec!["all()"; 100_000].join(" && "),
    ] {
        let p = Policies::new(&[calico_selecting(&sel)], Agents::deployed());
        let selecting = p.selecting();
        assert_eq!(selecting.len(), 1, "{:?}", p.notes);
        let Tri::Unknown(why) = &selecting[0].1 else {
            panic!("{:?}", selecting[0].1);
        };
        // The note says why without quoting kilobytes of selector.
        assert!(why.len() < 400, "{} bytes: {}", why.len(), &why[..400]);
        assert!(matches!(
            p.verdict(&tcp_in(agent("n1", 1))),
            Verdict::Unknown(_)
        ));
        drop(p);
    }
}

#[test]
fn a_long_flat_calico_selector_within_bounds_still_evaluates() {
    let long = vec!["has(app.kubernetes.io/name)"; 300].join(" && ");
    let nested = format!("{}all(){}", "(".repeat(30), ")".repeat(30));
    let negated = format!("{}all()", "!".repeat(30));
    for (sel, want) in [(long, Tri::Yes), (nested, Tri::Yes), (negated, Tri::Yes)] {
        let p = Policies::new(&[calico_selecting(&sel)], Agents::deployed());
        assert!(p.notes.is_empty(), "{:?}", p.notes);
        assert_eq!(p.selecting()[0].1, want, "{sel}");
    }
}

#[test]
fn oversized_label_selectors_are_noted_not_evaluated() {
    let many = (0..5_000)
        .map(|i| format!("{{key: k{i}, operator: DoesNotExist}}"))
        .collect::<Vec<_>>()
        .join(", ");
    let values = (0..5_000)
        .map(|i| format!("v{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let k8s = format!(
        "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {{name: huge, namespace: prober-system}}
spec: {{podSelector: {{matchExpressions: [{many}]}}, policyTypes: [Ingress]}}
"
    );
    let anp = format!(
        "apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {{name: huge}}
spec:
  priority: 10
  subject: {{namespaces: {{matchExpressions: [{{key: a, operator: NotIn, values: [{values}]}}]}}}}
  ingress: [{{action: Deny, from: [{{namespaces: {{}}}}]}}]
"
    );
    let cilium = format!(
        "apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {{name: huge, namespace: prober-system}}
spec:
  endpointSelector: {{matchLabels: {{{}}}}}
  ingress: [{{fromEntities: [cluster]}}]
",
        (0..5_000)
            .map(|i| format!("k{i}: v"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for yaml in [k8s, anp, cilium] {
        let p = Policies::new(&[obj(&yaml)], Agents::deployed());
        // Kept, with its selection "cannot evaluate", as an unreadable selector is.
        let selecting = p.selecting();
        assert_eq!(selecting.len(), 1, "{yaml:.120}: {:?}", p.notes);
        let Tri::Unknown(why) = &selecting[0].1 else {
            panic!("{yaml:.120}: {:?}", selecting[0].1);
        };
        assert!(why.contains("more than"), "{why}");
        assert!(why.len() < 400, "{why}");
    }
}

#[test]
fn an_anp_priority_out_of_range_is_named_not_called_missing() {
    let anp = |priority: &str| {
        format!(
            "apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {{name: odd}}
spec:
  {priority}
  subject: {{namespaces: {{}}}}
  ingress: [{{action: Deny, from: [{{namespaces: {{}}}}]}}]
"
        )
    };
    for (field, want) in [
        (
            "priority: 1e40",
            "spec.priority 1e+40 is not an integer from 0 to 1000",
        ),
        (
            "priority: -1",
            "spec.priority -1 is not an integer from 0 to 1000",
        ),
        (
            "priority: 2.5",
            "spec.priority 2.5 is not an integer from 0 to 1000",
        ),
        ("", "spec.priority missing"),
    ] {
        let p = Policies::new(&[obj(&anp(field))], Agents::deployed());
        assert_eq!(p.notes.len(), 1, "{field}");
        assert!(p.notes[0].ends_with(want), "{field}: {}", p.notes[0]);
    }
}
