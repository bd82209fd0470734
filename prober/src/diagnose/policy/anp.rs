//! `policy.networking.k8s.io/v1alpha1` `AdminNetworkPolicy` and `BaselineAdminNetworkPolicy`: a
//! cluster-scoped `subject` (`namespaces`, or `pods` with a namespace and a pod selector), rules
//! with an `action` checked in order, the first match deciding. ANPs go before every
//! `NetworkPolicy`, the lowest `priority` value first; Allow and Deny decide, Pass leaves the
//! decision to `NetworkPolicies` and the baseline. The BANP (Allow, Deny) applies only to pods no
//! `NetworkPolicy` isolates. Peers: `namespaces`, `pods`, and on egress `nodes` and `networks`;
//! ports: `portNumber`, `portRange`, `namedPort`.

use serde_json::Value;

use super::selector::LabelSelector;
use super::{
    Action, Agents, Compiled, Cond, Family, Namespaces, PortSpec, Rule, Selector, Tri, cidrs,
    policy_ref, protocol,
};
use crate::inventory::PolicyObject;

pub(super) fn compile(o: &PolicyObject, agents: &Agents) -> Result<Compiled, String> {
    let id = policy_ref(o);
    let spec = &o.spec;
    let family = if o.kind == "AdminNetworkPolicy" {
        // The API's range; a number outside it (1e40, -1, 2.5) is named as it is, not as
        // missing.
        let priority = match spec.get("priority").filter(|v| !v.is_null()) {
            None => return Err(format!("{id}: spec.priority missing")),
            Some(v) => v
                .as_i64()
                .filter(|p| (0..=1000).contains(p))
                .ok_or_else(|| {
                    format!("{id}: spec.priority {v} is not an integer from 0 to 1000")
                })?,
        };
        Family::Anp { priority }
    } else {
        Family::Banp
    };
    let selects = match subject(spec.get("subject"), agents) {
        Ok(t) => t,
        Err(e) => Tri::Unknown(format!("{id}: subject: {e}")),
    };
    let section = |name: &str, peers: &str| -> Option<Vec<Rule>> {
        let list = spec.get(name).and_then(Value::as_array)?;
        (!list.is_empty()).then(|| {
            list.iter()
                .enumerate()
                .map(|(i, r)| {
                    let rule_name = r
                        .get("name")
                        .and_then(Value::as_str)
                        .map_or_else(|| format!("{name}[{i}]"), str::to_string);
                    let (action, cond) = match rule(r, peers) {
                        Ok(x) => x,
                        Err(e) => (
                            Action::Deny,
                            Cond::Unknown(format!("{id}: rule {rule_name}: {e}")),
                        ),
                    };
                    Rule {
                        action,
                        name: Some(rule_name),
                        cond,
                    }
                })
                .collect()
        })
    };
    Ok(Compiled {
        rules: [section("ingress", "from"), section("egress", "to")],
        id,
        family,
        selects,
        default_deny: [false, false],
    })
}

fn subject(v: Option<&Value>, agents: &Agents) -> Result<Tri, String> {
    let v = v.ok_or("missing")?;
    let e = agents.endpoint();
    if let Some(ns) = v.get("namespaces") {
        let s = LabelSelector::parse(ns, "namespaces")?;
        return Ok(Tri::from_bool(s.matches(e.namespace_labels)));
    }
    if let Some(p) = v.get("pods") {
        let ns = LabelSelector::parse(
            p.get("namespaceSelector").unwrap_or(&Value::Null),
            "pods.namespaceSelector",
        )?;
        let pods = LabelSelector::parse(
            p.get("podSelector").unwrap_or(&Value::Null),
            "pods.podSelector",
        )?;
        return Ok(Tri::from_bool(
            ns.matches(e.namespace_labels) && pods.matches(e.labels),
        ));
    }
    Err("neither namespaces nor pods".into())
}

