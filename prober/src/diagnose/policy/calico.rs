//! Calico `GlobalNetworkPolicy` and `NetworkPolicy` (`projectcalico.org/v3`, and the same spec
//! as stored in `crd.projectcalico.org/v1`): `selector` (a namespaced policy: within its
//! namespace; a global one: with `namespaceSelector`) picks endpoints, `types` the directions
//! (default: Ingress, Egress when only egress rules exist, both when both do), rules in order
//! with Allow, Deny, Pass (next tier) or Log (go on). Policies run by `order`, lowest first
//! (none: last), Kubernetes `NetworkPolicies` among them at order 1000; once a policy of the tier
//! applies to an endpoint and none decides, the packet is dropped.
//!
//! Endpoints see Calico's labels besides their own: `projectcalico.org/namespace`,
//! `projectcalico.org/serviceaccount`, `projectcalico.org/orchestrator` and their namespace's
//! labels as `pcns.*`; namespaces see `projectcalico.org/name`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::calico_selector::Expr;
use super::{
    Action, Agents, Compiled, Cond, Endpoint, Family, Namespaces, PortSpec, Rule, Selector, Tri,
    cidrs, items, policy_ref, protocol,
};
use crate::inventory::PolicyObject;

/// A pod's labels as Calico's selectors see them.
pub(super) fn pod_labels(e: &Endpoint<'_>) -> BTreeMap<String, String> {
    let mut l = e.labels.clone();
    l.insert("projectcalico.org/namespace".into(), e.namespace.into());
    l.insert("projectcalico.org/orchestrator".into(), "k8s".into());
    l.insert(
        "projectcalico.org/serviceaccount".into(),
        e.service_account.into(),
    );
    for (k, v) in namespace_labels(e) {
        l.insert(format!("pcns.{k}"), v);
    }
    l
}

/// A namespace's labels as Calico's namespace selectors see them.
pub(super) fn namespace_labels(e: &Endpoint<'_>) -> BTreeMap<String, String> {
    let mut l = e.namespace_labels.clone();
    l.insert("projectcalico.org/name".into(), e.namespace.into());
    l
}

fn selector(v: Option<&Value>) -> Result<Option<Expr>, String> {
    match v.and_then(Value::as_str) {
        None => Ok(None),
        Some(s) => Expr::parse(s).map(Some).map_err(|e| e.to_string()),
    }
}

pub(super) fn compile(o: &PolicyObject, agents: &Agents) -> Compiled {
    let id = policy_ref(o);
    let spec = &o.spec;
    let global = o.kind == "GlobalNetworkPolicy";
    let order = spec.get("order").and_then(Value::as_f64);
    let tier = spec
        .get("tier")
        .and_then(Value::as_str)
        .unwrap_or("default")
        .to_string();
    let e = agents.endpoint();
    let selects = (|| -> Result<Tri, String> {
        if !global && o.metadata.namespace.as_deref() != Some(agents.namespace.as_str()) {
            return Ok(Tri::No);
        }
        if spec
            .get("serviceAccountSelector")
            .and_then(Value::as_str)
            .is_some_and(|s| !s.trim().is_empty())
        {
            return Ok(Tri::Unknown(format!(
                "{id}: serviceAccountSelector (service account labels are not read)"
            )));
        }
        let pods = selector(spec.get("selector"))?.unwrap_or(Expr::All);
        let ns = selector(spec.get("namespaceSelector"))?.unwrap_or(Expr::All);
        Ok(Tri::from_bool(
            pods.matches(&pod_labels(&e)) && ns.matches(&namespace_labels(&e)),
        ))
    })()
    .unwrap_or_else(|err| Tri::Unknown(format!("{id}: {err}")));
    let present = |name: &str| {
        spec.get(name)
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
    };
    let types: Vec<String> = match spec.get("types").and_then(Value::as_array) {
        Some(t) => t
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        None => match (present("ingress"), present("egress")) {
            (_, false) => vec!["Ingress".into()],
            (false, true) => vec!["Egress".into()],
            (true, true) => vec!["Ingress".into(), "Egress".into()],
        },
    };
    let own_ns = (!global).then(|| o.metadata.namespace.clone().unwrap_or_default());
    let section = |name: &str, ty: &str, ingress: bool| -> Option<Vec<Rule>> {
        types.iter().any(|t| t == ty).then(|| {
            items(spec, name)
                .map(|(i, r)| {
                    let (action, cond) = match rule(r, ingress, own_ns.as_deref(), agents) {
                        Ok(x) => x,
                        Err(err) => (
                            Action::Deny,
                            Cond::Unknown(format!("{id}: {name}[{i}]: {err}")),
                        ),
                    };
                    Rule {
                        action,
                        name: Some(format!("{name}[{i}] ({})", action_name(action))),
                        cond,
                    }
                })
                .collect()
        })
    };
    Compiled {
        rules: [
            section("ingress", "Ingress", true),
            section("egress", "Egress", false),
        ],
        id,
        family: Family::Calico { order, tier },
        selects,
        default_deny: [true, true],
    }
}

