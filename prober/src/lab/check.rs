//! Reachability expectations: each becomes a probe run by the named agent (through the same exec
//! contract as any runtime), compared with the outcome the scenario says it must have.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr};

use crate::inventory::Family;
use std::time::{Duration, Instant};

use probe_proto::{Outcome, ProbeResult};
use serde_json::{Value, json};

use super::Lab;
use super::build::{AGENT_PORT, API_PORT, API_SERVICE, DNS_SERVICE, Layout};
use super::scenario::{FindingPattern, Reach, ReachProbe};
use crate::model::{AgentKind, AgentRef};
use crate::runtime::Runtime;
use crate::runtime::local::Local;

const PROBE_TIMEOUT_MS: u64 = 2000;

/// One checked expectation.
#[derive(Debug, Clone)]
pub struct Checked {
    pub reach: Reach,
    pub outcome: Option<Outcome>,
    pub detail: String,
    pub seen_on: Option<Vec<String>>,
    pub pass: bool,
}

/// Why an expectation could not be turned into a probe or run: names the expectation's field or
/// the agent.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("target {to:?}: expected NODE/host, NODE/pod or NODE/vtep")]
    TargetShape { to: String },
    #[error(
        "target {to:?}: no IPv6 address for a {probe:?} probe (family: ipv6 needs a lab with IPv6 and a node, pod, Service, DNS pod or API server target; a vtep one needs the IPv6 underlay of ipFamilies: [ipv6] or overlay.ipv6Tunnel)"
    )]
    NoIpv6 { to: String, probe: ReachProbe },
    #[error("target {to:?}: unknown node")]
    TargetNode { to: String },
    #[error("target {to:?}: the lab has no control-plane node")]
    NoControlPlane { to: String },
    #[error("source {from:?}: expected NODE/host or NODE/pod")]
    SourceShape { from: String },
    #[error("source {from:?}: unknown node")]
    SourceNode { from: String },
    #[error("target {to:?}: a {probe} probe needs a node target")]
    NeedsNode { to: String, probe: &'static str },
    #[error("icmpFrom {0:?}: expected an IP address or `router`")]
    IcmpFrom(String),
    #[error("the probes for agent {agent}: {source}")]
    Plan {
        agent: AgentRef,
        source: probe_proto::PlanError,
    },
    #[error("agent {agent}: {source}")]
    Run {
        agent: AgentRef,
        source: crate::runtime::RuntimeError,
    },
}

/// Where a probe goes.
struct Target {
    address: std::net::IpAddr,
    port: u16,
    node: Option<usize>,
}

fn resolve_target(
    l: &Layout,
    to: &str,
    probe: ReachProbe,
    port: Option<u16>,
    family: Option<crate::inventory::Family>,
) -> Result<Target, CheckError> {
    if family == Some(crate::inventory::Family::Ipv6) {
        return resolve_target6(l, to, probe, port);
    }
    let default_port = |p: u16| port.unwrap_or(p);
    let (address, port, node) = match to {
        "service/kubernetes" => (API_SERVICE, default_port(443), None),
        "service/kube-dns" => (DNS_SERVICE, default_port(53), None),
        "dns-pod" => (l.dns_pod.address, default_port(53), Some(l.dns_node)),
        "upstream-dns" => (l.upstream_dns, default_port(53), None),
        "localhost" => (Ipv4Addr::LOCALHOST, default_port(API_PORT), None),
        "apiserver" => {
            let cp = l
                .nodes
                .iter()
                .position(|n| n.control_plane)
                .ok_or_else(|| CheckError::NoControlPlane { to: to.into() })?;
            (l.nodes[cp].address, default_port(API_PORT), Some(cp))
        }
        _ => {
            let (node, what) = to
                .split_once('/')
                .ok_or_else(|| CheckError::TargetShape { to: to.into() })?;
            let i = l
                .nodes
                .iter()
                .position(|n| n.name == node)
                .ok_or_else(|| CheckError::TargetNode { to: to.into() })?;
            let n = &l.nodes[i];
            let tls_default = if probe == ReachProbe::Tls {
                API_PORT
            } else {
                AGENT_PORT
            };
            match what {
                "host" => (n.address, default_port(tls_default), Some(i)),
                "pod" => (n.pods[0].address, default_port(AGENT_PORT), Some(i)),
                "vtep" => (n.vtep, 0, Some(i)),
                _ => return Err(CheckError::TargetShape { to: to.into() }),
            }
        }
    };
    Ok(Target {
        address: address.into(),
        port,
        node,
    })
}

