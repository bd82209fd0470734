//! What the host agents read on the nodes: CNI credentials that expired or went stale, a
//! kubelet pointed at an API server on its own host, and a DNS forward loop.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};

use probe_proto::Outcome;

use crate::inventory::ComponentRole;
use crate::model::PathClass;
use crate::model::time::{age, utc};

use super::context::{Ctx, failed};
use super::finding::{
    Credential, CredentialState, Dns, DnsState, Finding, Misconfiguration, MisconfigurationState,
    Severity,
};

/// One hour: a bound service-account token older than this was not refreshed (docs/incidents.md, incident 4).
const STALE_AFTER: u64 = 3600;

/// Whose credential a CNI kubeconfig holds: the workload to restart or reconfigure.
struct Owner {
    namespace: String,
    /// The inventory's component, when one is known to be it.
    component: Option<String>,
    /// The token's own service account (`system:serviceaccount:NS:NAME`), when it names one.
    account: Option<String>,
}

/// Words of a component's name that say nothing about which one it is.
const GENERIC: [&str; 8] = [
    "kube", "node", "ds", "cni", "plugin", "agent", "daemon", "system",
];

/// The owner of `kc`: the token's service account says whose credential it is; the component is
/// the inventory's one whose name shares a word with that account or with the file's path
/// (`kube-multus-ds` for `multus.d/multus.kubeconfig`), else the CNI when nothing else is known.
fn owner(ctx: &Ctx<'_>, kc: &probe_proto::KubeconfigFacts) -> Owner {
    let sa = kc.token.as_ref().and_then(|t| {
        t.subject
            .as_deref()
            .and_then(|s| s.strip_prefix("system:serviceaccount:"))
            .and_then(|s| s.split_once(':'))
            .map(|(ns, name)| (ns.to_string(), name.to_string()))
    });
    let hints: Vec<&str> = sa
        .iter()
        .map(|(_, n)| n.as_str())
        .chain(std::iter::once(kc.path.as_str()))
        .collect();
    let names_it = |c: &&crate::inventory::Component| {
        c.name
            .split('-')
            .filter(|w| w.len() >= 3 && !GENERIC.contains(w))
            .any(|w| hints.iter().any(|h| h.contains(w)))
    };
    let comps = &ctx.inv.components;
    let found = comps
        .iter()
        .filter(|c| c.role != ComponentRole::Cni)
        .find(names_it)
        .or_else(|| {
            comps
                .iter()
                .filter(|c| c.role == ComponentRole::Cni)
                .find(names_it)
        })
        .or_else(|| {
            // Only a token without an account leaves the CNI as the best guess.
            sa.is_none()
                .then(|| comps.iter().find(|c| c.role == ComponentRole::Cni))
                .flatten()
        });
    Owner {
        namespace: found.map_or_else(
            || {
                sa.as_ref()
                    .map_or("kube-system", |s| s.0.as_str())
                    .to_string()
            },
            |c| c.namespace.clone(),
        ),
        component: found.map(|c| c.name.clone()),
        account: sa.map(|(ns, n)| format!("{ns}/{n}")),
    }
}

impl Owner {
    /// `calico-node (token of kube-system/calico-cni-plugin)`, for sentences.
    fn text(&self) -> String {
        match (&self.component, &self.account) {
            (Some(c), Some(a)) => format!("{c} (token of service account {a})"),
            (Some(c), None) => c.clone(),
            (None, Some(a)) => format!("the pods of service account {a}"),
            (None, None) => "the CNI agent".into(),
        }
    }

    /// The command that finds its pod on `node`.
    fn pods(&self, node: &str) -> String {
        let ns = &self.namespace;
        match (&self.component, &self.account) {
            (Some(c), _) => format!(
                "kubectl -n {ns} get pods -o wide --field-selector spec.nodeName={node} | grep {c}"
            ),
            (None, Some(a)) => format!(
                "kubectl -n {ns} get pods -o wide --field-selector spec.nodeName={node},spec.serviceAccountName={}",
                a.rsplit('/').next().unwrap_or(a)
            ),
            (None, None) => {
                format!("kubectl -n {ns} get pods -o wide --field-selector spec.nodeName={node}")
            }
        }
    }
}

