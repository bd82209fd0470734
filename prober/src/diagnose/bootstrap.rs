//! Bootstrap cycles (a component that builds the network reaching the API server through the
//! kubernetes Service, which needs that network) and a broken Service path (kube-proxy).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::SocketAddr;

use crate::inventory::{ApiAccess, Component, ComponentRole};
use crate::model::{PathClass, Record};

use super::api_address::{ApiAddress, api_address};
use super::context::{Ctx, failed, list, names_text};
use super::finding::{BootstrapCycle, CycleState, Finding, ServiceProxy, Severity};

fn is_service_path(r: &Record<'_>) -> bool {
    matches!(r.path, PathClass::PodToService | PathClass::NodeToService)
        || (r.path == PathClass::Dns && r.to.service.as_deref() == Some("kube-dns"))
}

/// Nodes where the `kubernetes` `ClusterIP` fails while the API server answers directly from the
/// same kind of agent over the same family (an IPv4 endpoint answering says nothing of the IPv6
/// Service): the Service path itself is broken there. Returns (node, evidence).
fn service_broken(ctx: &Ctx<'_>) -> BTreeMap<u32, Vec<usize>> {
    let mut direct_ok: HashSet<(u32, PathClass, crate::model::Family)> = HashSet::new();
    for r in ctx.results {
        if matches!(
            r.path,
            PathClass::PodToApiserver | PathClass::NodeToApiserver
        ) && r.result.outcome.is_ok()
            && let Some(a) = ctx.from(&r)
        {
            direct_ok.insert((a, r.path, r.to.family()));
        }
    }
    let mut out: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (i, r) in ctx.results.iter().enumerate() {
        let direct = match r.path {
            PathClass::PodToService => PathClass::PodToApiserver,
            PathClass::NodeToService => PathClass::NodeToApiserver,
            _ => continue,
        };
        let Some(a) = ctx.from(&r) else { continue };
        if failed(&r)
            && !ctx.explained.contains(&i)
            && direct_ok.contains(&(a, direct, r.to.family()))
        {
            out.entry(a).or_default().push(i);
        }
    }
    out
}

/// The direct-endpoint results that worked on `nodes` (evidence that the API server is fine).
fn direct_evidence(ctx: &Ctx<'_>, nodes: &BTreeSet<u32>) -> Vec<usize> {
    ctx.results
        .iter()
        .enumerate()
        .filter(|(_, r)| matches!(r.path, PathClass::NodeToApiserver) && r.result.outcome.is_ok())
        .filter(|(_, r)| ctx.from(r).is_some_and(|a| nodes.contains(&a)))
        .map(|(i, _)| i)
        .collect()
}

/// Failed Service-path results (`ClusterIP` and the DNS Service) from `nodes`, not yet explained.
fn service_consequences(ctx: &Ctx<'_>, nodes: &BTreeSet<u32>, evidence: &[usize]) -> Vec<usize> {
    ctx.results
        .iter()
        .enumerate()
        .filter(|(i, r)| {
            failed(r) && is_service_path(r) && !ctx.explained.contains(i) && !evidence.contains(i)
        })
        .filter(|(_, r)| ctx.from(r).is_some_and(|a| nodes.contains(&a)))
        .map(|(i, _)| i)
        .collect()
}

fn runs_on(c: &Component, node: &str) -> bool {
    c.nodes.is_empty() || c.nodes.iter().any(|n| n == node)
}