/// [`resolve_target`] to the target's IPv6 address.
fn resolve_target6(
    l: &Layout,
    to: &str,
    probe: ReachProbe,
    port: Option<u16>,
) -> Result<Target, CheckError> {
    let none = || CheckError::NoIpv6 {
        to: to.into(),
        probe,
    };
    // The IPv4 target names the node; its IPv6 twin is the same thing's other address.
    let v4 = resolve_target(l, to, probe, port, None)?;
    let address = match to {
        "service/kubernetes" => Some(super::build::API_SERVICE6),
        "service/kube-dns" => Some(super::build::DNS_SERVICE6),
        "dns-pod" => l.dns_pod.address6,
        _ => match (v4.node, to.split_once('/').map(|(_, w)| w)) {
            (Some(i), Some("pod")) => l.nodes[i].pods[0].address6,
            // A VTEP over the IPv6 underlay alone: an IPv6-only lab's, or the IPv6 twin's.
            (Some(i), Some("vtep")) => l.vtep6_of(&l.nodes[i]).map(|(a, _)| a),
            (Some(i), _) => l.nodes[i].address6,
            (None, _) => None,
        },
    }
    .ok_or_else(none)?;
    Ok(Target {
        address: address.into(),
        ..v4
    })
}

fn agent_of(l: &Layout, from: &str) -> Result<(AgentRef, usize), CheckError> {
    let (node, which) = from
        .split_once('/')
        .ok_or_else(|| CheckError::SourceShape { from: from.into() })?;
    let i = l
        .nodes
        .iter()
        .position(|n| n.name == node)
        .ok_or_else(|| CheckError::SourceNode { from: from.into() })?;
    match which {
        "host" => Ok((
            AgentRef {
                node: node.to_string(),
                agent: AgentKind::Host,
            },
            i,
        )),
        "pod" => Ok((
            AgentRef {
                node: node.to_string(),
                agent: AgentKind::Pod,
            },
            i,
        )),
        _ => Err(CheckError::SourceShape { from: from.into() }),
    }
}

/// The probe spec (JSON) for one expectation.
fn spec(lab: &Lab, id: &str, r: &Reach, from_node: usize, nonce: u32) -> Result<Value, CheckError> {
    let l = &lab.layout;
    let t = resolve_target(l, &r.to, r.probe, r.port, r.family)?;
    let addr = t.address.to_string();
    Ok(match r.probe {
        ReachProbe::Tcp => {
            json!({"id": id, "kind": "tcp", "address": addr, "port": t.port, "echo": t.port == AGENT_PORT})
        }
        ReachProbe::Udp => json!({"id": id, "kind": "udp", "address": addr, "port": t.port}),
        ReachProbe::Icmp => json!({"id": id, "kind": "icmp", "address": addr}),
        ReachProbe::Vtep => {
            t.node.ok_or_else(|| CheckError::NeedsNode {
                to: r.to.clone(),
                probe: "vtep",
            })?;
            json!({"id": id, "kind": "vtep", "address": addr})
        }
        ReachProbe::Mtu => {
            json!({"id": id, "kind": "mtu", "address": addr, "size": r.size.unwrap_or(1400)})
        }
        ReachProbe::Tls => {
            let mut v = json!({"id": id, "kind": "tls", "address": addr, "port": t.port,
                "caFile": l.state_dir.join("pki/ca.crt"), "serverName": "kubernetes.default.svc"});
            if r.with_cni_token {
                v["tokenFile"] = json!(cni_token_file(l, from_node));
            }
            v
        }
        ReachProbe::Dns => {
            json!({"id": id, "kind": "dns", "name": r.name.clone().unwrap_or_else(|| "kubernetes.default.svc.cluster.local".into()),
            "server": std::net::SocketAddr::new(t.address, t.port).to_string(), "protocol": r.transport.clone().unwrap_or_else(|| "udp".into())})
        }
        ReachProbe::Vxlan => {
            let n = t.node.ok_or_else(|| CheckError::NeedsNode {
                to: r.to.clone(),
                probe: "vxlan",
            })?;
            let (src, dst) = (&l.nodes[from_node], &l.nodes[n]);
            // Over IPv6, to the MAC of the device that listens there (an IPv6 twin has its own).
            let mac = match (r.family, l.vtep6_of(dst)) {
                (Some(Family::Ipv6), Some((_, mac))) => mac,
                _ => dst.mac,
            };
            json!({"id": id, "kind": "vxlan", "address": addr, "nonce": nonce,
                "port": lab.scenario.overlay().port().map_or(0, probe_proto::Port::get),
                "vni": super::build::vni(&lab.scenario),
                "innerSource": src.vtep.to_string(), "innerDestination": dst.vtep.to_string(), "destinationMac": mac.to_string()})
        }
    })
}