/// The fix for one CNI kubeconfig in `state` on `node`, addressed to its owner.
fn credential_fix(
    ctx: &Ctx<'_>,
    state: &CredentialState,
    node: &str,
    kc: &probe_proto::KubeconfigFacts,
) -> Vec<String> {
    let o = owner(ctx, kc);
    let (who, pods, path) = (o.text(), o.pods(node), &kc.path);
    let restart = format!(
        "restart {who} on {node} so it writes {path} afresh: {pods}, then kubectl -n {} delete pod <that pod>",
        o.namespace
    );
    let renew = "for good, run a version that renews its token with the TokenRequest API (projectcalico/calico#5910; Multus: the thick plugin)";
    match state {
        CredentialState::Expired | CredentialState::Stale => vec![format!("{restart}; {renew}")],
        CredentialState::Rejected => vec![
            format!(
                "the API server no longer accepts this token: check that its service account still exists ({}) — a deleted and recreated account or a rotated service-account signing key invalidates every token it had",
                o.account.as_deref().map_or_else(
                    || "kubectl auth whoami with the token".into(),
                    |a| {
                        let (ns, n) = a.split_once('/').unwrap_or(("kube-system", a));
                        format!("kubectl -n {ns} get serviceaccount {n}")
                    }
                )
            ),
            restart,
        ],
        CredentialState::NonExpiring => vec![format!(
            "{path} on {node} holds a legacy Secret token that never expires: move {who} to a bound token from the TokenRequest API (a projected service-account token) and delete the old token Secret"
        )],
        CredentialState::Insecure => vec![
            format!(
                "give {path} on {node} the cluster's CA in certificate-authority-data and remove insecure-skip-tls-verify: kubectl -n kube-system get configmap kube-root-ca.crt -o jsonpath='{{.data.ca\\.crt}}' | base64 -w0"
            ),
            format!(
                "if {who} writes that file, set the CA in its configuration instead, or its next restart undoes the fix"
            ),
        ],
        CredentialState::UntrustedServer => vec![format!(
            "compare the CA in {path} on {node} with the cluster's (kubectl -n kube-system get configmap kube-root-ca.crt -o yaml): if the cluster's CA was rotated, restart {who} so it writes a new kubeconfig ({pods}); if not, find out what answers at that address before anything sends it a credential"
        )],
        CredentialState::UnverifiableServer => vec![format!(
            "give {path} on {node} a readable CA (certificate-authority-data, or certificate-authority pointing at a file that exists): {who} writes it"
        )],
        _ => vec![restart],
    }
}

