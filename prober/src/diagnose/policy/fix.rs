//! The allow rule to add for the pod agents, in the language of the policy that denies them:
//! prober's own `NetworkPolicy` where policies add up, a Calico policy ordered before the deny,
//! an `AdminNetworkPolicy` of a higher priority; Cilium's deny rules win over every allow, so
//! there the deny itself must leave the agents out.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{Agents, Denial, PolicyRef};
use crate::runtime::kube::manifests::{self, AgentSpec};

/// The fix lines: a sentence, then a command that applies the allow policy.
pub(super) fn allow_fix(d: &Denial, by_rule: bool, agents: &Agents) -> Vec<String> {
    let p = &d.policy;
    let labels = selector_labels(agents);
    match (p.group.as_str(), p.kind.as_str()) {
        ("cilium.io", _) if by_rule => vec![format!(
            "Cilium's deny rules win over every allow: leave the pod agents out of {p}'s \
             endpointSelector (add matchExpressions [{{key: k8s:io.kubernetes.pod.namespace, \
             operator: NotIn, values: [{ns}]}}])",
            ns = agents.namespace
        )],
        ("cilium.io", _) => cilium(p, agents, &labels),
        ("projectcalico.org" | "crd.projectcalico.org", _) => calico(d, agents, &labels),
        ("policy.networking.k8s.io", "AdminNetworkPolicy") => anp(d, agents, &labels),
        _ => own(p, agents),
    }
}

/// Cilium's allows add up: a `CiliumNetworkPolicy` allowing everything to and from the agents.
fn cilium(p: &PolicyRef, agents: &Agents, labels: &BTreeMap<String, String>) -> Vec<String> {
    let allow = json!({
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": manifests::ALLOW_POLICY, "namespace": agents.namespace},
        "spec": {
            "endpointSelector": {"matchLabels": labels},
            "ingress": [{"fromEntities": ["all"]}],
            "egress": [{"toEntities": ["all"]}],
        },
    });
    vec![
        format!("allow the probes to and from the pod agents, which {p} selects:"),
        apply(&allow),
    ]
}

/// Calico's first Allow or Deny decides: a `GlobalNetworkPolicy` ordered just before the deny.
fn calico(d: &Denial, agents: &Agents, labels: &BTreeMap<String, String>) -> Vec<String> {
    let order = match d.rank.as_deref().and_then(|r| r.strip_prefix("order ")) {
        Some(o) => o.parse::<f64>().map_or(999.0, |o| o - 1.0),
        None => 999.0,
    };
    let selector = labels
        .iter()
        .map(|(k, v)| format!("{k} == \"{v}\""))
        .chain([format!(
            "projectcalico.org/namespace == \"{}\"",
            agents.namespace
        )])
        .collect::<Vec<_>>()
        .join(" && ");
    let allow = json!({
        "apiVersion": "projectcalico.org/v3",
        "kind": "GlobalNetworkPolicy",
        "metadata": {"name": manifests::ALLOW_POLICY},
        "spec": {
            "order": order,
            "selector": selector,
            "types": ["Ingress", "Egress"],
            "ingress": [{"action": "Allow"}],
            "egress": [{"action": "Allow"}],
        },
    });
    vec![
        format!(
            "allow the probes to and from the pod agents in a Calico policy ordered before {} \
             (order {order}):",
            d.policy
        ),
        apply(&allow),
    ]
}

/// The lowest priority value wins: an `AdminNetworkPolicy` one above the deny's, or, when the
/// deny already has priority 0, the agents' namespace left out of its subject.
fn anp(d: &Denial, agents: &Agents, labels: &BTreeMap<String, String>) -> Vec<String> {
    let p = &d.policy;
    let priority = d
        .rank
        .as_deref()
        .and_then(|r| r.strip_prefix("priority "))
        .and_then(|r| r.parse::<i64>().ok())
        .unwrap_or(0);
    if priority == 0 {
        return vec![format!(
            "{p} has the highest priority (0): leave the pod agents' namespace {} out of its \
             subject",
            agents.namespace
        )];
    }
    let allow = json!({
        "apiVersion": "policy.networking.k8s.io/v1alpha1",
        "kind": "AdminNetworkPolicy",
        "metadata": {"name": manifests::ALLOW_POLICY},
        "spec": {
            "priority": priority - 1,
            "subject": {"pods": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": agents.namespace}},
                "podSelector": {"matchLabels": labels},
            }},
            "ingress": [{"name": "prober-probes", "action": "Allow", "from": [{"namespaces": {}}]}],
            "egress": [{"name": "prober-probes", "action": "Allow",
                "to": [{"namespaces": {}}, {"networks": ["0.0.0.0/0"]}]}],
        },
    });
    vec![
        format!(
            "allow the probes to and from the pod agents in an AdminNetworkPolicy of a higher \
             priority than {p} (priority {}):",
            priority - 1
        ),
        apply(&allow),
    ]
}

/// Kubernetes `NetworkPolicies` add up, and one in the agents' namespace overrides the
/// `BaselineAdminNetworkPolicy`: prober's own allow policy is the fix.
fn own(p: &PolicyRef, agents: &Agents) -> Vec<String> {
    let spec = AgentSpec {
        namespace: agents.namespace.clone(),
        ..AgentSpec::default()
    };
    let mut allow = serde_json::to_value(manifests::network_policy(&spec)).unwrap_or(Value::Null);
    allow["apiVersion"] = "networking.k8s.io/v1".into();
    allow["kind"] = "NetworkPolicy".into();
    vec![
        format!(
            "apply prober's own allow policy (NetworkPolicy {}/{}, also in deploy/base), which \
             admits the probes to and from the pod agents past {p}:",
            agents.namespace,
            manifests::ALLOW_POLICY
        ),
        apply(&allow),
    ]
}

/// The labels that pick the pod agents out: their name and component.
fn selector_labels(agents: &Agents) -> BTreeMap<String, String> {
    agents
        .labels
        .iter()
        .filter(|(k, _)| {
            matches!(
                k.as_str(),
                "app.kubernetes.io/name" | "app.kubernetes.io/component"
            )
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A command that applies `object`: its JSON on one line, in single quotes (namespace names and
/// the agents' labels hold none).
fn apply(object: &Value) -> String {
    format!("echo '{object}' | kubectl apply -f -")
}
