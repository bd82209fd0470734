//! A policy prober could not read: probes into a node's pod agent fail from the other nodes
//! while those nodes' hosts reach it and the overlay is shown to carry pod traffic (the pod
//! agent's own probes out get through, or another pod path between the nodes works). That is
//! the pattern of a policy at the pod's door, which prober may not have been allowed to read
//! or could not evaluate: a `policy` warning flagged `inferred`, never a firewall gap with host
//! firewall lines.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use probe_proto::Outcome;

use super::{Agents, Policies, Routes, Verdict};
use crate::diagnose::context::{Ctx, failed, list, names_text};
use crate::diagnose::finding::{Finding, Policy, PolicyState, Severity};
use crate::model::{AgentKind, Family, PathClass, Record};
use crate::runtime::kube::manifests;

pub(in crate::diagnose) fn unread_policy(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) {
    let Some(into) = pattern(ctx) else { return };
    let nodes: Vec<u32> = into.keys().copied().collect();
    let ev: Vec<usize> = into.into_values().flatten().collect();
    let names = list(ctx, &nodes);
    // Policies read but not evaluable that may apply to these probes.
    let policies = Policies::new(
        &ctx.inv.cluster.policies,
        Agents::deployed_in(ctx.inv.cluster.agents_namespace.as_deref()),
    );
    let mut unknown: BTreeSet<String> = policies.notes.iter().cloned().collect();
    let routes = Routes::new(ctx.inv);
    for &i in &ev {
        let r = ctx.results.at(i);
        if let Verdict::Unknown(w) = policies.probe_verdict(&routes.of(r.path, r.from, r.to)) {
            unknown.insert(w);
        }
    }
    // Dropped in one family of a dual-stack run: that family's (a policy's ipBlock of one
    // family, or an engine that enforces one family only).
    let family = ctx.family_of(ev.iter().copied()).filter(|_| ctx.dual_stack);
    let over = family.map_or_else(String::new, |f| format!(" over {f}"));
    let mut f = Finding::new(
        Policy {
            state: PolicyState::Unreadable,
            policy: None,
            denies: Vec::new(),
            nodes: names.clone(),
            inferred: true,
        },
        Severity::Warning,
        format!(
            "the pod agents on {} do not answer the other nodes{over} while those nodes' hosts \
             reach them and the overlay carries pod traffic: a network policy prober {} may drop \
             these probes — the pod paths below are untested, not broken",
            names_text(&names),
            if unknown.is_empty() {
                "cannot read"
            } else {
                "cannot evaluate"
            }
        ),
    );
    f.family = family;
    for w in unknown {
        f.notes.push(format!("not evaluated: {w}"));
    }
    f.notes.push(
        "the hosts reach each other and the overlay works: this is no firewall gap, and the \
         hosts' firewalls are not the cause"
            .into(),
    );
    f.fix.push(format!(
        "list the policies that can select the pod agents (namespace {}) and let prober read \
         them (the reads in deploy/base/rbac.yaml): NetworkPolicy in that namespace, \
         AdminNetworkPolicy, BaselineAdminNetworkPolicy, Calico GlobalNetworkPolicy and \
         NetworkPolicy, Cilium CiliumClusterwideNetworkPolicy and CiliumNetworkPolicy",
        manifests::DEFAULT_NAMESPACE
    ));
    f.fix.push(format!(
        "if one of them denies the probes, allow them for the agents (prober's own NetworkPolicy \
         {}/{} admits them past namespace policies)",
        manifests::DEFAULT_NAMESPACE,
        manifests::ALLOW_POLICY
    ));
    ctx.emit(findings, f, &ev, &[]);
}

/// The failed probes into each node's pod agent, by that node, when they fit a policy's pattern
/// in their family (hosts, pods and the overlay shown to work over IPv4 say nothing of IPv6).
fn pattern(ctx: &Ctx<'_>) -> Option<BTreeMap<u32, Vec<usize>>> {
    let pods_ok = ctx.pods_ok();
    let mut host_ok: HashSet<(u32, u32, Family)> = HashSet::new();
    // Pairs (either way) between which some pod path through the overlay got through, and
    // whether a pod agent reached a DNS pod on another node (a pod no agent policy selects),
    // per family.
    let mut carried: HashSet<(u32, u32, Family)> = HashSet::new();
    let mut dns_across: HashSet<Family> = HashSet::new();
    for r in ctx.results.iter().filter(|r| r.result.outcome.is_ok()) {
        let Some(a) = ctx.from(&r) else { continue };
        let family = r.to.family();
        if r.path == PathClass::Dns
            && r.from.agent == AgentKind::Pod
            && ctx.dns_backends.iter().any(|&b| b != a)
        {
            dns_across.insert(family);
        }
        let Some(b) = ctx.to(&r) else { continue };
        if a == b {
            continue;
        }
        if r.from.agent == AgentKind::Host && r.to.agent != Some(AgentKind::Pod) {
            host_ok.insert((a, b, family));
        }
        if matches!(r.path, PathClass::PodToPod | PathClass::NodeToPod) {
            carried.insert((a.min(b), a.max(b), family));
        }
    }
    // (sender, receiver, family) -> the failed probes into the receiver's pod agent, and
    // whether one of them is more than the full-size (MTU) probe.
    let mut pairs: BTreeMap<(u32, u32, Family), (Vec<usize>, bool)> = BTreeMap::new();
    for (i, r) in ctx.results.iter().enumerate() {
        if ctx.explained.contains(&i)
            || !failed(&r)
            || !to_pod_agent(&r)
            || !matches!(r.result.outcome, Outcome::Timeout | Outcome::Rejected)
        {
            continue;
        }
        let (Some(a), Some(b)) = (ctx.from(&r), ctx.to(&r)) else {
            continue;
        };
        if a != b {
            let e = pairs.entry((a, b, r.to.family())).or_default();
            e.0.push(i);
            e.1 |= !Ctx::is_mtu(&r);
        }
    }
    pairs.retain(|_, (_, more)| *more);
    if pairs.is_empty() {
        return None;
    }
    // Every pod agent unreachable from every other node over a family while the pods reach a
    // DNS pod on another node over it: the overlay works, and what fails is at the agents'
    // door. Otherwise the overlay must be shown to work between the very nodes (a pod path
    // between them, either way, got through in that family): a broken route or fdb entry
    // fails both ways.
    let with_pod_agent: Vec<u32> = (0..ctx.inv.nodes.len())
        .filter(|&i| ctx.inv.nodes[i].agents.pod.is_some())
        .filter_map(|i| u32::try_from(i).ok())
        .collect();
    let everywhere = |family: Family| {
        dns_across.contains(&family)
            && with_pod_agent.iter().all(|&b| {
                with_pod_agent
                    .iter()
                    .all(|&a| a == b || pairs.contains_key(&(a, b, family)))
            })
    };
    let fits = pairs.keys().all(|&(a, b, family)| {
        host_ok.contains(&(a, b, family))
            && pods_ok.in_family(b, family)
            && (carried.contains(&(a.min(b), a.max(b), family)) || everywhere(family))
    });
    if !fits {
        return None;
    }
    let mut into: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for ((_, b, _), (ev, _)) in pairs {
        into.entry(b).or_default().extend(ev);
    }
    Some(into)
}

/// A probe that ends at a pod agent (pod-to-pod, node-to-pod, the pods' MTU probe).
fn to_pod_agent(r: &Record<'_>) -> bool {
    r.to.agent == Some(AgentKind::Pod)
        && matches!(
            r.path,
            PathClass::PodToPod | PathClass::NodeToPod | PathClass::Overlay
        )
}
