//! Kubernetes `networking.k8s.io/v1` `NetworkPolicy`: a policy selects pods of its own namespace
//! (`podSelector`; `{}` is all of them) for the directions of its `policyTypes` (default:
//! Ingress, plus Egress when it has egress rules); a selected pod is isolated in that direction
//! and accepts only what some rule of some selecting policy allows. A rule allows its peers
//! (`podSelector`, `namespaceSelector`, both, or `ipBlock`; none: every peer) on its ports
//! (none: every port and protocol; a port's protocol defaults to TCP).

use serde_json::Value;

use super::selector::LabelSelector;
use super::{
    Action, Agents, Compiled, Cond, Family, Namespaces, PortSpec, Rule, Selector, Tri, cidrs,
    items, policy_ref, protocol,
};
use crate::inventory::PolicyObject;

pub(super) fn compile(o: &PolicyObject, agents: &Agents) -> Result<Compiled, String> {
    let id = policy_ref(o);
    let spec = &o.spec;
    let Some(ns) = o.metadata.namespace.clone() else {
        return Err(format!("{id}: a NetworkPolicy without a namespace"));
    };
    let selects = if ns == agents.namespace {
        match LabelSelector::parse(
            spec.get("podSelector").unwrap_or(&Value::Null),
            "podSelector",
        ) {
            Ok(s) => Tri::from_bool(s.matches(&agents.labels)),
            Err(e) => Tri::Unknown(format!("{id}: {e}")),
        }
    } else {
        Tri::No
    };
    let has_egress = spec
        .get("egress")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    let types: Vec<String> = match spec.get("policyTypes").and_then(Value::as_array) {
        Some(t) => t
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        None if has_egress => vec!["Ingress".into(), "Egress".into()],
        None => vec!["Ingress".into()],
    };
    let section = |name: &str, peers: &str, ty: &str| -> Option<Vec<Rule>> {
        types.iter().any(|t| t == ty).then(|| {
            items(spec, name)
                .map(|(i, r)| Rule {
                    action: Action::Allow,
                    name: Some(format!("{name}[{i}]")),
                    cond: rule(r, peers, &ns)
                        .unwrap_or_else(|e| Cond::Unknown(format!("{id}: {name}[{i}]: {e}"))),
                })
                .collect()
        })
    };
    Ok(Compiled {
        rules: [
            section("ingress", "from", "Ingress"),
            section("egress", "to", "Egress"),
        ],
        id,
        family: Family::K8s,
        selects,
        default_deny: [true, true],
    })
}

fn rule(r: &Value, peers_field: &str, ns: &str) -> Result<Cond, String> {
    let peers = match r.get(peers_field).and_then(Value::as_array) {
        Some(list) if !list.is_empty() => Cond::AnyOf(
            list.iter()
                .map(|p| peer(p, ns))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        _ => Cond::True,
    };
    Ok(Cond::All(vec![peers, ports(r.get("ports"))?]))
}

fn peer(p: &Value, ns: &str) -> Result<Cond, String> {
    if let Some(block) = p.get("ipBlock") {
        let nets = cidrs(
            block
                .get("cidr")
                .map(|c| Value::Array(vec![c.clone()]))
                .as_ref(),
            "ipBlock.cidr",
        )?;
        let except = cidrs(block.get("except"), "ipBlock.except")?;
        return Ok(Cond::PeerNet { nets, except });
    }
    let pods = p
        .get("podSelector")
        .map(|s| LabelSelector::parse(s, "podSelector"))
        .transpose()?;
    let namespaces = match p.get("namespaceSelector") {
        Some(s) => {
            Namespaces::Selected(Selector::K8s(LabelSelector::parse(s, "namespaceSelector")?))
        }
        None => Namespaces::Named(ns.to_string()),
    };
    if pods.is_none() && matches!(namespaces, Namespaces::Named(_)) {
        return Err("a peer with neither a selector nor an ipBlock".into());
    }
    Ok(Cond::PeerPod {
        namespaces,
        pods: pods.map(Selector::K8s),
    })
}

/// A rule's `ports` (Kubernetes and the policy API's `portNumber` shape): any of them.
pub(super) fn ports(v: Option<&Value>) -> Result<Cond, String> {
    let Some(list) = v.and_then(Value::as_array).filter(|l| !l.is_empty()) else {
        return Ok(Cond::True);
    };
    let mut any = Vec::new();
    for p in list {
        let proto_name = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
        let Some(proto) = protocol(proto_name) else {
            // SCTP and the like: no probe uses them.
            any.push(Cond::False);
            continue;
        };
        let spec = match p.get("port") {
            None | Some(Value::Null) => {
                any.push(Cond::Protocol(proto));
                continue;
            }
            Some(Value::String(name)) => match name.parse::<u16>() {
                Ok(n) => PortSpec::Range {
                    protocol: Some(proto),
                    lo: n,
                    hi: n,
                },
                Err(_) => PortSpec::Named {
                    protocol: Some(proto),
                    name: name.clone(),
                },
            },
            Some(n) => {
                let lo = n
                    .as_u64()
                    .and_then(|n| u16::try_from(n).ok())
                    .ok_or_else(|| format!("port {n} is not a port"))?;
                let hi = match p.get("endPort").and_then(Value::as_u64) {
                    Some(e) => {
                        u16::try_from(e).map_err(|_| format!("endPort {e} is not a port"))?
                    }
                    None => lo,
                };
                PortSpec::Range {
                    protocol: Some(proto),
                    lo,
                    hi,
                }
            }
        };
        any.push(Cond::Ports(vec![spec]));
    }
    Ok(Cond::AnyOf(any))
}
