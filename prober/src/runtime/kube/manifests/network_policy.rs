//! The agents' own `NetworkPolicy`: it admits the probes to and from the pod agents, so that a
//! namespace default-deny (stamped on every namespace by an admission policy, say) does not
//! break probing. Kubernetes policies add up, so it can only widen what the agents may do.
//!
//! Every ingress and every egress is allowed: the agents serve only their port (TCP and UDP)
//! and answer ICMP, and a `NetworkPolicy` cannot name ICMP (its ports are TCP, UDP and SCTP),
//! so a rule limited to the agent's port would leave the ICMP probes denied. It cannot override
//! cluster-scoped denies (`AdminNetworkPolicy`, Calico's `GlobalNetworkPolicy` ordered before
//! it, Cilium's deny rules).

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::{ALLOW_POLICY, AgentSpec, meta, pod_agent_labels};

/// The allow policy for the pod agents in `spec`'s namespace (the host agents are on the host
/// network, where no pod policy applies). It selects every pod agent there, not only this
/// run's: what it allows is probing, and diagnosis (which knows the agents by name and
/// component) then sees it select them.
#[must_use]
pub fn network_policy(spec: &AgentSpec) -> NetworkPolicy {
    let mut selected = pod_agent_labels(spec);
    selected.remove(super::MANAGED_BY.0);
    selected.remove(super::RUN_LABEL);
    NetworkPolicy {
        metadata: meta(spec, &spec.name(ALLOW_POLICY), "network-policy", true),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(selected),
                ..LabelSelector::default()
            }),
            policy_types: Some(vec!["Ingress".into(), "Egress".into()]),
            ingress: Some(vec![NetworkPolicyIngressRule::default()]),
            egress: Some(vec![NetworkPolicyEgressRule::default()]),
        }),
    }
}

/// The allow policy as discovery would have read it once it exists: what a run adds to the
/// inventory after creating it, so diagnosis evaluates the policies that are in force.
#[must_use]
pub fn as_read(spec: &AgentSpec) -> crate::inventory::PolicyObject {
    let np = network_policy(spec);
    crate::inventory::PolicyObject {
        api_version: "networking.k8s.io/v1".into(),
        kind: "NetworkPolicy".into(),
        metadata: crate::inventory::PolicyMeta {
            name: np.metadata.name.unwrap_or_default(),
            namespace: np.metadata.namespace,
            labels: np.metadata.labels.unwrap_or_default(),
        },
        spec: serde_json::to_value(np.spec).unwrap_or_default(),
    }
}
