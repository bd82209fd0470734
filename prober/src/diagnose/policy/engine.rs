//! The order the engines apply policies in: `AdminNetworkPolicies` by priority, then the
//! namespace layer (Kubernetes, Calico's tier or Cilium's), then the baseline; and the verdict on
//! a flow, a route and a probe.

use super::{
    Action, Agents, Compiled, Dir, Family, Flow, Peer, PolicyObject, PolicyRef, Route, Tri,
};
use super::{anp, calico, cilium, k8s};
use crate::model::Protocol;

/// Why a policy denies a flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub policy: PolicyRef,
    /// `order 1000`, `priority 10`, when the language ranks policies.
    pub rank: Option<String>,
    /// The deny rule's name, or `None` when the policy denies by default (it selects the agents
    /// and no rule allows the flow).
    pub rule: Option<String>,
    /// Further policies that select the agents in that direction and allow nothing of it.
    pub also: Vec<PolicyRef>,
    pub dir: Dir,
    /// The node of the pod agent it denies at.
    pub node: String,
    /// What the denied flow carries.
    pub protocol: Protocol,
    pub port: Option<u16>,
}

/// What the policies do to a flow or a probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    Denied(Denial),
    /// Some policy that may apply cannot be evaluated; says which and why.
    Unknown(String),
}

/// The policies of an inventory, compiled, with notes on what could not be evaluated.
#[derive(Debug, Clone, Default)]
pub struct Policies {
    list: Vec<Compiled>,
    agents: Option<Agents>,
    /// Objects not evaluated (staged, unknown kinds, unreadable specs), one sentence each.
    pub notes: Vec<String>,
}

