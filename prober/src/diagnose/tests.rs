//! The rules' tests: the incidents as synthetic result sets (the planner's real matrix, with
//! outcomes decided by a fault model per case), diagnosed without any network. This file holds
//! only the helpers every case uses; the cases of rule `diagnose/<rule>.rs` are in
//! `diagnose/tests/<rule>.rs`.

use std::collections::{HashMap, HashSet};

use probe_proto::{IcmpInfo, Outcome, ProbeResult};
use serde_json::json;

use super::*;
use crate::inventory::Inventory;
use crate::model::{AgentKind, PathClass, Protocol, ResultRecord, Results};
use crate::plan::{Filter, PlannedProbe, plan};
use crate::testutil::{inventory, zones_consecutive};

fn components(inv: &mut Inventory, yaml: &str) {
    inv.components = serde_saphyr::from_str(yaml).unwrap();
}

const CALICO_AND_COREDNS: &str = "
- {name: calico-node, namespace: kube-system, kind: DaemonSet, role: cni, hostNetwork: true, apiAccess: service, containers: [install-cni, calico-node]}
- {name: coredns, namespace: kube-system, kind: Deployment, role: dns, apiAccess: service, containers: [coredns], nodes: [n1]}
";

/// What the network does to one probe: `None` is `ok`.
type Model = dyn Fn(&PlannedProbe) -> Option<(Outcome, String)>;

fn run(inv: &Inventory, model: &Model) -> (Vec<ResultRecord>, Vec<Finding>) {
    run_with_agents(inv, model, &[])
}

fn run_with_agents(
    inv: &Inventory,
    model: &Model,
    agents: &[AgentStatus],
) -> (Vec<ResultRecord>, Vec<Finding>) {
    run_probes(inv, &plan(inv, &Filter::default()).to_vec(), model, agents)
}

/// The address `a` has in the IPv6 half of a dual-stack cluster: `fd00:A:B:C::D`, each octet of
/// the IPv4 address as a group (192.168.56.10 is `fd00:192:168:56::10`).
fn v6_of(addr: std::net::IpAddr) -> std::net::IpAddr {
    let std::net::IpAddr::V4(v4) = addr else {
        return addr;
    };
    let [o1, o2, o3, o4] = v4
        .octets()
        .map(|o| u16::from_str_radix(&o.to_string(), 16).unwrap());
    std::net::Ipv6Addr::new(0xfd00, o1, o2, o3, 0, 0, 0, o4).into()
}

/// The matrix of a dual-stack cluster: every network probe of the plan, and its IPv6 twin (the
/// same ends at [`v6_of`] its address, its id ending `/ipv6`). The model sees each probe's
/// family in `p.to.family()`.
fn run_dual(inv: &Inventory, model: &Model) -> (Vec<ResultRecord>, Vec<Finding>) {
    run_dual_twinning(inv, model, &|p| p.path != PathClass::NodeConfig)
}

/// [`run_dual`] of a CNI with one IPv4 tunnel carrying both families (Cilium's): the crafted
/// tunnel probes have no IPv6 twin.
fn run_dual_over_ipv4_tunnel(inv: &Inventory, model: &Model) -> (Vec<ResultRecord>, Vec<Finding>) {
    run_dual_twinning(inv, model, &|p| {
        let tunnel =
            p.path == PathClass::Overlay && matches!(p.to.protocol, Protocol::Udp | Protocol::Ipip);
        p.path != PathClass::NodeConfig && !tunnel
    })
}

fn run_dual_twinning(
    inv: &Inventory,
    model: &Model,
    twin: &dyn Fn(&PlannedProbe) -> bool,
) -> (Vec<ResultRecord>, Vec<Finding>) {
    let mut probes = Vec::new();
    for p in plan(inv, &Filter::default()).to_vec() {
        if twin(&p) {
            let mut twin = p.clone();
            twin.id = format!("{}/ipv6", p.id);
            twin.to.address = v6_of(p.to.address);
            probes.push(twin);
        }
        probes.push(p);
    }
    run_probes(inv, &probes, model, &[])
}