fn rule(r: &Value, peers_field: &str) -> Result<(Action, Cond), String> {
    let action = match r.get("action").and_then(Value::as_str) {
        Some("Allow") => Action::Allow,
        Some("Deny") => Action::Deny,
        Some("Pass") => Action::Pass,
        other => return Err(format!("action {other:?} cannot be evaluated")),
    };
    let peers = r
        .get(peers_field)
        .and_then(Value::as_array)
        .ok_or_else(|| format!("{peers_field} missing"))?
        .iter()
        .map(peer)
        .collect::<Result<Vec<_>, _>>()?;
    Ok((
        action,
        Cond::All(vec![Cond::AnyOf(peers), ports(r.get("ports"))?]),
    ))
}

fn peer(p: &Value) -> Result<Cond, String> {
    if let Some(ns) = p.get("namespaces") {
        // Early v1alpha1 wrapped the selector (`namespaceSelector`, `sameLabels`, ...).
        if ns.get("sameLabels").is_some() || ns.get("notSameLabels").is_some() {
            return Err("namespaces.sameLabels/notSameLabels cannot be evaluated".into());
        }
        let sel = ns.get("namespaceSelector").unwrap_or(ns);
        return Ok(Cond::PeerPod {
            namespaces: Namespaces::Selected(Selector::K8s(LabelSelector::parse(
                sel,
                "namespaces",
            )?)),
            pods: None,
        });
    }
    if let Some(pods) = p.get("pods") {
        let ns = pods
            .get("namespaceSelector")
            .or_else(|| {
                pods.get("namespaces")
                    .and_then(|n| n.get("namespaceSelector"))
            })
            .unwrap_or(&Value::Null);
        return Ok(Cond::PeerPod {
            namespaces: Namespaces::Selected(Selector::K8s(LabelSelector::parse(
                ns,
                "pods.namespaceSelector",
            )?)),
            pods: Some(Selector::K8s(LabelSelector::parse(
                pods.get("podSelector").unwrap_or(&Value::Null),
                "pods.podSelector",
            )?)),
        });
    }
    if let Some(nodes) = p.get("nodes") {
        return Ok(Cond::PeerNode(Selector::K8s(LabelSelector::parse(
            nodes, "nodes",
        )?)));
    }
    if let Some(nets) = p.get("networks") {
        return Ok(Cond::PeerNet {
            nets: cidrs(Some(nets), "networks")?,
            except: Vec::new(),
        });
    }
    Err(format!("peer {p} cannot be evaluated"))
}

fn ports(v: Option<&Value>) -> Result<Cond, String> {
    let Some(list) = v.and_then(Value::as_array).filter(|l| !l.is_empty()) else {
        return Ok(Cond::True);
    };
    let mut any = Vec::new();
    for p in list {
        let range = |proto: Option<&Value>, lo: Option<&Value>, hi: Option<&Value>| {
            let proto = proto.and_then(Value::as_str).unwrap_or("TCP");
            let num = |v: Option<&Value>| {
                v.and_then(Value::as_u64)
                    .and_then(|n| u16::try_from(n).ok())
            };
            match (protocol(proto), num(lo), num(hi)) {
                (None, _, _) => Ok(Cond::False),
                (Some(p), Some(lo), Some(hi)) => Ok(Cond::Ports(vec![PortSpec::Range {
                    protocol: Some(p),
                    lo,
                    hi,
                }])),
                _ => Err(format!("port {p} cannot be evaluated")),
            }
        };
        if let Some(n) = p.get("portNumber") {
            any.push(range(n.get("protocol"), n.get("port"), n.get("port"))?);
        } else if let Some(r) = p.get("portRange") {
            any.push(range(r.get("protocol"), r.get("start"), r.get("end"))?);
        } else if let Some(name) = p.get("namedPort").and_then(Value::as_str) {
            any.push(Cond::Ports(vec![PortSpec::Named {
                protocol: None,
                name: name.to_string(),
            }]));
        } else {
            return Err(format!("port {p} cannot be evaluated"));
        }
    }
    Ok(Cond::AnyOf(any))
}