/// Where the lab keeps a copy of a node's CNI token, so expectations can send it.
#[must_use]
pub fn cni_token_file(l: &Layout, node: usize) -> std::path::PathBuf {
    l.state_dir.join("tokens").join(&l.nodes[node].name)
}

/// The address an `icmpFrom` expectation names: `router` is the source zone's router in the
/// expectation's family.
fn expected_offender(l: &Layout, r: &Reach) -> Option<Result<IpAddr, CheckError>> {
    let want = r.icmp_from.as_deref()?;
    if want == "router" {
        let zone = agent_of(l, &r.from)
            .ok()
            .map_or(0, |(_, n)| l.nodes[n].zone);
        let node = l.nodes.iter().find(|n| n.zone == zone);
        return Some(Ok(match (r.family, node) {
            (Some(Family::Ipv6), Some(n)) => IpAddr::V6(n.gateway6()),
            (_, Some(n)) => IpAddr::V4(n.gateway()),
            (_, None) => IpAddr::V4(l.upstream_dns),
        }));
    }
    Some(want.parse().map_err(|_| CheckError::IcmpFrom(want.into())))
}

/// The lab's agents, reached through the local runtime exactly as the matrix reaches them, on
/// the caller's tokio runtime.
struct Agents {
    local: Local,
}

impl Agents {
    fn new(lab: &Lab) -> Self {
        let inv = super::build::inventory(&lab.scenario, &lab.layout);
        Self {
            local: Local::new(&inv, lab.agent_bin.display().to_string()),
        }
    }

    /// Runs `probes` (JSON specs) on `agent`; results by id.
    async fn run(
        &self,
        agent: &AgentRef,
        probes: &[Value],
        deadline_ms: u64,
    ) -> Result<BTreeMap<String, ProbeResult>, CheckError> {
        let text = json!({"deadlineMs": deadline_ms, "probeTimeoutMs": PROBE_TIMEOUT_MS, "probes": probes}).to_string();
        let plan = probe_proto::parse_plan(&text).map_err(|source| CheckError::Plan {
            agent: agent.clone(),
            source,
        })?;
        let (tx, mut rx) = tokio::sync::mpsc::channel::<ProbeResult>(64);
        let collect = async {
            let mut out = BTreeMap::new();
            while let Some(r) = rx.recv().await {
                out.insert(r.id.clone(), r);
            }
            out
        };
        let (ran, out) = tokio::join!(self.local.run(agent, plan, tx), collect);
        ran.map(|()| out).map_err(|source| CheckError::Run {
            agent: agent.clone(),
            source,
        })
    }
}