fn run_probes(
    inv: &Inventory,
    probes: &[PlannedProbe],
    model: &Model,
    agents: &[AgentStatus],
) -> (Vec<ResultRecord>, Vec<Finding>) {
    let results: Vec<ResultRecord> = probes
        .iter()
        .map(|p| {
            let (outcome, detail) = model(p).unwrap_or((Outcome::Ok, "ok".into()));
            let mut result = ProbeResult::new(p.id.clone(), outcome, detail);
            if outcome.is_ok() {
                result.rtt_micros = Some(500);
            }
            // The model's shorthand for what the receiver's sniffer said, as the run records it.
            if result.detail.starts_with("never reached") {
                result.receipt = Some(probe_proto::Receipt::NotArrived);
            } else if result.detail.contains(" itself") {
                result.receipt = Some(probe_proto::Receipt::HostDropped);
            }
            // A model answer of "unknown: ..." stands for a probe that never ran, one of
            // "starved: MS" for one that timed out on every attempt while its agent stalled.
            let unknown = if let Some(ms) = result.detail.strip_prefix("starved: ") {
                result.stalled_ms = ms.parse().ok();
                Some(crate::model::Unknown::Starved)
            } else {
                result
                    .detail
                    .starts_with("unknown:")
                    .then_some(crate::model::Unknown::AgentFailed)
            };
            ResultRecord {
                unknown,
                path: p.path,
                from: p.from.clone(),
                to: p.to.clone(),
                result,
            }
        })
        .collect();
    let findings = diagnose(inv, &Results::of(&results), agents);
    assert_every_failure_explained(&results, &findings);
    (results, findings)
}

fn assert_every_failure_explained(results: &[ResultRecord], findings: &[Finding]) {
    let cited: HashSet<&str> = findings
        .iter()
        .flat_map(|f| f.evidence.iter().chain(&f.consequences))
        .map(String::as_str)
        .collect();
    for r in results.iter().filter(|r| !r.result.outcome.is_ok()) {
        assert!(
            cited.contains(r.result.id.as_str()),
            "failed result {} is in no finding:\n{findings:#?}",
            r.result.id
        );
    }
}

fn kinds(findings: &[Finding]) -> Vec<Kind> {
    findings.iter().map(Finding::kind).collect()
}

/// The expectation `want` names, typed as a scenario's `findings` entry is: a misspelled key or an
/// unknown state fails the test instead of matching nothing.
fn like(want: serde_json::Value) -> FindingPattern {
    let text = want.to_string();
    serde_json::from_value(want).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn node_of(p: &PlannedProbe) -> (&str, &str) {
    (p.from.node.as_str(), p.to.node.as_deref().unwrap_or(""))
}

/// True when the probe's traffic rides the overlay between `a` and another node.
fn crosses_overlay(p: &PlannedProbe, a: &str) -> bool {
    let (from, to) = node_of(p);
    let dns_pod_node = "n1";
    let to = if p.path == PathClass::Dns {
        dns_pod_node
    } else {
        to
    };
    let overlay = matches!(
        p.path,
        PathClass::PodToPod | PathClass::NodeToPod | PathClass::Overlay | PathClass::Dns
    );
    overlay && !to.is_empty() && (from == a) != (to == a)
}

#[allow(clippy::unnecessary_wraps)] // reads as the model's answer: `if x { timeout() } else { None }`
fn timeout() -> Option<(Outcome, String)> {
    Some((Outcome::Timeout, "no answer within 2000 ms".into()))
}

/// The healthy matrix's results, with `tweak` applied to each.
fn tweaked(inv: &Inventory, tweak: &dyn Fn(usize, &mut ResultRecord)) -> Vec<ResultRecord> {
    let (mut results, _) = run(inv, &|_| None);
    for (i, r) in results.iter_mut().enumerate() {
        tweak(i, r);
    }
    results
}

fn intermittent(r: &mut ResultRecord, attempts: u32, ok: u32) {
    r.result.attempts = Some(attempts);
    r.result.ok_attempts = Some(ok);
    if ok == 0 {
        r.result.outcome = Outcome::Timeout;
        r.result.detail = format!("no answer within 2000 ms (failed all {attempts} attempts)");
    }
}

mod agents;
mod bootstrap;
mod cutoff;
mod dns;
mod firewall;
mod healthy;
mod hop_where;
mod inferred_tunnel;
mod loss;
mod mtu_unknown;
mod narrowed_run;
mod node_checks;
mod not_listening;
mod optional_port;
mod overlay;
mod policy_denies;
mod prober_port;
mod router_reject;
mod selective_refusal;
mod starved;
mod unexplained;
mod unread_policy;
