//! Warming: a lab is ready when its first packets are not lost. Right after wiring, every
//! neighbour cache is empty, so the matrix's first SYN on each path waits on resolution and a
//! healthy lab shows a retransmission's second as latency. Before the lab says `ready`, every
//! node sends one echo (ICMP, `ICMPv6` in each family the cluster has) to every other node and
//! its own pods, and every pod to every other pod, through the agent's own engine (the lab adds
//! no tool for it). Best effort: a path a
//! scenario breaks just fails here, within a second.

use std::io::Write;
use std::net::IpAddr;
use std::num::{NonZeroU32, NonZeroU64};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use probe_proto::{IcmpProbe, Plan, Probe, ProbeSpec};

use super::build::{Layout, Pod};
use crate::inventory::Family;

/// Each echo's wait; the whole warm-up is bounded by this plus process start-up.
const ECHO_TIMEOUT_MS: u64 = 1000;
/// After this every warming process still running is killed.
const DEADLINE: Duration = Duration::from_secs(5);

/// Who pings whom: (namespace, addresses), in every family the cluster has (`ICMPv6` echo
/// resolves the IPv6 neighbours as ICMP echo resolves ARP).
fn pairs(l: &Layout) -> Vec<(String, Vec<IpAddr>)> {
    let families = &l.families;
    let pod_ips = |p: &Pod| -> Vec<IpAddr> {
        families
            .iter()
            .filter_map(|f| match f {
                Family::Ipv4 => Some(IpAddr::V4(p.address)),
                Family::Ipv6 => p.address6.map(IpAddr::V6),
            })
            .collect()
    };
    let pods: Vec<(&str, Vec<IpAddr>)> = l
        .nodes
        .iter()
        .flat_map(|n| n.pods.iter().map(|p| (p.ns.as_str(), pod_ips(p))))
        .collect();
    let mut out = Vec::new();
    for n in &l.nodes {
        let mut to: Vec<IpAddr> = l
            .nodes
            .iter()
            .filter(|o| o.name != n.name)
            .flat_map(|o| families.iter().filter_map(|&f| o.ip(f)))
            .collect();
        to.extend(n.pods.iter().flat_map(pod_ips));
        // Its gateway in each family: the way to the API's Service, the upstream resolver.
        to.extend(families.iter().filter_map(|f| match f {
            Family::Ipv4 if !l.ipv6_underlay() => Some(IpAddr::V4(n.gateway())),
            Family::Ipv6 => n.address6.map(|_| IpAddr::V6(n.gateway6())),
            Family::Ipv4 => None,
        }));
        out.push((n.ns.clone(), to));
    }
    // The cluster DNS pod: the upstream resolver it forwards to.
    out.push((l.dns_pod.ns.clone(), vec![l.upstream_resolver()]));
    for (ns, _) in &pods {
        let to = pods
            .iter()
            .filter(|(o, _)| o != ns)
            .flat_map(|(_, a)| a.iter().copied())
            .collect();
        out.push(((*ns).to_string(), to));
    }
    out
}

/// The plan: one ICMP echo to each address, in the agent's own wire types.
fn plan(to: &[IpAddr]) -> String {
    let ms = |v: u64| NonZeroU64::new(v).expect("non-zero constant");
    let plan = Plan {
        deadline_ms: ms(ECHO_TIMEOUT_MS * 2),
        concurrency: NonZeroU32::new(64).expect("non-zero constant"),
        probe_timeout_ms: ms(ECHO_TIMEOUT_MS),
        probes: to
            .iter()
            .enumerate()
            .map(|(i, &address)| ProbeSpec {
                id: format!("warm-{i}"),
                timeout_ms: None,
                probe: Probe::Icmp(IcmpProbe { address }),
            })
            .collect(),
    };
    serde_json::to_string(&plan).unwrap_or_default()
}

/// Warms every path of `l` at once. Best effort: a run that cannot start or finish is let go.
pub fn warm(l: &Layout, agent_bin: &Path) {
    let mut children: Vec<Child> = Vec::new();
    for (ns, to) in pairs(l) {
        if to.is_empty() {
            continue;
        }
        let child = Command::new("ip")
            .args(["netns", "exec", &ns])
            .arg(agent_bin)
            .args(["probe", "--plan", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        if let Ok(mut c) = child {
            if let Some(mut stdin) = c.stdin.take() {
                let _ = stdin.write_all(plan(&to).as_bytes());
            }
            children.push(c);
        }
    }
    let deadline = Instant::now() + DEADLINE;
    for mut c in children {
        loop {
            match c.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                _ => {
                    let _ = c.kill();
                    let _ = c.wait();
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::pairs;
    use crate::lab::scenario::Scenario;

    fn targets(yaml: &str, ns: &str) -> Vec<String> {
        let s = Scenario::parse(yaml).unwrap();
        let l = crate::lab::build::layout(&s, "plab-t-", std::path::Path::new("/tmp/x"));
        pairs(&l)
            .into_iter()
            .find(|(n, _)| n == ns)
            .map(|(_, to)| to.iter().map(ToString::to_string).collect())
            .unwrap_or_default()
    }

    /// Every family the cluster has is warmed, and only those: the IPv6 neighbours too.
    #[test]
    fn neighbours_are_warmed_in_each_family_the_lab_has() {
        let v4 = targets("{}", "plab-t-n1");
        assert!(v4.contains(&"192.168.56.11".to_string()), "{v4:?}");
        assert!(v4.iter().all(|a| !a.contains(':')), "{v4:?}");
        let dual = targets("ipFamilies: [ipv4, ipv6]", "plab-t-n1");
        for want in [
            "192.168.56.11",
            "fd00:56::b",
            "fd00:10:244:1::2",
            "fd00:56::1",
        ] {
            assert!(dual.contains(&want.to_string()), "{want}: {dual:?}");
        }
        let pod = targets("ipFamilies: [ipv4, ipv6]", "plab-t-n1p0");
        assert!(pod.contains(&"fd00:10:244:2::2".to_string()), "{pod:?}");
        // The IPv6-only lab: nothing over IPv4, whose underlay it does not have.
        let six = targets("ipFamilies: [ipv6]", "plab-t-n2");
        assert!(six.contains(&"fd00:56::a".to_string()), "{six:?}");
        assert!(six.iter().all(|a| a.contains(':')), "{six:?}");
        assert_eq!(
            targets("ipFamilies: [ipv6]", "plab-t-n1dns"),
            ["fd00:56::1"]
        );
    }
}