fn action_name(a: Action) -> &'static str {
    match a {
        Action::Allow => "Allow",
        Action::Deny => "Deny",
        Action::Pass => "Pass",
        Action::Log => "Log",
    }
}

fn rule(
    r: &Value,
    ingress: bool,
    own_ns: Option<&str>,
    agents: &Agents,
) -> Result<(Action, Cond), String> {
    let action = match r.get("action").and_then(Value::as_str) {
        Some("Allow") => Action::Allow,
        Some("Deny") => Action::Deny,
        Some("Pass") => Action::Pass,
        Some("Log") => Action::Log,
        other => return Err(format!("action {other:?} cannot be evaluated")),
    };
    if r.get("http").is_some_and(|v| !v.is_null()) {
        return Err("http cannot be evaluated".into());
    }
    let mut all = Vec::new();
    // A rule of one IP version matches the flows of that family only.
    match r.get("ipVersion").filter(|v| !v.is_null()) {
        None => {}
        Some(v) => match v.as_u64() {
            Some(4) => all.push(Cond::Ipv6(false)),
            Some(6) => all.push(Cond::Ipv6(true)),
            _ => return Err(format!("ipVersion {v} is neither 4 nor 6")),
        },
    }
    let proto = |v: &Value| match v
        .as_str()
        .map(str::to_string)
        .or_else(|| v.as_u64().map(|n| n.to_string()))
    {
        Some(p) => protocol(&p).map_or(Cond::False, Cond::Protocol),
        None => Cond::False,
    };
    if let Some(p) = r.get("protocol").filter(|v| !v.is_null()) {
        all.push(proto(p));
    }
    if let Some(p) = r.get("notProtocol").filter(|v| !v.is_null()) {
        all.push(Cond::Not(Box::new(proto(p))));
    }
    if let Some(icmp) = r.get("icmp").filter(|v| !v.is_null()) {
        // The probes' ICMP is an echo request (type 8).
        all.push(Cond::All(vec![
            Cond::Protocol(crate::model::Protocol::Icmp),
            if icmp
                .get("type")
                .and_then(Value::as_u64)
                .is_none_or(|t| t == 8)
            {
                Cond::True
            } else {
                Cond::False
            },
        ]));
    }
    let empty = Value::Null;
    let source = r.get("source").unwrap_or(&empty);
    let destination = r.get("destination").unwrap_or(&empty);
    let (peer, local) = if ingress {
        (source, destination)
    } else {
        (destination, source)
    };
    all.push(peer_side(peer, own_ns)?);
    all.push(local_side(local, own_ns, agents)?);
    all.push(ports(destination.get("ports"))?);
    if let Some(not) = destination.get("notPorts").filter(|v| !v.is_null()) {
        all.push(Cond::Not(Box::new(ports(Some(not))?)));
    }
    if source.get("ports").is_some_and(|v| !v.is_null())
        || source.get("notPorts").is_some_and(|v| !v.is_null())
    {
        all.push(Cond::Unknown(
            "source ports (a probe's source port is not planned)".into(),
        ));
    }
    Ok((action, Cond::All(all)))
}

fn refuse_unread(side: &Value) -> Result<(), String> {
    for field in ["serviceAccounts", "services"] {
        if side.get(field).is_some_and(|v| !v.is_null()) {
            return Err(format!("{field} cannot be evaluated"));
        }
    }
    Ok(())
}