/// What a CNI token's facts say: (state, sentence), or `None` when it is fine.
fn credential_state(
    kc: &probe_proto::KubeconfigFacts,
    node: &str,
) -> Option<(CredentialState, String)> {
    let path = &kc.path;
    // A kubeconfig the agent could not read or parse is one the CNI cannot use either. The
    // agent's error names the file and the field, never a value, so it may be quoted.
    if let Some(e) = &kc.error {
        // It mostly starts with the path, which the sentence says once.
        let why = e
            .strip_prefix(path.as_str())
            .map_or(e.as_str(), |rest| rest.trim_start_matches(':').trim_start());
        let sep = if why.starts_with("is ") { " " } else { ": " };
        return Some((
            CredentialState::Unreadable,
            format!("{path} on {node}{sep}{why}; the CNI cannot reach the API server with it"),
        ));
    }
    let server = kc.server.as_deref().unwrap_or("its server");
    match kc.server_trust {
        Some(probe_proto::ServerTrust::Untrusted) => {
            return Some((
                CredentialState::UntrustedServer,
                format!(
                    "the API server at {server} named in {path} on {node} is not signed by the CA this kubeconfig trusts: a rotated CA or an impostor (the credential was not sent)"
                ),
            ));
        }
        Some(probe_proto::ServerTrust::Unverifiable) => {
            return Some((
                CredentialState::UnverifiableServer,
                format!(
                    "{path} on {node} gives no usable CA for {server}, so the credential was not sent and not checked"
                ),
            ));
        }
        _ => {}
    }
    let insecure = kc.insecure_skip_tls_verify.then(|| {
        (
            CredentialState::Insecure,
            format!(
                "{path} on {node} says insecure-skip-tls-verify: its credential goes to whoever answers at {server}"
            ),
        )
    });
    let Some(t) = kc.token.as_ref() else {
        return insecure;
    };
    let who = t
        .subject
        .clone()
        .unwrap_or_else(|| "an unknown subject".into());
    let rejected = kc
        .check
        .as_ref()
        .is_some_and(|c| c.outcome == Outcome::Unauthorized);
    if let Some(exp) = t.expires_at.filter(|e| *e <= t.checked_at) {
        let api = if rejected {
            "; the API server rejects it (HTTP 401)"
        } else {
            ""
        };
        let ago = age(t.checked_at.saturating_sub(exp));
        return Some((
            CredentialState::Expired,
            format!(
                "the token in {path} on {node} ({who}) expired {} ({ago} ago){api}",
                utc(exp)
            ),
        ));
    }
    if rejected {
        return Some((
            CredentialState::Rejected,
            format!("the API server rejects the token in {path} on {node} ({who}) with 401"),
        ));
    }
    if let Some(iat) = t
        .issued_at
        .filter(|iat| t.bound && t.checked_at.saturating_sub(*iat) > STALE_AFTER)
    {
        let ago = age(t.checked_at.saturating_sub(iat));
        return Some((
            CredentialState::Stale,
            format!(
                "the token in {path} on {node} ({who}) was issued {ago} ago ({}) and never refreshed",
                utc(iat)
            ),
        ));
    }
    if t.format == "jwt" && t.expires_at.is_none() {
        return Some((
            CredentialState::NonExpiring,
            format!("the token in {path} on {node} ({who}) never expires: a legacy secret token"),
        ));
    }
    insecure
}

/// Per credential state: the nodes, the sentences, the evidence.
#[derive(Default)]
struct CredentialGroup {
    nodes: BTreeSet<String>,
    sentences: Vec<String>,
    evidence: Vec<usize>,
    /// One fix per kubeconfig, addressed to its owner, in the order found.
    fix: Vec<String>,
}

/// What the node checks gathered before they become findings.
#[derive(Default)]
struct NodeFindings {
    credentials: BTreeMap<CredentialState, CredentialGroup>,
    /// (node, result, sentence)
    localhost: Vec<(String, usize, String)>,
    /// (node, result, looping nameservers)
    loops: Vec<(String, usize, Vec<String>)>,
    /// (node, result, what could not be read): files other than CNI kubeconfigs.
    unreadable: Vec<(String, usize, String)>,
}