/// One pasteable line per container: its own label, then the `kubectl set env` that points it at
/// the API server `api` directly.
fn env_fix(api: &ApiAddress, c: &Component) -> Vec<String> {
    let containers = if c.containers.is_empty() {
        vec![c.name.clone()]
    } else {
        c.containers.clone()
    };
    // kubectl's short names keep the command short.
    let kind = match c.kind.as_str() {
        "DaemonSet" => "ds".to_string(),
        "Deployment" => "deploy".to_string(),
        "StatefulSet" => "sts".to_string(),
        other => other.to_lowercase(),
    };
    let (host, port) = (&api.host, api.port);
    containers
        .iter()
        .map(|ct| {
            format!(
                "{} ({} {}/{}), container {ct}: kubectl -n {} set env {kind}/{} -c {ct} KUBERNETES_SERVICE_HOST={host} KUBERNETES_SERVICE_PORT={port}",
                c.name, c.kind, c.namespace, c.name, c.namespace, c.name
            )
        })
        .collect()
}

pub(super) fn bootstrap_cycles(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) {
    let on_service: Vec<&Component> = ctx
        .inv
        .components
        .iter()
        .filter(|c| c.api_access == ApiAccess::Service)
        .collect();
    let Some(cni) = on_service
        .iter()
        .find(|c| c.role == ComponentRole::Cni)
        .copied()
    else {
        return;
    };
    // The CNI needs the Service path on its nodes; the Service path needs the pod network there
    // (kube-proxy's rules and the routes the CNI programs); the pod network needs the CNI.
    let cycle = vec![
        cni.name.clone(),
        format!("kubernetes Service {}", ctx.inv.cluster.api.service),
        "pod network (routes, kube-proxy rules)".to_string(),
        cni.name.clone(),
    ];
    let mut components = vec![cni.name.clone()];
    components.extend(
        on_service
            .iter()
            .filter(|c| c.name != cni.name)
            .map(|c| c.name.clone()),
    );
    let broken = service_broken(ctx);
    let active: BTreeSet<u32> = broken
        .keys()
        .copied()
        .filter(|&n| runs_on(cni, ctx.name(n)))
        .collect();
    let api = api_address(ctx);
    let mut fix = Vec::new();
    let mut notes: Vec<String> = api.iter().filter_map(|a| a.note.clone()).collect();
    for c in &on_service {
        fix.extend(api.iter().flat_map(|a| env_fix(a, c)));
    }
    let (state, severity, summary, on, ev, cons) = if active.is_empty() {
        let summary = format!(
            "latent bootstrap cycle: {} reaches the API server through the kubernetes Service, which needs the network {} builds; it works now, but cannot recover if that path ever breaks",
            cni.name, cni.name
        );
        let ev = working_service_paths(ctx);
        (
            CycleState::Latent,
            Severity::Warning,
            summary,
            Vec::new(),
            ev,
            Vec::new(),
        )
    } else {
        let mut ev: Vec<usize> = active.iter().flat_map(|n| broken[n].clone()).collect();
        ev.extend(direct_evidence(ctx, &active));
        let cons = service_consequences(ctx, &active, &ev);
        let names = list(ctx, &active.iter().copied().collect::<Vec<_>>());
        // The Service failing on every node is the service proxy's fault first: pointing only
        // the CNI at the API server directly would leave the Service broken for every workload.
        let everywhere = active.len() == ctx.inv.nodes.len();
        if everywhere {
            let mut first = vec![
                "kube-proxy (the service proxy), missing or broken on every node: kubectl -n kube-system get daemonset kube-proxy".to_string(),
                "kube-proxy's pods, node by node: kubectl -n kube-system get pods -l k8s-app=kube-proxy -o wide".to_string(),
            ];
            first.append(&mut fix);
            fix = first;
            notes.insert(0, "bring the service proxy (kube-proxy) back first; the `set env` lines then keep the CNI from locking itself out again".into());
        }
        let failing: Vec<usize> = active.iter().flat_map(|n| broken[n].clone()).collect();
        let summary = active_summary(ctx, &failing, &names, &components, everywhere);
        (
            CycleState::Active,
            Severity::Error,
            summary,
            names,
            ev,
            cons,
        )
    };
    let mut f = Finding::new(
        BootstrapCycle {
            state,
            cycle,
            components,
            nodes: on,
        },
        severity,
        summary,
    );
    f.fix = fix;
    f.notes = notes;
    ctx.emit(findings, f, &ev, &cons);
}