/// The peer's side of a rule: its nets and selectors.
fn peer_side(side: &Value, own_ns: Option<&str>) -> Result<Cond, String> {
    refuse_unread(side)?;
    let mut all = Vec::new();
    if let Some(nets) = side.get("nets").filter(|v| !v.is_null()) {
        all.push(Cond::PeerNet {
            nets: cidrs(Some(nets), "nets")?,
            except: Vec::new(),
        });
    }
    if let Some(nets) = side.get("notNets").filter(|v| !v.is_null()) {
        all.push(Cond::Not(Box::new(Cond::PeerNet {
            nets: cidrs(Some(nets), "notNets")?,
            except: Vec::new(),
        })));
    }
    let namespaces = match (selector(side.get("namespaceSelector"))?, own_ns) {
        (Some(ns), _) => Namespaces::Selected(Selector::Calico(ns)),
        (None, Some(own)) => Namespaces::Named(own.to_string()),
        (None, None) => Namespaces::Any,
    };
    let sel = selector(side.get("selector"))?;
    if sel.is_some() || side.get("namespaceSelector").is_some() {
        all.push(Cond::PeerPod {
            namespaces: namespaces.clone(),
            pods: sel.map(Selector::Calico),
        });
    }
    if let Some(not) = selector(side.get("notSelector"))? {
        all.push(Cond::Not(Box::new(Cond::PeerPod {
            namespaces,
            pods: Some(Selector::Calico(not)),
        })));
    }
    Ok(Cond::All(all))
}

/// The agent's own side of a rule: decided now for selectors (the agents' labels are known),
/// per node for nets.
fn local_side(side: &Value, own_ns: Option<&str>, agents: &Agents) -> Result<Cond, String> {
    refuse_unread(side)?;
    let e = agents.endpoint();
    let mut all = Vec::new();
    if let Some(nets) = side.get("nets").filter(|v| !v.is_null()) {
        all.push(Cond::LocalNet(cidrs(Some(nets), "nets")?));
    }
    if let Some(nets) = side.get("notNets").filter(|v| !v.is_null()) {
        all.push(Cond::Not(Box::new(Cond::LocalNet(cidrs(
            Some(nets),
            "notNets",
        )?))));
    }
    let in_ns = match (selector(side.get("namespaceSelector"))?, own_ns) {
        (Some(ns), _) => ns.matches(&namespace_labels(&e)),
        (None, Some(own)) => own == agents.namespace,
        (None, None) => true,
    };
    if let Some(sel) = selector(side.get("selector"))? {
        all.push(if in_ns && sel.matches(&pod_labels(&e)) {
            Cond::True
        } else {
            Cond::False
        });
    } else if side.get("namespaceSelector").is_some() && !in_ns {
        all.push(Cond::False);
    }
    if let Some(not) = selector(side.get("notSelector"))? {
        all.push(if in_ns && not.matches(&pod_labels(&e)) {
            Cond::False
        } else {
            Cond::True
        });
    }
    Ok(Cond::All(all))
}

/// `destination.ports`: numbers, `"lo:hi"` ranges, or named ports.
fn ports(v: Option<&Value>) -> Result<Cond, String> {
    let Some(list) = v.and_then(Value::as_array).filter(|l| !l.is_empty()) else {
        return Ok(Cond::True);
    };
    let mut specs = Vec::new();
    for p in list {
        let spec = match p {
            Value::Number(n) => {
                let n = n
                    .as_u64()
                    .and_then(|n| u16::try_from(n).ok())
                    .ok_or_else(|| format!("port {n} is not a port"))?;
                PortSpec::Range {
                    protocol: None,
                    lo: n,
                    hi: n,
                }
            }
            Value::String(s) => {
                let range = s
                    .split_once(':')
                    .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)));
                match (s.parse::<u16>(), range) {
                    (Ok(n), _) => PortSpec::Range {
                        protocol: None,
                        lo: n,
                        hi: n,
                    },
                    (_, Some((lo, hi))) => PortSpec::Range {
                        protocol: None,
                        lo,
                        hi,
                    },
                    _ => PortSpec::Named {
                        protocol: None,
                        name: s.clone(),
                    },
                }
            }
            other => return Err(format!("port {other} cannot be evaluated")),
        };
        specs.push(spec);
    }
    Ok(Cond::Ports(specs))
}