pub(super) fn node_checks(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) {
    let mut found = NodeFindings::default();
    let corefile_forwards_to_resolv = ctx
        .inv
        .cluster
        .dns
        .as_ref()
        .and_then(|d| d.corefile.as_deref())
        .is_some_and(|c| {
            c.lines().any(|l| {
                let l = l.trim();
                l.starts_with("forward") && l.contains("/etc/resolv.conf")
            })
        });
    let cluster_dns: Vec<IpAddr> = ctx
        .inv
        .cluster
        .dns
        .iter()
        .flat_map(|d| std::iter::once(d.service.ip()).chain(d.endpoints.iter().map(SocketAddr::ip)))
        .collect();
    for (i, r) in ctx.results.iter().enumerate() {
        let Some(facts) = r
            .result
            .node
            .as_ref()
            .filter(|_| r.path == PathClass::NodeConfig)
        else {
            continue;
        };
        let node = r.from.node.clone();
        // `errors` repeats each kubeconfig's own error; the CNI ones become credential findings.
        for e in facts.errors.iter().filter(|e| {
            !facts
                .cni_kubeconfigs
                .iter()
                .any(|kc| kc.error.as_ref() == Some(*e))
        }) {
            found.unreadable.push((node.clone(), i, e.clone()));
        }
        for kc in &facts.cni_kubeconfigs {
            if let Some((state, sentence)) = credential_state(kc, &node) {
                let fix = credential_fix(ctx, &state, &node, kc);
                let g = found.credentials.entry(state).or_default();
                for l in fix {
                    if !g.fix.contains(&l) {
                        g.fix.push(l);
                    }
                }
                g.nodes.insert(node.clone());
                g.sentences.push(sentence);
                g.evidence.push(i);
            }
        }
        let control_plane = ctx
            .node
            .get(node.as_str())
            .is_some_and(|&n| ctx.inv.nodes[n as usize].is_control_plane());
        for kc in &facts.kubelet {
            let Some(server) = &kc.server else { continue };
            let local = ["https://localhost", "https://127.", "https://[::1]"]
                .iter()
                .any(|p| server.starts_with(p));
            let answered = kc.check.as_ref().is_some_and(|c| c.outcome == Outcome::Ok);
            if local && !control_plane && !answered {
                found.localhost.push((
                    node.clone(),
                    i,
                    format!(
                        "{} on {node} says server: {server}, and nothing listens there",
                        kc.path
                    ),
                ));
            }
        }
        if let Some(rc) = facts
            .resolv_conf
            .as_ref()
            .filter(|_| corefile_forwards_to_resolv)
        {
            let looping = |n: &&String| {
                n.parse::<IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback() || cluster_dns.contains(&ip))
            };
            let bad: Vec<String> = rc.nameservers.iter().filter(looping).cloned().collect();
            if !bad.is_empty() {
                found.loops.push((node, i, bad));
            }
        }
    }
    credential_findings(ctx, findings, found.credentials);
    localhost_finding(ctx, findings, &found.localhost);
    loop_finding(ctx, findings, &found.loops);
    unreadable_finding(ctx, findings, &found.unreadable);
}

fn credential_findings(
    ctx: &mut Ctx<'_>,
    findings: &mut Vec<Finding>,
    groups: BTreeMap<CredentialState, CredentialGroup>,
) {
    for (state, g) in groups {
        let severity = if matches!(
            state,
            CredentialState::Expired
                | CredentialState::Rejected
                | CredentialState::UntrustedServer
                | CredentialState::Unreadable
        ) {
            Severity::Error
        } else {
            Severity::Warning
        };
        let summary = format!("CNI credential {state}: {}", g.sentences.join("; "));
        let mut f = Finding::new(
            Credential {
                state,
                nodes: g.nodes.into_iter().collect(),
            },
            severity,
            summary,
        );
        f.fix = g.fix;
        ctx.emit(findings, f, &g.evidence, &[]);
    }
}

fn localhost_finding(
    ctx: &mut Ctx<'_>,
    findings: &mut Vec<Finding>,
    localhost: &[(String, usize, String)],
) {
    if localhost.is_empty() {
        return;
    }
    let api = super::api_address::api_address(ctx);
    let cp = api.as_ref().map_or_else(
        || "<control-plane address>:6443".into(),
        ToString::to_string,
    );
    let said: Vec<String> = localhost.iter().map(|l| l.2.clone()).collect();
    let nodes: Vec<String> = localhost.iter().map(|l| l.0.clone()).collect();
    let mut f = Finding::new(
        Misconfiguration {
            state: None,
            nodes: nodes.clone(),
        },
        Severity::Error,
        format!(
            "the kubelet points at an API server on its own host: {}",
            said.join("; ")
        ),
    );
    for n in &nodes {
        f.fix.push(format!("on {n}: set server: https://{cp} in /etc/kubernetes/kubelet.conf, then systemctl restart kubelet"));
    }
    f.notes.extend(api.and_then(|a| a.note));
    ctx.emit(
        findings,
        f,
        &localhost.iter().map(|l| l.1).collect::<Vec<_>>(),
        &[],
    );
}

