//! The network policies that can select the pod agents, read-only and kept as the API serves them.

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};

use super::list::{self, Found};
use super::{DiscoverError, api_err};
use crate::inventory::{PolicyMeta, PolicyObject};

/// One policy resource discovery reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicyKind {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    /// Read in the agents' namespace only (a namespaced policy elsewhere cannot select them).
    pub namespaced: bool,
}

const fn kind(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
) -> PolicyKind {
    PolicyKind {
        group,
        version,
        kind,
        plural,
        namespaced,
    }
}

/// Every policy kind read, in reading order. Calico's are served by its API server
/// (`projectcalico.org/v3`) and stored as CRDs (`crd.projectcalico.org/v1`, all there is without
/// the API server): the same objects, so a CRD kind is read only when its v3 kind is not served.
pub const KINDS: [PolicyKind; 11] = [
    kind(
        "networking.k8s.io",
        "v1",
        "NetworkPolicy",
        "networkpolicies",
        true,
    ),
    kind(
        "policy.networking.k8s.io",
        "v1alpha1",
        "AdminNetworkPolicy",
        "adminnetworkpolicies",
        false,
    ),
    kind(
        "policy.networking.k8s.io",
        "v1alpha1",
        "BaselineAdminNetworkPolicy",
        "baselineadminnetworkpolicies",
        false,
    ),
    kind(
        "projectcalico.org",
        "v3",
        "GlobalNetworkPolicy",
        "globalnetworkpolicies",
        false,
    ),
    kind(
        "crd.projectcalico.org",
        "v1",
        "GlobalNetworkPolicy",
        "globalnetworkpolicies",
        false,
    ),
    kind(
        "projectcalico.org",
        "v3",
        "NetworkPolicy",
        "networkpolicies",
        true,
    ),
    kind(
        "crd.projectcalico.org",
        "v1",
        "NetworkPolicy",
        "networkpolicies",
        true,
    ),
    kind(
        "projectcalico.org",
        "v3",
        "StagedGlobalNetworkPolicy",
        "stagedglobalnetworkpolicies",
        false,
    ),
    kind(
        "crd.projectcalico.org",
        "v1",
        "StagedGlobalNetworkPolicy",
        "stagedglobalnetworkpolicies",
        false,
    ),
    kind(
        "cilium.io",
        "v2",
        "CiliumClusterwideNetworkPolicy",
        "ciliumclusterwidenetworkpolicies",
        false,
    ),
    kind(
        "cilium.io",
        "v2",
        "CiliumNetworkPolicy",
        "ciliumnetworkpolicies",
        true,
    ),
];

/// What a read of `k` is called when it is refused (`list PLURAL.GROUP [in NS]`).
#[must_use]
pub fn what(k: &PolicyKind, namespace: &str) -> String {
    if k.namespaced {
        format!("list {}.{} in {namespace}", k.plural, k.group)
    } else {
        format!("list {}.{}", k.plural, k.group)
    }
}

/// One object as the inventory carries it: its kind, name, namespace, labels and spec.
fn object(k: &PolicyKind, o: DynamicObject) -> PolicyObject {
    PolicyObject {
        api_version: format!("{}/{}", k.group, k.version),
        kind: k.kind.to_string(),
        metadata: PolicyMeta {
            name: o.metadata.name.unwrap_or_default(),
            namespace: o.metadata.namespace,
            labels: o.metadata.labels.unwrap_or_default(),
        },
        spec: o.data.get("spec").cloned().unwrap_or_default(),
    }
}

/// Reads every policy kind that can select the pod agents in `namespace`: 404 (the API is not
/// served) is silence, 403 is added to `forbidden` (said as everything discovery may not read).
pub async fn read(
    client: &Client,
    namespace: &str,
    forbidden: &mut Vec<String>,
) -> Result<Vec<PolicyObject>, DiscoverError> {
    let mut out = Vec::new();
    let mut served_v3: Vec<&str> = Vec::new();
    for k in &KINDS {
        if k.group == "crd.projectcalico.org" && served_v3.contains(&k.plural) {
            continue;
        }
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(k.group, k.version, k.kind),
            k.plural,
        );
        let api: Api<DynamicObject> = if k.namespaced {
            Api::namespaced_with(client.clone(), namespace, &resource)
        } else {
            Api::all_with(client.clone(), &resource)
        };
        let what = what(k, namespace);
        let got = list::all(&api, &ListParams::default()).await;
        match list::found(got).map_err(api_err(what.clone()))? {
            Found::Yes(items) => {
                if k.group == "projectcalico.org" {
                    served_v3.push(k.plural);
                }
                out.extend(items.into_iter().map(|o| object(k, o)));
            }
            Found::Absent => {}
            Found::Forbidden => forbidden.push(what),
        }
    }
    Ok(out)
}
