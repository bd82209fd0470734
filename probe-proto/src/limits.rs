//! What a plan may ask for: durations in range, targets that can mean a remote peer, strings of a
//! sane size. Checked before any probe runs; every refusal names the field.

use std::net::{IpAddr, Ipv4Addr};

use crate::{
    DnsProbe, GeneveProbe, HopProbe, IcmpProbe, IpipProbe, MtuProbe, NodeProbe, Plan, PlanError,
    Probe, ProbeSpec, TcpProbe, TlsProbe, UdpProbe, VxlanProbe, WireguardProbe,
};

/// The largest plan an agent reads (about 500,000 probes).
pub const MAX_PLAN_BYTES: usize = 64 * 1024 * 1024;
/// The longest plan deadline: an hour is far beyond any matrix an agent runs.
pub const MAX_PLAN_DEADLINE_MS: u64 = 60 * 60 * 1000;
/// The longest per-probe timeout: a probe that has not answered in ten minutes never will.
pub const MAX_PROBE_TIMEOUT_MS: u64 = 10 * 60 * 1000;
/// The most probes one agent runs at once (the open-file limit caps it further).
pub const MAX_CONCURRENCY: u32 = 65_536;
/// The longest probe id: ids are echoed in every result. The coordinator's ids name two nodes and
/// a DNS name at most (`dns:NODE/pod->NODE/pod:udp/53/NAME`), so this holds the longest ids
/// that names within [`MAX_NODE_NAME_BYTES`] and [`MAX_DNS_NAME_BYTES`] can make.
pub const MAX_ID_BYTES: usize = 1024;
/// The longest node name: Kubernetes' own limit for an object name (a DNS subdomain).
pub const MAX_NODE_NAME_BYTES: usize = 253;
/// The longest HTTP path a TLS probe may request.
pub const MAX_HTTP_PATH_BYTES: usize = 2048;
/// The longest DNS name (RFC 1035: 253 characters, plus a trailing dot).
pub const MAX_DNS_NAME_BYTES: usize = 254;
/// The smallest MTU probe: an IPv4 header and an ICMP echo header.
pub const MIN_MTU_PROBE_BYTES: u16 = 28;
/// The smallest `mtu` probe to an IPv6 address: an IPv6 and an ICMPv6 header.
pub const MIN_MTU_PROBE_BYTES_V6: u16 = 48;
/// The longest line of results an agent may print: one result. The largest honest one is a
/// sniffer's answer to `seen`, at most its 65,536 sightings of about 250 bytes each (16 MiB).
pub const MAX_RESULT_LINE_BYTES: usize = 32 << 20;
/// What one agent may print in all, beyond a result line per probe of its plan at
/// [`RESULT_BYTES_PER_PROBE`] each: the node checks' facts and headroom.
pub const RESULT_BYTES_BASE: u64 = 64 << 20;
/// A probe's share of its agent's output budget: a result line is a few hundred bytes.
pub const RESULT_BYTES_PER_PROBE: u64 = 4096;

/// The most an agent may print in answer to a plan of `probes` probes.
#[must_use]
pub const fn result_budget(probes: usize) -> u64 {
    RESULT_BYTES_BASE.saturating_add((probes as u64).saturating_mul(RESULT_BYTES_PER_PROBE))
}

// The longest id the coordinator makes (path class, two `NODE/agent` labels, a protocol, a
// port and a DNS name, with their separators) fits what the agents accept.
const _: () = assert!(
    "node-to-apiserver:".len()
        + MAX_NODE_NAME_BYTES
        + "/host->".len()
        + MAX_NODE_NAME_BYTES
        + "/host:tcp/65535/".len()
        + MAX_DNS_NAME_BYTES
        <= MAX_ID_BYTES
);

fn field(path: String, message: String) -> PlanError {
    PlanError::Field { path, message }
}

/// Why `ip` cannot be a probe target, if it cannot: it does not name one remote peer.
#[must_use]
pub fn unusable_target(ip: IpAddr) -> Option<&'static str> {
    // `::ffff:a.b.c.d` is the IPv4 address a.b.c.d on a dual-stack socket.
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 @ IpAddr::V4(_) => v4,
    };
    if ip.is_unspecified() {
        return Some("is the unspecified address: it means this host, not a peer");
    }
    if ip.is_multicast() {
        return Some("is a multicast address: it names a group, not a peer");
    }
    if ip == IpAddr::V4(Ipv4Addr::BROADCAST) {
        return Some("is the broadcast address: it names every host on the link, not a peer");
    }
    None
}

fn target(i: usize, name: &str, ip: IpAddr) -> Result<(), PlanError> {
    match unusable_target(ip) {
        Some(why) => Err(field(format!("probes[{i}].{name}"), format!("{ip} {why}"))),
        None => Ok(()),
    }
}

fn millis(path: &str, value: u64, max: u64) -> Result<(), PlanError> {
    if value > max {
        return Err(field(
            path.to_string(),
            format!("{value} ms is beyond the limit of {max} ms"),
        ));
    }
    Ok(())
}