fn loop_finding(
    ctx: &mut Ctx<'_>,
    findings: &mut Vec<Finding>,
    loops: &[(String, usize, Vec<String>)],
) {
    // CoreDNS uses the resolv.conf of the node it runs on.
    let dns_nodes: BTreeSet<&str> = ctx.dns_backends.iter().map(|&n| ctx.name(n)).collect();
    let relevant: Vec<&(String, usize, Vec<String>)> = loops
        .iter()
        .filter(|l| dns_nodes.is_empty() || dns_nodes.contains(l.0.as_str()))
        .collect();
    if relevant.is_empty() {
        return;
    }
    // What the loop breaks: names outside the cluster domain, from every pod.
    let cons: Vec<usize> = ctx
        .results
        .iter()
        .enumerate()
        .filter(|(i, r)| r.path == PathClass::Dns && failed(r) && !ctx.explained.contains(i))
        .filter(|(_, r)| {
            r.result
                .dns
                .as_ref()
                .is_some_and(|d| !d.name.ends_with(".cluster.local"))
        })
        .map(|(i, _)| i)
        .collect();
    let servers: BTreeSet<String> = relevant.iter().flat_map(|l| l.2.iter().cloned()).collect();
    let nodes: Vec<&str> = relevant.iter().map(|l| l.0.as_str()).collect();
    let mut f = Finding::new(
        Dns {
            state: DnsState::Loop,
            nodes: nodes.iter().map(ToString::to_string).collect(),
        },
        Severity::Error,
        format!(
            "DNS forward loop: the Corefile forwards to /etc/resolv.conf, and resolv.conf on {} names {} — the cluster DNS forwards to itself (CoreDNS: plugin/loop: Loop detected)",
            nodes.join(", "),
            servers.into_iter().collect::<Vec<_>>().join(", ")
        ),
    );
    f.fix.push("in the coredns ConfigMap, replace `forward . /etc/resolv.conf` with `forward . <your real upstream resolvers>`".into());
    f.fix.push("or give the kubelet a resolv.conf with real upstreams (resolvConf: /run/systemd/resolve/resolv.conf) and restart the DNS pods".into());
    let evidence: Vec<usize> = relevant.iter().map(|l| l.1).collect();
    ctx.emit(findings, f, &evidence, &cons);
}

/// Node files other than CNI kubeconfigs that the host agent could not read (a kubelet
/// kubeconfig, resolv.conf): what the node checks say about them is missing.
fn unreadable_finding(
    ctx: &mut Ctx<'_>,
    findings: &mut Vec<Finding>,
    unreadable: &[(String, usize, String)],
) {
    if unreadable.is_empty() {
        return;
    }
    let said: Vec<String> = unreadable
        .iter()
        .map(|(node, _, e)| format!("on {node}: {e}"))
        .collect();
    let nodes: BTreeSet<String> = unreadable.iter().map(|l| l.0.clone()).collect();
    let mut f = Finding::new(
        Misconfiguration {
            state: Some(MisconfigurationState::Unreadable),
            nodes: nodes.into_iter().collect(),
        },
        Severity::Warning,
        format!(
            "the host agent could not read a node file, so the node checks could not judge it: {}",
            said.join("; ")
        ),
    );
    f.fix.push(
        "fix or restore the file named (kubeadm writes /etc/kubernetes/kubelet.conf; the kubelet reads /etc/resolv.conf), then run prober again".into(),
    );
    let evidence: BTreeSet<usize> = unreadable.iter().map(|l| l.1).collect();
    ctx.emit(findings, f, &evidence.into_iter().collect::<Vec<_>>(), &[]);
}