impl Policies {
    /// Compiles `objects` for `agents`. An object of a kind this evaluator does not know, or
    /// whose spec it cannot read, is left out with a note.
    #[must_use]
    pub fn new(objects: &[PolicyObject], agents: Agents) -> Self {
        let mut list = Vec::new();
        let mut notes = Vec::new();
        for o in objects {
            let group = o.api_version.split('/').next().unwrap_or_default();
            let compiled = match (group, o.kind.as_str()) {
                ("networking.k8s.io", "NetworkPolicy") => k8s::compile(o, &agents),
                (
                    "policy.networking.k8s.io",
                    "AdminNetworkPolicy" | "BaselineAdminNetworkPolicy",
                ) => anp::compile(o, &agents),
                (
                    "projectcalico.org" | "crd.projectcalico.org",
                    "GlobalNetworkPolicy" | "NetworkPolicy",
                ) => Ok(calico::compile(o, &agents)),
                ("projectcalico.org" | "crd.projectcalico.org", k) if k.starts_with("Staged") => {
                    Err(format!(
                        "{} {}: a staged policy is not enforced",
                        o.kind, o.metadata.name
                    ))
                }
                ("cilium.io", "CiliumNetworkPolicy" | "CiliumClusterwideNetworkPolicy") => {
                    cilium::compile(o, &agents)
                }
                _ => Err(format!(
                    "{} {} ({}): not a policy kind prober evaluates",
                    o.kind, o.metadata.name, o.api_version
                )),
            };
            match compiled {
                Ok(c) => list.push(c),
                Err(note) => notes.push(note),
            }
        }
        Self {
            list,
            agents: Some(agents),
            notes,
        }
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The policies that select the pod agents (or may: selection unknown), by name.
    #[must_use]
    pub fn selecting(&self) -> Vec<(PolicyRef, Tri)> {
        self.list
            .iter()
            .filter(|c| c.selects != Tri::No)
            .map(|c| (c.id.clone(), c.selects.clone()))
            .collect()
    }

    /// What the policies do to one flow.
    #[must_use]
    pub fn verdict(&self, flow: &Flow) -> Verdict {
        let Some(agents) = &self.agents else {
            return Verdict::Allowed;
        };
        // "Traffic to and from the node where a Pod is running is always allowed" (the
        // NetworkPolicy API; Cilium's allow-localhost default).
        if flow.dir == Dir::Ingress && matches!(flow.peer, Peer::Host { local: true, .. }) {
            return Verdict::Allowed;
        }
        if let Some(v) = self.admin(flow, agents) {
            return v;
        }
        let namespace_layer = if self.has(|f| matches!(f, Family::Calico { .. })) {
            self.calico_tier(flow, agents)
        } else if self.has(|f| matches!(f, Family::Cilium)) {
            self.cilium_layer(flow, agents)
        } else {
            self.k8s_layer(flow, agents)
        };
        if let Some(v) = namespace_layer {
            return v;
        }
        self.baseline(flow, agents).unwrap_or(Verdict::Allowed)
    }

    /// What the policies do to a probe: denied when every route it may take is denied (a
    /// Service's backends are several routes), allowed when one is allowed.
    #[must_use]
    pub fn probe_verdict(&self, routes: &[Route]) -> Verdict {
        let mut first_denied = None;
        let mut unknown = None;
        for route in routes {
            match self.route_verdict(route) {
                Verdict::Allowed => return Verdict::Allowed,
                Verdict::Denied(d) => first_denied = first_denied.or(Some(d)),
                Verdict::Unknown(w) => unknown = unknown.or(Some(w)),
            }
        }
        match (unknown, first_denied) {
            (Some(w), _) => Verdict::Unknown(w),
            (None, Some(d)) => Verdict::Denied(d),
            (None, None) => Verdict::Allowed,
        }
    }

    /// A route is denied when one of its flows is (the sender's egress first).
    fn route_verdict(&self, route: &Route) -> Verdict {
        let mut unknown = None;
        for flow in &route.flows {
            match self.verdict(flow) {
                Verdict::Allowed => {}
                d @ Verdict::Denied(_) => return d,
                Verdict::Unknown(w) => unknown = unknown.or(Some(w)),
            }
        }
        unknown.map_or(Verdict::Allowed, Verdict::Unknown)
    }

    fn has(&self, f: impl Fn(&Family) -> bool) -> bool {
        self.list.iter().any(|c| f(&c.family))
    }

    fn members(&self, f: impl Fn(&Family) -> bool) -> Vec<&Compiled> {
        self.list.iter().filter(|c| f(&c.family)).collect()
    }

    /// `AdminNetworkPolicies`, lowest priority value first; within one, the first matching rule.
    fn admin(&self, flow: &Flow, agents: &Agents) -> Option<Verdict> {
        let mut anps = self.members(|f| matches!(f, Family::Anp { .. }));
        anps.sort_by_key(|c| match c.family {
            Family::Anp { priority } => (priority, c.id.name.clone()),
            _ => (i64::MAX, c.id.name.clone()),
        });
        for p in anps {
            if let Some(decided) = ordered(p, flow, agents) {
                return decided;
            }
        }
        None
    }

    /// Kubernetes `NetworkPolicies` alone: isolated once one selects the agents in that
    /// direction; then allowed when a rule of any of them allows.
    fn k8s_layer(&self, flow: &Flow, agents: &Agents) -> Option<Verdict> {
        let mut isolating = Vec::new();
        let mut unknown = None;
        for p in self.members(|f| matches!(f, Family::K8s)) {
            match p.applies(flow.dir) {
                Tri::No => continue,
                Tri::Unknown(w) => unknown = unknown.or(Some(w)),
                Tri::Yes => isolating.push(p),
            }
            match Tri::any(p.rules(flow.dir).iter().map(|r| r.cond.eval(flow, agents))) {
                Tri::Yes => return Some(Verdict::Allowed),
                Tri::Unknown(w) => unknown = unknown.or(Some(w)),
                Tri::No => {}
            }
        }
        if let Some(w) = unknown {
            return Some(Verdict::Unknown(w));
        }
        by_default(&isolating, flow)
    }

    /// Calico's default tier: Calico policies and Kubernetes `NetworkPolicies` (order 1000) by
    /// order, then name; the first Allow or Deny decides, Pass goes on to the next tier, and a
    /// tier in which some policy applies but none decided drops the packet.
    fn calico_tier(&self, flow: &Flow, agents: &Agents) -> Option<Verdict> {
        let mut members = self.members(|f| matches!(f, Family::Calico { .. } | Family::K8s));
        members.sort_by(|a, b| {
            let key = |c: &Compiled| match &c.family {
                Family::Calico { order, .. } => (order.unwrap_or(f64::INFINITY), c.id.name.clone()),
                _ => (1000.0, format!("knp.default.{}", c.id.name)),
            };
            let (ka, kb) = (key(a), key(b));
            ka.0.total_cmp(&kb.0).then(ka.1.cmp(&kb.1))
        });
        let mut applied: Vec<&Compiled> = Vec::new();
        for p in members {
            if let Family::Calico { tier, .. } = &p.family
                && tier != "default"
                && p.applies(flow.dir) != Tri::No
            {
                return Some(Verdict::Unknown(format!(
                    "{} is in tier {tier:?}, whose order among tiers prober does not read",
                    p.id
                )));
            }
            if let Some(decided) = ordered(p, flow, agents) {
                return decided;
            }
            if p.applies(flow.dir) == Tri::Yes {
                applied.push(p);
            }
        }
        by_default(&applied, flow)
    }

    /// Cilium: deny rules win over every allow; once a policy selects the agents in that
    /// direction (with default deny), only what some rule allows passes.
    fn cilium_layer(&self, flow: &Flow, agents: &Agents) -> Option<Verdict> {
        let members = self.members(|f| matches!(f, Family::Cilium | Family::K8s));
        let mut unknown = None;
        let mut allowed = false;
        let mut default_deny = Vec::new();
        for p in &members {
            match p.applies(flow.dir) {
                Tri::No => continue,
                Tri::Unknown(w) => unknown = unknown.or(Some(w)),
                Tri::Yes => {
                    if p.default_deny[flow.dir.index()] {
                        default_deny.push(*p);
                    }
                }
            }
            for r in p.rules(flow.dir) {
                match (r.action, r.cond.eval(flow, agents)) {
                    (Action::Deny, Tri::Yes) if p.selects == Tri::Yes => {
                        return Some(denied(p, r.name.clone(), vec![], flow));
                    }
                    (_, Tri::Unknown(w)) => unknown = unknown.or(Some(w)),
                    (Action::Allow, Tri::Yes) => allowed = true,
                    _ => {}
                }
            }
        }
        if let Some(w) = unknown {
            return Some(Verdict::Unknown(w));
        }
        if allowed {
            return Some(Verdict::Allowed);
        }
        by_default(&default_deny, flow)
    }

    /// The `BaselineAdminNetworkPolicy`, for agents no namespace-layer policy isolates.
    fn baseline(&self, flow: &Flow, agents: &Agents) -> Option<Verdict> {
        for p in self.members(|f| matches!(f, Family::Banp)) {
            match first_match(p, flow, agents) {
                Ok(Some((Action::Deny, rule))) => return Some(denied(p, rule, vec![], flow)),
                Ok(Some((Action::Allow | Action::Pass, _))) => return Some(Verdict::Allowed),
                Ok(Some((Action::Log, _)) | None) => {}
                Err(w) => return Some(Verdict::Unknown(w)),
            }
        }
        None
    }
}

/// What one policy does to a flow where the first deciding rule wins (ANP, Calico): `None` to
/// go on to the next policy; else what the layer returns (`None` for a Pass: on to the next
/// layer or tier).
fn ordered(p: &Compiled, flow: &Flow, agents: &Agents) -> Option<Layer> {
    match first_match(p, flow, agents) {
        Ok(None | Some((Action::Log, _))) => None,
        Ok(Some((Action::Allow, _))) => Some(Some(Verdict::Allowed)),
        Ok(Some((Action::Deny, rule))) => Some(Some(denied(p, rule, vec![], flow))),
        Ok(Some((Action::Pass, _))) => Some(None),
        Err(w) => Some(Some(Verdict::Unknown(w))),
    }
}

/// A layer's verdict: `None` when it leaves the flow to the next.
type Layer = Option<Verdict>;

/// The first rule of `p` (applying in the flow's direction) that matches and decides: its
/// action and name. A Log rule does not decide. `Err` when selection or a rule before the
/// deciding one cannot be evaluated.
fn first_match(
    p: &Compiled,
    flow: &Flow,
    agents: &Agents,
) -> Result<Option<(Action, Option<String>)>, String> {
    match p.applies(flow.dir) {
        Tri::No => return Ok(None),
        Tri::Unknown(w) => return Err(format!("{}: {w}", p.id)),
        Tri::Yes => {}
    }
    for r in p.rules(flow.dir) {
        match r.cond.eval(flow, agents) {
            Tri::Yes if r.action == Action::Log => {}
            Tri::Yes => return Ok(Some((r.action, r.name.clone()))),
            Tri::No => {}
            Tri::Unknown(w) => return Err(format!("{}: {w}", p.id)),
        }
    }
    Ok(None)
}

/// Denied by default: the first policy that put the agents in default deny, naming the others.
fn by_default(policies: &[&Compiled], flow: &Flow) -> Option<Verdict> {
    let (first, rest) = policies.split_first()?;
    Some(denied(
        first,
        None,
        rest.iter().map(|c| c.id.clone()).collect(),
        flow,
    ))
}

fn denied(p: &Compiled, rule: Option<String>, also: Vec<PolicyRef>, flow: &Flow) -> Verdict {
    Verdict::Denied(Denial {
        policy: p.id.clone(),
        rank: p.rank(),
        rule,
        also,
        dir: flow.dir,
        node: flow.node.clone(),
        protocol: flow.protocol,
        port: flow.port,
    })
}