/// What an active cycle on `names` is, in one sentence; `failing` are the Service results that
/// failed there.
fn active_summary(
    ctx: &Ctx<'_>,
    failing: &[usize],
    names: &[String],
    components: &[String],
    everywhere: bool,
) -> String {
    format!(
        "active bootstrap cycle on {}: the API server answers directly, but the kubernetes Service {} does not, and {} {} the API server through it{}",
        names_text(names),
        services_text(ctx, failing),
        components.join(", "),
        if components.len() == 1 {
            "reaches"
        } else {
            "reach"
        },
        if everywhere {
            "; it fails on every node, so the service proxy (kube-proxy) is the first suspect"
        } else {
            ""
        }
    )
}

/// The Service paths that work, DNS aside: a latent cycle's evidence.
fn working_service_paths(ctx: &Ctx<'_>) -> Vec<usize> {
    ctx.results
        .iter()
        .enumerate()
        .filter(|(_, r)| is_service_path(r) && r.result.outcome.is_ok() && r.path != PathClass::Dns)
        .map(|(i, _)| i)
        .collect()
}

pub(super) fn service_proxy(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) {
    let broken = service_broken(ctx);
    if broken.is_empty() {
        return;
    }
    let nodes: BTreeSet<u32> = broken.keys().copied().collect();
    let mut ev: Vec<usize> = broken.values().flatten().copied().collect();
    ev.extend(direct_evidence(ctx, &nodes));
    let cons = service_consequences(ctx, &nodes, &ev);
    let names = list(ctx, &nodes.iter().copied().collect::<Vec<_>>());
    let failing: Vec<usize> = broken.values().flatten().copied().collect();
    let services = services(ctx, &failing);
    let mut f = Finding::new(
        ServiceProxy {
            nodes: names.clone(),
        },
        Severity::Error,
        format!(
            "the kubernetes Service {} fails on {} while the API server answers directly: the Service rules (kube-proxy) are missing or stale there",
            services_words(ctx, &services),
            names_text(&names)
        ),
    );
    for n in &names {
        f.fix.push(format!("check kube-proxy on {n}: kubectl -n kube-system get pods -l k8s-app=kube-proxy --field-selector spec.nodeName={n}"));
    }
    // The rules of the failing family: kube-proxy programs iptables and ip6tables apart, and
    // one half can be missing while the other works.
    for ip in services.iter().map(SocketAddr::ip) {
        let save = if ip.is_ipv6() {
            "ip6tables-save"
        } else {
            "iptables-save"
        };
        f.fix.push(format!("on the node: nft list ruleset | grep -c {ip} (or {save} -t nat | grep -c {ip}); restart kube-proxy there if the rules are missing"));
    }
    ctx.emit(findings, f, &ev, &cons);
}

/// The Service addresses the results at `idx` were sent to, IPv4 first.
fn services(ctx: &Ctx<'_>, idx: &[usize]) -> BTreeSet<SocketAddr> {
    idx.iter()
        .filter_map(|&i| {
            let r = ctx.results.at(i);
            Some(SocketAddr::new(r.to.address, r.to.port?))
        })
        .collect()
}

/// [`services`] of the results at `idx` as words.
fn services_text(ctx: &Ctx<'_>, idx: &[usize]) -> String {
    services_words(ctx, &services(ctx, idx))
}

/// Service addresses as words (`10.96.0.1:443 and [fd00:10:96::1]:443`); the inventory's
/// Service when there are none.
fn services_words(ctx: &Ctx<'_>, services: &BTreeSet<SocketAddr>) -> String {
    let all: Vec<String> = services.iter().map(ToString::to_string).collect();
    if all.is_empty() {
        ctx.inv.cluster.api.service.to_string()
    } else {
        all.join(" and ")
    }
}
