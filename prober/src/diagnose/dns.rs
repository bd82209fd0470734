//! Cluster DNS that answers with an error code, or not at all, on paths not known to be blocked.

use std::collections::{BTreeMap, BTreeSet};

use probe_proto::Outcome;

use crate::model::{Family, PathClass};

use super::context::{Ctx, failed};
use super::finding::{Dns, DnsState, Finding, Severity};

pub(super) fn dns(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) {
    let mut by_rcode: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let mut silent: Vec<usize> = Vec::new();
    // In a run that loses packets, a query that went unanswered where the same sender's queries
    // of the same server got answers is the loss's (the loss rule claims it), not a DNS fault.
    let lossy = ctx.lossy_ends();
    for (i, r) in ctx.results.iter().enumerate() {
        if r.path != PathClass::Dns || !failed(&r) || ctx.explained.contains(&i) {
            continue;
        }
        if r.result.outcome == Outcome::Timeout
            && lossy.as_ref().is_some_and(|w| w.contains(&ctx.ends(&r)))
        {
            continue;
        }
        match (
            r.result.outcome,
            r.result.dns.as_ref().and_then(|d| d.rcode.clone()),
        ) {
            (Outcome::DnsError, Some(rcode)) => by_rcode.entry(rcode).or_default().push(i),
            _ => silent.push(i),
        }
    }
    for (rcode, idx) in by_rcode {
        let names: BTreeSet<String> = idx
            .iter()
            .filter_map(|&i| {
                ctx.results
                    .at(i)
                    .result
                    .dns
                    .as_ref()
                    .map(|d| d.name.clone())
            })
            .collect();
        let mut f = Finding::new(
            Dns {
                state: DnsState::from(rcode.to_lowercase().as_str()),
                nodes: Vec::new(),
            },
            Severity::Error,
            format!(
                "cluster DNS answers {rcode} for {}: the server is reachable but its records or upstreams are wrong",
                names.into_iter().collect::<Vec<_>>().join(", ")
            ),
        );
        f.fix.push("check the DNS pods' logs and configuration (kubectl -n kube-system logs -l k8s-app=kube-dns; the coredns ConfigMap)".into());
        ctx.emit(findings, f, &idx, &[]);
    }
    if !silent.is_empty() {
        // Silent over one family of a dual-stack run while the other's queries are answered:
        // the DNS servers or their Service do not serve that family.
        let family = ctx
            .family_of(silent.iter().copied())
            .filter(|f| ctx.dual_stack && answered(ctx, f.other()));
        let summary = match family {
            Some(f) => format!(
                "cluster DNS does not answer over {f} while {} queries are answered, and the paths to it are not known to be blocked: the DNS pods or the kube-dns Service do not serve {f}",
                f.other()
            ),
            None => "cluster DNS does not answer although the paths to it are not known to be blocked: the DNS pods may be down or not listening".into(),
        };
        let mut f = Finding::new(
            Dns {
                state: DnsState::NoAnswer,
                nodes: Vec::new(),
            },
            Severity::Error,
            summary,
        );
        f.fix.push("kubectl -n kube-system get pods -l k8s-app=kube-dns -o wide; kubectl -n kube-system logs -l k8s-app=kube-dns".into());
        if family == Some(Family::Ipv6) {
            f.fix.push("kubectl -n kube-system get service kube-dns -o jsonpath='{.spec.ipFamilies} {.spec.clusterIPs}' (an IPv6 ClusterIP, and the DNS pods' IPv6 addresses in its EndpointSlices); the DNS pods must listen on [::]:53 (CoreDNS: no bind plugin limiting it to an IPv4 address)".into());
        }
        f.family = family;
        ctx.emit(findings, f, &silent, &[]);
    }
}

/// Whether some DNS query over `family` got an answer.
fn answered(ctx: &Ctx<'_>, family: Family) -> bool {
    ctx.results
        .iter()
        .any(|r| r.path == PathClass::Dns && r.result.outcome.is_ok() && r.to.family() == family)
}
