//! Pure: (topology, results) -> findings. A firewall gap (a port blocked between hosts that
//! otherwise reach each other) is told apart from a circular bootstrap dependency (a component
//! that builds the network reaching the API server through a path that needs that network), and
//! every failed result ends up as the evidence or a consequence of some finding.
//!
//! One file per finding family; this file holds only the order the rules run in, which matters:
//! a rule claims the failed results it explains, and later rules see only what is left.

mod agents;
mod api_address;
mod bootstrap;
pub mod cidr;
mod context;
mod cutoff;
mod dns;
mod family_down;
pub mod finding;
mod firewall;
mod fix;
mod hop;
mod inferred_tunnel;
mod loss;
mod mtu_unknown;
mod node_config;
mod not_listening;
mod overlay;
mod overlay_unprobed;
pub mod pattern;
pub mod policy;
pub mod preflight;
mod prober_port;
pub mod sampled;
mod selective;
mod starved;
mod unexplained;
mod unmounted;

pub use finding::{Detail, Facts, Finding, Hop, Kind, Severity, State, Where};
pub use pattern::FindingPattern;

use crate::inventory::Inventory;
use crate::model::{AgentStatus, Results};

use context::Ctx;

/// Diagnoses a run. Findings come ordered: firewall gaps, bootstrap cycles, then the rest.
#[must_use]
pub fn diagnose(inv: &Inventory, results: &Results, agents: &[AgentStatus]) -> Vec<Finding> {
    diagnose_sampled(inv, results, agents, None)
}

/// [`diagnose`] for a run that probed only a sample of the node pairs (`--sample`): the rules
/// word their claims between nodes for the sampled pairs alone, and each such finding says how
/// many pairs those are.
#[must_use]
pub fn diagnose_sampled(
    inv: &Inventory,
    results: &Results,
    agents: &[AgentStatus],
    sample: Option<&crate::plan::sample::Sampled>,
) -> Vec<Finding> {
    let mut ctx = Ctx::new(inv, results);
    ctx.sampled = sample.is_some();
    let mut findings = Vec::new();
    policy::denied_by_policy(&mut ctx, &mut findings);
    cutoff::unreachable_nodes(&mut ctx, &mut findings);
    family_down::family_down(&mut ctx, &mut findings);
    prober_port::prober_port(&mut ctx, &mut findings);
    let gaps = firewall::firewall_gaps(&mut ctx, &mut findings);
    selective::selective_refusals(&mut ctx, &mut findings);
    not_listening::not_listening(&mut ctx, &mut findings);
    inferred_tunnel::inferred_tunnels(&mut ctx, &mut findings);
    policy::unread_policy(&mut ctx, &mut findings);
    bootstrap::bootstrap_cycles(&mut ctx, &mut findings);
    bootstrap::service_proxy(&mut ctx, &mut findings);
    node_config::node_checks(&mut ctx, &mut findings);
    unmounted::node_files_unmounted(&mut ctx, &mut findings);
    overlay::overlay_and_mtu(&mut ctx, &mut findings, &gaps);
    overlay_unprobed::overlay_unprobed(&ctx, &mut findings);
    mtu_unknown::mtu_unknown(&mut ctx, &mut findings);
    dns::dns(&mut ctx, &mut findings);
    agents::agent_missing(&mut ctx, &mut findings, agents);
    starved::starved(&mut ctx, &mut findings);
    loss::loss(&mut ctx, &mut findings);
    unexplained::unexplained(&mut ctx, &mut findings);
    if let Some(s) = sample {
        sampled::qualify(&mut findings, s);
    }
    findings
}

/// What a preflight adds about the candidate itself, in the order it leads the report: the ports
/// already taken there, its resolver (unless `matrix`'s own loop check, run over `findings`,
/// already named it: no DNS node was known), its clock.
#[must_use]
pub fn preflight_candidate(
    candidate: &str,
    inv: &Inventory,
    results: &Results,
    findings: &[Finding],
    conflicts: &[preflight::PortConflict],
) -> Vec<Finding> {
    let mut found = preflight::port_conflicts(candidate, conflicts);
    let named = findings
        .iter()
        .any(|f| f.kind() == Kind::Dns && f.facts().nodes().iter().any(|n| n == candidate));
    if !named {
        found.extend(preflight::candidate_resolver(candidate, inv, results));
    }
    found.extend(preflight::clock_skew(candidate, results));
    found.extend(preflight::forwarding(candidate, inv, results));
    found
}

#[cfg(test)]
mod tests;