/// Runs every reachability expectation of the lab's scenario.
pub async fn run(lab: &Lab) -> Vec<Checked> {
    let l = &lab.layout;
    let reaches = &lab.scenario.expect.reachability;
    let agents = Agents::new(lab);
    let mut by_agent: BTreeMap<AgentRef, Vec<Value>> = BTreeMap::new();
    // Errors as text: one agent's failure is every one of its expectations' detail.
    let mut errors: BTreeMap<usize, String> = BTreeMap::new();
    let mut nonces = BTreeMap::new();
    for (i, r) in reaches.iter().enumerate() {
        let nonce = 0x5000_0000 + u32::try_from(i).unwrap_or(0);
        match agent_of(l, &r.from).and_then(|(agent, node)| {
            spec(lab, &format!("r{i}"), r, node, nonce).map(|s| (agent, s))
        }) {
            Ok((agent, s)) => by_agent.entry(agent).or_default().push(s),
            Err(e) => {
                errors.insert(i, e.to_string());
            }
        }
        if r.probe == ReachProbe::Vxlan {
            nonces.insert(i, nonce);
        }
    }
    let sent_at = probe_proto::util::unix_ms();
    let mut results: BTreeMap<String, ProbeResult> = BTreeMap::new();
    for (agent, probes) in &by_agent {
        match agents.run(agent, probes, PROBE_TIMEOUT_MS * 3).await {
            Ok(r) => results.extend(r),
            Err(e) => {
                let e = e.to_string();
                for p in probes {
                    let id = p["id"].as_str().unwrap_or_default();
                    if let Some(i) = id.strip_prefix('r').and_then(|n| n.parse().ok()) {
                        errors.insert(i, e.clone());
                    }
                }
            }
        }
    }
    let mut checked = Vec::with_capacity(reaches.len());
    for (i, r) in reaches.iter().enumerate() {
        let failed = |detail: String| Checked {
            reach: r.clone(),
            outcome: None,
            detail,
            seen_on: None,
            pass: false,
        };
        if let Some(e) = errors.get(&i) {
            checked.push(failed(e.clone()));
            continue;
        }
        let Some(res) = results.get(&format!("r{i}")) else {
            checked.push(failed(format!(
                "agent {}: returned no result for it",
                r.from
            )));
            continue;
        };
        let seen_on = match nonces.get(&i) {
            Some(&nonce) => Some(seen(lab, &agents, r, nonce, sent_at).await),
            None => None,
        };
        let mut detail = res.detail.clone();
        let offender_ok = match expected_offender(l, r) {
            None => true,
            Some(Err(e)) => {
                detail = e.to_string();
                false
            }
            Some(Ok(want)) => {
                let got = res.icmp.and_then(|i| i.from);
                if let Some(why) = offender_mismatch(got, want) {
                    detail = format!("{detail} ({why})");
                }
                got == Some(want)
            }
        };
        let seen_matches = r
            .seen_on
            .as_ref()
            .is_none_or(|want| seen_on.as_ref() == Some(&sorted(want)));
        let pass = res.outcome == r.outcome && seen_matches && offender_ok;
        checked.push(Checked {
            reach: r.clone(),
            outcome: Some(res.outcome),
            detail,
            seen_on,
            pass,
        });
    }
    checked
}

/// Why the ICMP error's sender is not the expected one, in words; `None` when it is.
fn offender_mismatch(got: Option<IpAddr>, want: IpAddr) -> Option<String> {
    match got {
        Some(a) if a == want => None,
        Some(a) => Some(format!("ICMP from {a}, want {want}")),
        None => Some(format!("no ICMP error, want one from {want}")),
    }
}

