//! The `policy` finding: the failed probes a policy of the inventory denies are that policy's —
//! untested, not broken — and never a firewall gap's. Runs before the rules that read the
//! network's faults, so they see only what no policy explains.

use std::collections::{BTreeMap, BTreeSet};

use super::fix::allow_fix;
use super::{Agents, Denial, Dir, Policies, PolicyRef, Routes, Verdict};
use crate::diagnose::context::{Ctx, failed, names_text};
use crate::diagnose::finding::{Finding, Policy, PolicyState, Severity};
use crate::model::{Family, Protocol};

/// What one policy denies in this run.
struct Denied {
    first: Denial,
    results: Vec<usize>,
    dirs: BTreeSet<Dir>,
    what: BTreeSet<(Protocol, Option<u16>)>,
    nodes: BTreeSet<String>,
    /// Whether one of its denials is by a rule (not by default).
    rules: BTreeSet<String>,
    /// Probes it denies that got through anyway.
    passed: usize,
}

pub(in crate::diagnose) fn denied_by_policy(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) {
    if ctx.inv.cluster.policies.is_empty() {
        return;
    }
    let agents = Agents::deployed_in(ctx.inv.cluster.agents_namespace.as_deref());
    let policies = Policies::new(&ctx.inv.cluster.policies, agents.clone());
    if policies.is_empty() {
        return;
    }
    let mut by_policy: BTreeMap<PolicyRef, Denied> = BTreeMap::new();
    let mut passed: BTreeMap<PolicyRef, usize> = BTreeMap::new();
    let routes = Routes::new(ctx.inv);
    for (i, r) in ctx.results.iter().enumerate() {
        if ctx.explained.contains(&i) || r.is_unknown() {
            continue;
        }
        let route = routes.of(r.path, r.from, r.to);
        if route.is_empty() {
            continue;
        }
        let Verdict::Denied(d) = policies.probe_verdict(&route) else {
            continue;
        };
        if !failed(&r) {
            *passed.entry(d.policy).or_default() += 1;
            continue;
        }
        let e = by_policy.entry(d.policy.clone()).or_insert_with(|| Denied {
            first: d.clone(),
            results: Vec::new(),
            dirs: BTreeSet::new(),
            what: BTreeSet::new(),
            nodes: BTreeSet::new(),
            rules: BTreeSet::new(),
            passed: 0,
        });
        e.results.push(i);
        e.dirs.insert(d.dir);
        e.what.insert((d.protocol, d.port));
        e.nodes.insert(d.node);
        e.rules.extend(d.rule);
    }
    let pod_nodes: BTreeSet<&str> = ctx
        .inv
        .nodes
        .iter()
        .filter(|n| n.agents.pod.is_some())
        .map(|n| n.name.as_str())
        .collect();
    for (policy, mut d) in by_policy {
        d.passed = passed.get(&policy).copied().unwrap_or_default();
        // A policy that drops one family only (an `ipBlock` of IPv4 ranges alone in a
        // dual-stack cluster) says so.
        let family = ctx
            .family_of(d.results.iter().copied())
            .filter(|_| ctx.dual_stack);
        let mut f = finding(&d, &pod_nodes, &agents, family);
        f.family = family;
        ctx.emit(findings, f, &d.results, &[]);
    }
}

fn finding(
    d: &Denied,
    pod_nodes: &BTreeSet<&str>,
    agents: &Agents,
    family: Option<Family>,
) -> Finding {
    let nodes: Vec<String> = d.nodes.iter().cloned().collect();
    let denies: Vec<String> = d
        .what
        .iter()
        .map(|(p, port)| match port {
            Some(port) => format!("{p}/{port}"),
            None => p.to_string(),
        })
        .collect();
    let rank = d
        .first
        .rank
        .as_ref()
        .map(|r| format!(" ({r})"))
        .unwrap_or_default();
    let by = if d.rules.is_empty() {
        String::new()
    } else {
        let rules: Vec<&str> = d.rules.iter().map(String::as_str).collect();
        format!(
            " by its rule{} {}",
            if rules.len() == 1 { "" } else { "s" },
            rules.join(", ")
        )
    };
    let way = match (
        d.dirs.contains(&Dir::Ingress),
        d.dirs.contains(&Dir::Egress),
    ) {
        (true, true) => "to and from",
        (false, true) => "from",
        _ => "to",
    };
    let all = d.nodes.iter().all(|n| pod_nodes.contains(n.as_str()))
        && pod_nodes.iter().all(|n| d.nodes.contains(*n));
    let at = if all {
        String::new()
    } else {
        format!(" on {}", names_text(&nodes))
    };
    let default = if d.rules.is_empty() {
        " (it selects them and allows none of it)"
    } else {
        ""
    };
    let over = family.map_or_else(String::new, |f| format!(" over {f}"));
    let mut f = Finding::new(
        Policy {
            state: PolicyState::Denied,
            policy: Some(d.first.policy.to_string()),
            denies: denies.clone(),
            nodes,
            inferred: false,
        },
        Severity::Warning,
        format!(
            "{}{rank} drops {}{over} {way} the pod agents{at}{by}{default}: the pod paths below \
             are untested, not broken",
            d.first.policy,
            denies.join(", "),
        ),
    );
    f.fix = allow_fix(&d.first, !d.rules.is_empty(), agents);
    if !d.first.also.is_empty() {
        let also: Vec<String> = d.first.also.iter().map(ToString::to_string).collect();
        f.notes.push(format!(
            "also selecting the pod agents and allowing none of it: {}",
            also.join(", ")
        ));
    }
    f.notes.push(
        "the probes it drops never reached the network: this is no firewall gap, and the \
         hosts' firewalls are not the cause"
            .into(),
    );
    if d.passed > 0 {
        f.notes.push(format!(
            "{} probe{} it denies got through: the CNI may not enforce it everywhere",
            d.passed,
            if d.passed == 1 { "" } else { "s" }
        ));
    }
    f
}