/// The plan-wide fields.
pub(crate) fn check_header(
    deadline_ms: u64,
    concurrency: u32,
    probe_timeout_ms: u64,
) -> Result<(), PlanError> {
    millis("deadlineMs", deadline_ms, MAX_PLAN_DEADLINE_MS)?;
    millis("probeTimeoutMs", probe_timeout_ms, MAX_PROBE_TIMEOUT_MS)?;
    if concurrency > MAX_CONCURRENCY {
        return Err(field(
            "concurrency".into(),
            format!("{concurrency} is beyond the limit of {MAX_CONCURRENCY}"),
        ));
    }
    Ok(())
}

/// One probe, the `i`-th of its plan.
#[allow(clippy::too_many_lines)] // one arm per probe kind reads best in one place
pub(crate) fn check_spec(i: usize, spec: &ProbeSpec) -> Result<(), PlanError> {
    let named = |name: &str, message: String| field(format!("probes[{i}].{name}"), message);
    if spec.id.is_empty() {
        return Err(named("id", "must not be empty".into()));
    }
    if spec.id.len() > MAX_ID_BYTES {
        return Err(named(
            "id",
            format!("{} bytes long; the limit is {MAX_ID_BYTES}", spec.id.len()),
        ));
    }
    if let Some(t) = spec.timeout_ms {
        millis(
            &format!("probes[{i}].timeoutMs"),
            t.get(),
            MAX_PROBE_TIMEOUT_MS,
        )?;
    }
    match &spec.probe {
        Probe::Tcp(TcpProbe { address, .. })
        | Probe::Udp(UdpProbe { address, .. })
        | Probe::Hop(HopProbe { address, .. })
        | Probe::Icmp(IcmpProbe { address })
        | Probe::Vtep(IcmpProbe { address })
        | Probe::Vxlan(VxlanProbe { address, .. }) => {
            target(i, "address", *address)?;
        }
        Probe::Ipip(IpipProbe { address, .. })
        | Probe::Geneve(GeneveProbe { address, .. })
        | Probe::Wireguard(WireguardProbe { address, .. }) => {
            target(i, "address", IpAddr::V4(*address))?;
        }
        Probe::Mtu(MtuProbe { address, size }) => {
            target(i, "address", *address)?;
            let (least, headers) = if address.is_ipv6() {
                (MIN_MTU_PROBE_BYTES_V6, "an IPv6+ICMPv6 header")
            } else {
                (MIN_MTU_PROBE_BYTES, "an IPv4+ICMP header")
            };
            if let Some(size) = size.filter(|&s| s < least) {
                return Err(named(
                    "size",
                    format!("{size} is smaller than {headers} ({least})"),
                ));
            }
        }
        Probe::Tls(TlsProbe {
            address,
            path,
            server_name,
            ..
        }) => {
            target(i, "address", *address)?;
            if !path.starts_with('/') {
                return Err(named("path", format!("{path:?} must start with '/'")));
            }
            if path.len() > MAX_HTTP_PATH_BYTES {
                return Err(named(
                    "path",
                    format!("longer than {MAX_HTTP_PATH_BYTES} bytes"),
                ));
            }
            // It goes into the request line: a space or a line break would forge the request.
            if !path.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(named(
                    "path",
                    format!("{path:?} holds a space, a control character or non-ASCII"),
                ));
            }
            if let Some(name) = server_name {
                let ok = !name.is_empty()
                    && name.len() <= MAX_DNS_NAME_BYTES
                    && name.bytes().all(|b| b.is_ascii_graphic());
                if !ok {
                    return Err(named("serverName", format!("{name:?} is not a host name")));
                }
            }
        }
        Probe::Dns(DnsProbe { name, server, .. }) => {
            if name.is_empty() {
                return Err(named("name", "must not be empty".into()));
            }
            if name.len() > MAX_DNS_NAME_BYTES {
                return Err(named(
                    "name",
                    format!("longer than {MAX_DNS_NAME_BYTES} bytes"),
                ));
            }
            if let Some(s) = server {
                target(i, "server", s.ip())?;
                if s.port() == 0 {
                    return Err(named("server", format!("{s}: port 0 is not a port")));
                }
            }
        }
        Probe::Node(NodeProbe { root, .. }) => {
            if root.as_os_str().is_empty() {
                return Err(named("root", "must not be empty".into()));
            }
        }
        Probe::Seen(_) => {}
    }
    Ok(())
}

/// A whole plan already in memory (the coordinator's side; the agent reads plans lazily).
pub(crate) fn check_plan(plan: &Plan) -> Result<(), PlanError> {
    check_header(
        plan.deadline_ms.get(),
        plan.concurrency.get(),
        plan.probe_timeout_ms.get(),
    )?;
    if plan.probes.is_empty() {
        return Err(PlanError::Empty);
    }
    let mut ids = std::collections::HashSet::with_capacity(plan.probes.len());
    for (i, spec) in plan.probes.iter().enumerate() {
        check_spec(i, spec)?;
        if !ids.insert(spec.id.as_str()) {
            return Err(field(
                format!("probes[{i}].id"),
                format!("duplicate id {:?}", spec.id),
            ));
        }
    }
    Ok(())
}