/// Interface or node names for a line: `eth0, flannel.1`, or `none`.
fn listed(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

fn sorted(v: &[String]) -> Vec<String> {
    let mut v = v.to_vec();
    v.sort();
    v.dedup();
    v
}

/// Asks the target node's host agent which interfaces saw `nonce`, waiting briefly for both the
/// underlay and the VXLAN device.
async fn seen(lab: &Lab, agents: &Agents, r: &Reach, nonce: u32, since: u64) -> Vec<String> {
    let l = &lab.layout;
    let Ok(t) = resolve_target(l, &r.to, r.probe, r.port, r.family) else {
        return Vec::new();
    };
    let Some(node) = t.node else {
        return Vec::new();
    };
    let want = r.seen_on.as_ref().map_or(2, Vec::len);
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let probe = json!({"id": "seen", "kind": "seen", "sinceMs": since.saturating_sub(1000), "nonces": [nonce]});
        let got: Vec<String> = agents
            .run(
                &AgentRef {
                    node: l.nodes[node].name.clone(),
                    agent: AgentKind::Host,
                },
                &[probe],
                3000,
            )
            .await
            .ok()
            .and_then(|mut m| m.remove("seen"))
            .and_then(|r| r.seen)
            .map(|s| sorted(&s.into_iter().map(|x| x.interface).collect::<Vec<_>>()))
            .unwrap_or_default();
        if got.len() >= want || Instant::now() > deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A readable report; `true` when every expectation held.
#[must_use]
pub fn render(checked: &[Checked]) -> (String, bool) {
    let mut out = String::new();
    let mut ok = true;
    for c in checked {
        let r = &c.reach;
        let mark = if c.pass { "ok  " } else { "FAIL" };
        ok &= c.pass;
        let port = r.port.map(|p| format!(":{p}")).unwrap_or_default();
        let got = c
            .outcome
            .map_or_else(|| "not run".to_string(), |o| o.to_string());
        let mut line = format!(
            "{mark} {:<8} -> {:<20} {:<5} want {:<11} got {got}",
            r.from,
            format!(
                "{}{port}{}",
                r.to,
                if r.family == Some(crate::inventory::Family::Ipv6) {
                    " (ipv6)"
                } else {
                    ""
                }
            ),
            crate::report::kebab(r.probe),
            r.outcome.to_string()
        );
        if let Some(want) = &r.seen_on {
            let _ = std::fmt::Write::write_fmt(
                &mut line,
                format_args!(
                    "; seen on want {} got {}",
                    listed(want),
                    listed(c.seen_on.as_deref().unwrap_or_default())
                ),
            );
        }
        out.push_str(line.trim_end());
        out.push('\n');
        if !c.pass {
            let _ = writeln!(out, "       {}", c.detail);
        }
    }
    (out, ok)
}

/// Compares the diagnosis with the scenario's finding expectations: the lines to print and how
/// many expectations failed.
#[must_use]
pub fn findings(
    expect: &super::scenario::Expect,
    found: &[crate::diagnose::Finding],
) -> (String, usize) {
    let mut out = String::new();
    let mut failed = 0;
    let show = |p: &FindingPattern| serde_json::to_string(p).unwrap_or_default();
    for want in &expect.findings {
        if found.iter().any(|f| want.matches(f)) {
            let _ = writeln!(out, "ok   finding     {}", show(want));
        } else {
            failed += 1;
            let _ = writeln!(out, "FAIL finding     {} was not found", show(want));
        }
    }
    for not in &expect.not_findings {
        match found.iter().find(|f| not.matches(f)) {
            Some(f) => {
                failed += 1;
                let _ = writeln!(out, "FAIL no finding  {} but: {}", show(not), f.summary);
            }
            None => {
                let _ = writeln!(out, "ok   no finding  {}", show(not));
            }
        }
    }
    (out, failed)
}

/// A join's expectations, strictly: each fault is named once and nothing else is called broken.
/// Every finding must be matched by some `expect.findings` pattern, each pattern must match
/// exactly one finding, `notFindings` hold as for a matrix, and the exit code is 1 when any of
/// the (all expected) findings is an error, else 0 (a healthy join). The lines to print and how
/// many checks failed.
#[must_use]
pub fn join_findings(
    expect: &super::scenario::Expect,
    found: &[crate::diagnose::Finding],
    exit_code: u8,
) -> (String, usize) {
    use crate::diagnose::Severity;
    use crate::report::{EXIT_FAILURES, EXIT_OK};
    let mut out = String::new();
    let mut failed = 0;
    let show = |p: &FindingPattern| serde_json::to_string(p).unwrap_or_default();
    for want in &expect.findings {
        let hits: Vec<&crate::diagnose::Finding> =
            found.iter().filter(|f| want.matches(f)).collect();
        match hits.as_slice() {
            [_] => {
                let _ = writeln!(out, "ok   finding     {}", show(want));
            }
            [] => {
                failed += 1;
                let _ = writeln!(out, "FAIL finding     {} was not found", show(want));
            }
            many => {
                failed += 1;
                let _ = writeln!(
                    out,
                    "FAIL finding     {} matches {} findings, not one: {}",
                    show(want),
                    many.len(),
                    many.iter()
                        .map(|f| f.summary.as_str())
                        .collect::<Vec<_>>()
                        .join("; ")
                );
            }
        }
    }
    for f in found {
        if !expect.findings.iter().any(|w| w.matches(f)) {
            failed += 1;
            let _ = writeln!(out, "FAIL unexpected  {}", f.summary);
        }
    }
    for not in &expect.not_findings {
        if let Some(f) = found.iter().find(|f| not.matches(f)) {
            failed += 1;
            let _ = writeln!(out, "FAIL no finding  {} but: {}", show(not), f.summary);
        } else {
            let _ = writeln!(out, "ok   no finding  {}", show(not));
        }
    }
    let want = if found.iter().any(|f| f.severity == Severity::Error) {
        EXIT_FAILURES
    } else {
        EXIT_OK
    };
    if exit_code == want {
        let _ = writeln!(out, "ok   exit code   {exit_code}");
    } else {
        failed += 1;
        let _ = writeln!(
            out,
            "FAIL exit code   {exit_code}, a join with these findings exits {want}"
        );
    }
    (out, failed)
}

#[cfg(test)]
mod tests {
    use super::{Checked, join_findings, offender_mismatch, render};
    use crate::diagnose::Finding;
    use crate::lab::scenario::Expect;

    /// A finding of `kind` on tcp/`port`, as a report writes it (a firewall gap's direction
    /// being one way).
    fn finding(kind: &str, severity: &str, port: u16) -> Finding {
        serde_json::from_value(serde_json::json!({
            "kind": kind, "severity": severity, "summary": format!("{kind} {port}"),
            "evidence": [], "consequences": [], "port": port, "protocol": "tcp",
            "direction": "one",
        }))
        .unwrap()
    }

    fn expect(yaml: &str) -> Expect {
        serde_saphyr::from_str(yaml).unwrap()
    }

    /// `family: ipv6` resolves a target to its IPv6 address in a lab that has one, and is
    /// refused, naming the target, where there is none or the probe speaks IPv4 only.
    #[test]
    fn ipv6_targets_resolve_to_the_same_things_ipv6_address() {
        use super::{ReachProbe, resolve_target};
        use crate::inventory::Family;
        use crate::lab::scenario::Scenario;
        let at = |yaml: &str, to: &str, probe: ReachProbe| {
            let s = Scenario::parse(yaml).unwrap();
            let l = crate::lab::build::layout(&s, "plab-t-", std::path::Path::new("/tmp/x"));
            resolve_target(&l, to, probe, None, Some(Family::Ipv6))
                .map(|t| (t.address.to_string(), t.port))
                .map_err(|e| e.to_string())
        };
        let dual = "ipFamilies: [ipv4, ipv6]";
        for (to, probe, want) in [
            ("n2/pod", ReachProbe::Tcp, ("fd00:10:244:2::2", 9917)),
            ("n3/host", ReachProbe::Udp, ("fd00:56::c", 9917)),
            (
                "service/kubernetes",
                ReachProbe::Tls,
                ("fd00:10:96::1", 443),
            ),
            ("service/kube-dns", ReachProbe::Dns, ("fd00:10:96::a", 53)),
            ("apiserver", ReachProbe::Tls, ("fd00:56::a", 6443)),
        ] {
            assert_eq!(
                at(dual, to, probe),
                Ok((want.0.to_string(), want.1)),
                "{to}"
            );
        }
        assert_eq!(
            at(dual, "n2/pod", ReachProbe::Mtu).map(|t| t.0),
            Ok("fd00:10:244:2::2".to_string())
        );
        // A VTEP has an IPv6 address over the IPv6 underlay alone (an IPv6-only lab's or a twin's).
        let e = at(dual, "n2/vtep", ReachProbe::Vtep).unwrap_err();
        assert!(e.contains("n2/vtep") && e.contains("IPv6"), "{e}");
        assert_eq!(
            at("ipFamilies: [ipv6]", "n2/vtep", ReachProbe::Vtep).map(|t| t.0),
            Ok("fd00:10:244:2::".to_string())
        );
        assert_eq!(
            at(
                "ipFamilies: [ipv4, ipv6]\noverlay: {mode: vxlan, ipv6Tunnel: true}",
                "n2/vtep",
                ReachProbe::Vtep
            )
            .map(|t| t.0),
            Ok("fd00:10:244:2::".to_string()),
            "the IPv6 twin's VTEP"
        );
        assert_eq!(
            at("ipFamilies: [ipv6]", "n2/host", ReachProbe::Vxlan).map(|t| t.0),
            Ok("fd00:56::b".to_string())
        );
        let e = at("{}", "n2/pod", ReachProbe::Tcp).unwrap_err();
        assert!(e.contains("n2/pod") && e.contains("IPv6"), "{e}");
    }

    #[test]
    fn a_join_names_each_fault_once_and_nothing_else() {
        let gap = finding("firewall-gap", "error", 10250);
        let one = expect("findings: [{kind: firewall-gap, port: 10250}]");
        assert_eq!(join_findings(&one, std::slice::from_ref(&gap), 1).1, 0);
        // The wrong exit code, an unexpected finding, a pattern matching two: each fails.
        assert_eq!(join_findings(&one, std::slice::from_ref(&gap), 0).1, 1);
        let extra = finding("port-conflict", "warning", 179);
        let (text, failed) = join_findings(&one, &[gap.clone(), extra], 1);
        assert_eq!(failed, 1, "{text}");
        assert!(
            text.contains("FAIL unexpected  port-conflict 179"),
            "{text}"
        );
        let loose = expect("findings: [{kind: firewall-gap}]");
        let two = [gap, finding("firewall-gap", "error", 2379)];
        assert_eq!(join_findings(&loose, &two, 1).1, 1);
        // A healthy join: nothing found, exit 0.
        assert_eq!(join_findings(&expect("{}"), &[], 0).1, 0);
        assert_eq!(join_findings(&expect("{}"), &[], 1).1, 1);
    }

    /// `icmpFrom: router` is the source zone's router in the expectation's family.
    #[test]
    fn the_router_offender_is_of_the_expectations_family() {
        use super::expected_offender;
        let s = crate::lab::scenario::Scenario::parse("ipFamilies: [ipv4, ipv6]").unwrap();
        let l = crate::lab::build::layout(&s, "plab-t-", std::path::Path::new("/tmp/x"));
        let at = |family: &str| {
            let r = serde_saphyr::from_str(&format!(
                "{{from: n1/pod, to: n2/pod, probe: tcp, outcome: rejected, icmpFrom: router{family}}}"
            ))
            .unwrap();
            expected_offender(&l, &r).unwrap().unwrap().to_string()
        };
        assert_eq!(at(""), "192.168.56.1");
        assert_eq!(at(", family: ipv6"), "fd00:56::1");
    }

    #[test]
    fn check_lines_are_plain_text() {
        let want = "192.168.56.1".parse().unwrap();
        assert_eq!(
            offender_mismatch(Some("192.168.56.1".parse().unwrap()), want),
            None
        );
        assert_eq!(
            offender_mismatch(Some("192.168.57.1".parse().unwrap()), want).as_deref(),
            Some("ICMP from 192.168.57.1, want 192.168.56.1")
        );
        assert_eq!(
            offender_mismatch(None, want).as_deref(),
            Some("no ICMP error, want one from 192.168.56.1")
        );
        let reach = serde_saphyr::from_str(
            "{from: n1/pod, to: n2/pod, probe: vxlan, outcome: ok, seenOn: [n2]}",
        )
        .unwrap();
        let checked = Checked {
            reach,
            outcome: Some(probe_proto::Outcome::Ok),
            detail: String::new(),
            seen_on: Some(vec!["n2".into(), "n3".into()]),
            pass: false,
        };
        let (out, ok) = render(&[checked]);
        assert!(!ok);
        assert!(out.contains("vxlan"), "{out}");
        assert!(out.contains("; seen on want n2 got n2, n3"), "{out}");
        assert!(!out.contains('[') && !out.contains('"'), "{out}");
    }
}
