//! Wire types shared by the agent and the coordinator: plans in, results out (JSON, camelCase).

use std::fmt;
use std::num::NonZeroU16;

use serde::{Deserialize, Serialize};

pub mod files;
pub mod http1;
mod lazy;
mod limits;
mod plan;
mod result;
mod serve;
pub mod stall;
pub mod util;

pub use plan::*;
pub use result::*;
pub use serve::ServeEvent;

pub use lazy::{LazyPlan, parse_plan_lazy};
pub use limits::{
    MAX_CONCURRENCY, MAX_DNS_NAME_BYTES, MAX_HTTP_PATH_BYTES, MAX_ID_BYTES, MAX_NODE_NAME_BYTES,
    MAX_PLAN_BYTES, MAX_PLAN_DEADLINE_MS, MAX_PROBE_TIMEOUT_MS, MAX_RESULT_LINE_BYTES,
    MIN_MTU_PROBE_BYTES, MIN_MTU_PROBE_BYTES_V6, result_budget, unusable_target,
};

/// The port every agent listens on unless told otherwise.
pub const DEFAULT_AGENT_PORT: u16 = 9917;
/// The port the kernel's VXLAN device of flannel and cilium owns.
pub const DEFAULT_VXLAN_PORT: u16 = 8472;
/// The VXLAN ports an agent's sniffer watches unless told otherwise: flannel's and Cilium's
/// 8472, and the IANA 4789 Calico uses.
pub const DEFAULT_VXLAN_PORTS: [u16; 2] = [DEFAULT_VXLAN_PORT, 4789];
/// Geneve's IANA port, which Cilium uses.
pub const DEFAULT_GENEVE_PORT: u16 = 6081;
/// `WireGuard`'s usual port (Calico's and flannel's).
pub const DEFAULT_WIREGUARD_PORT: u16 = 51820;
/// The four bytes that open every probe payload (TCP echo, UDP echo, ICMP echo, crafted VXLAN).
pub const MAGIC: [u8; 4] = *b"PRB1";
/// The magic of the crafted VXLAN probe's inner packet, distinct from `MAGIC` so the sniffer's
/// filter copies only those (not every VTEP ping or MTU probe) to user space.
pub const VXLAN_MAGIC: [u8; 4] = *b"PRBV";

/// A TCP or UDP port, never 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "u16", into = "u16")]
pub struct Port(NonZeroU16);

impl Port {
    #[must_use]
    pub const fn new(port: u16) -> Option<Self> {
        match NonZeroU16::new(port) {
            Some(p) => Some(Self(p)),
            None => None,
        }
    }

    #[must_use]
    pub const fn get(self) -> u16 {
        self.0.get()
    }
}

impl TryFrom<u16> for Port {
    type Error = String;
    fn try_from(value: u16) -> Result<Self, Self::Error> {
        Self::new(value).ok_or_else(|| "port 0 is not a port: expected 1-65535".to_string())
    }
}

impl From<Port> for u16 {
    fn from(p: Port) -> u16 {
        p.get()
    }
}

impl fmt::Display for Port {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A VXLAN network identifier (24 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "u32", into = "u32")]
pub struct Vni(u32);

impl Vni {
    #[must_use]
    pub const fn new(vni: u32) -> Option<Self> {
        if vni < (1 << 24) {
            Some(Self(vni))
        } else {
            None
        }
    }

    #[must_use]
    pub const fn get(self) -> u32 {
        self.0
    }
}

impl Default for Vni {
    fn default() -> Self {
        Self(1)
    }
}

impl TryFrom<u32> for Vni {
    type Error = String;
    fn try_from(value: u32) -> Result<Self, Self::Error> {
        Self::new(value).ok_or_else(|| format!("VNI {value} does not fit in 24 bits"))
    }
}

impl From<Vni> for u32 {
    fn from(v: Vni) -> u32 {
        v.0
    }
}

/// Parses a duration as both binaries take it on the command line: `250ms`, `90s` (or `90`),
/// `30m`, `2h`.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    use std::time::Duration;
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?}: expected a number and a unit, like 500ms, 90s, 30m or 2h"))?;
    Ok(match unit {
        "ms" => Duration::from_millis(n),
        "" | "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.saturating_mul(60)),
        "h" => Duration::from_secs(n.saturating_mul(3600)),
        _ => return Err(format!("{s:?}: unknown unit {unit:?}; use ms, s, m or h")),
    })
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};
    use std::num::{NonZeroU32, NonZeroU64};

    #[test]
    fn unknown_plan_fields_are_refused() {
        let good = r#"{"deadlineMs": 1000, "probes": [{"id": "a", "kind": "dns", "name": "x.", "server": "10.0.0.1:53"}]}"#;
        assert!(serde_json::from_str::<super::Plan>(good).is_ok());
        for (bad, field) in [
            (
                r#"{"deadlineMs": 1000, "probes": [{"id": "a", "kind": "dns", "name": "x.", "address": "10.0.0.1:53"}]}"#,
                "address",
            ),
            (
                r#"{"deadlineMs": 1000, "probes": [], "paralel": 3}"#,
                "paralel",
            ),
        ] {
            let err = serde_json::from_str::<super::Plan>(bad).unwrap_err();
            assert!(err.to_string().contains(field), "{bad}: {err}");
        }
    }

    use super::*;

    fn full_plan() -> Plan {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let v4 = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        let p = |n| Port::new(n).unwrap();
        let probes = vec![
            Probe::Tcp(TcpProbe {
                address: ip("10.0.0.1"),
                port: p(9917),
                echo: true,
            }),
            Probe::Udp(UdpProbe {
                address: ip("10.0.0.1"),
                port: p(9917),
            }),
            Probe::Icmp(IcmpProbe {
                address: ip("10.0.0.1"),
            }),
            Probe::Vtep(IcmpProbe {
                address: ip("10.244.1.0"),
            }),
            Probe::Mtu(MtuProbe {
                address: ip("10.0.0.1"),
                size: Some(1500),
            }),
            Probe::Tls(TlsProbe {
                address: ip("10.96.0.1"),
                port: p(443),
                server_name: Some("kubernetes.default.svc".into()),
                ca_file: Some("/ca.crt".into()),
                require_verified: false,
                path: "/livez".into(),
                token_file: Some("/token".into()),
            }),
            Probe::Dns(DnsProbe {
                name: "kubernetes.default.svc.cluster.local".into(),
                record_type: DnsRecordType::Srv,
                protocol: Transport::Tcp,
                server: Some("10.96.0.10:53".parse().unwrap()),
                resolv_conf: None,
            }),
            Probe::Vxlan(VxlanProbe {
                address: ip("192.168.56.11"),
                port: p(8472),
                vni: Vni::new(1).unwrap(),
                nonce: Some(7),
                inner_source: Some(v4("10.244.1.0")),
                inner_destination: Some(v4("10.244.2.0")),
                destination_mac: Some(MacAddr([2, 0, 0, 0, 0, 1])),
            }),
            Probe::Ipip(IpipProbe {
                address: v4("192.168.56.11"),
                nonce: Some(8),
                inner_source: Some(v4("10.244.1.0")),
                inner_destination: Some(v4("10.244.2.0")),
            }),
            Probe::Geneve(GeneveProbe {
                address: v4("192.168.56.11"),
                port: p(6081),
                vni: Vni::new(2).unwrap(),
                nonce: Some(9),
                inner_source: None,
                inner_destination: Some(v4("10.244.2.0")),
            }),
            Probe::Wireguard(WireguardProbe {
                address: v4("192.168.56.11"),
                port: p(51871),
                nonce: Some(10),
            }),
            Probe::Seen(SeenProbe {
                since_ms: 5,
                nonces: Some(vec![7]),
                flows: Some(vec![Flow {
                    from: ip("192.168.56.10"),
                    source_port: 40000,
                    port: 10250,
                }]),
                port: p(9917),
            }),
            Probe::Hop(HopProbe {
                address: ip("192.168.57.12"),
                port: p(8472),
                protocol: Transport::Udp,
                ttl: std::num::NonZeroU8::new(2).unwrap(),
            }),
        ];
        Plan {
            deadline_ms: NonZeroU64::new(5000).unwrap(),
            concurrency: NonZeroU32::new(64).unwrap(),
            probe_timeout_ms: NonZeroU64::new(1000).unwrap(),
            probes: probes
                .into_iter()
                .enumerate()
                .map(|(i, probe)| ProbeSpec {
                    id: format!("p{i}"),
                    timeout_ms: None,
                    probe,
                })
                .collect(),
        }
    }

    #[test]
    fn plan_round_trips_through_json() {
        let plan = full_plan();
        let json = serde_json::to_string(&plan).unwrap();
        assert_eq!(parse_plan(&json).unwrap(), plan);
        assert!(json.contains(r#""kind":"vtep""#), "{json}");
        assert!(json.contains(r#""deadlineMs":5000"#), "{json}");
        assert!(
            json.contains(r#""destinationMac":"02:00:00:00:00:01""#),
            "{json}"
        );
        assert!(json.contains(r#""recordType":"SRV""#), "{json}");
    }

    /// Widening an address field to `IpAddr` keeps every IPv4 plan's bytes as they were (deployed
    /// coordinators and agents read each other's), and takes IPv6 in the same field.
    #[test]
    fn widened_addresses_keep_the_ipv4_wire() {
        for line in [
            r#"{"id":"a","kind":"icmp","address":"10.0.0.1"}"#,
            r#"{"id":"a","kind":"vtep","address":"10.244.1.0"}"#,
            r#"{"id":"a","kind":"icmp","address":"fd00::1"}"#,
            r#"{"id":"a","kind":"mtu","address":"10.0.0.1","size":1400}"#,
            r#"{"id":"a","kind":"mtu","address":"fd00::1"}"#,
            r#"{"id":"a","kind":"vxlan","address":"192.168.56.11","port":8472,"vni":1}"#,
            r#"{"id":"a","kind":"vxlan","address":"fd00::11","port":8472,"vni":1}"#,
            r#"{"id":"a","kind":"seen","sinceMs":0,"flows":[{"from":"10.0.0.1","sourcePort":1,"port":2}],"port":9917}"#,
            r#"{"id":"a","kind":"seen","sinceMs":0,"flows":[{"from":"fd00::1","sourcePort":1,"port":2}],"port":9917}"#,
        ] {
            let spec: ProbeSpec = serde_json::from_str(line).unwrap();
            assert_eq!(serde_json::to_string(&spec).unwrap(), line);
        }
    }

    #[test]
    fn result_round_trips_and_uses_contract_names() {
        let mut r = ProbeResult::new("a", Outcome::Rejected, "admin prohibited");
        r.rtt_micros = Some(12);
        r.icmp = Some(IcmpInfo {
            icmp_type: 3,
            code: 13,
            from: Some("10.0.0.254".parse().unwrap()),
        });
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(
            json,
            r#"{"id":"a","outcome":"rejected","rttMicros":12,"detail":"admin prohibited","icmp":{"type":3,"code":13,"from":"10.0.0.254"}}"#
        );
        assert_eq!(serde_json::from_str::<ProbeResult>(&json).unwrap(), r);
    }

    #[test]
    fn outcome_vocabulary_matches_design() {
        let names: Vec<String> = Outcome::ALL
            .iter()
            .map(|o| {
                serde_json::to_value(o)
                    .unwrap()
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(
            names,
            [
                "ok",
                "refused",
                "rejected",
                "unreachable",
                "timeout",
                "tls-error",
                "http-error",
                "unauthorized",
                "dns-error",
                "error"
            ]
        );
        for o in Outcome::ALL {
            assert_eq!(serde_json::to_value(o).unwrap(), o.as_str());
        }
    }

    #[test]
    fn bad_plans_name_the_problem() {
        let cases: &[(&str, &str)] = &[
            (
                r#"{"deadlineMs":1000,"probes":[{"id":"a","kind":"bogus"}]}"#,
                "probes[0]",
            ),
            (
                r#"{"deadlineMs":1000,"probes":[{"id":"a","kind":"tcp","address":"10.0.0.1"}]}"#,
                "missing field `port`",
            ),
            (
                r#"{"deadlineMs":1000,"probes":[{"id":"a","kind":"tcp","address":"10.0.0.1","port":0}]}"#,
                "port 0",
            ),
            (
                r#"{"deadlineMs":0,"probes":[{"id":"a","kind":"icmp","address":"10.0.0.1"}]}"#,
                "deadlineMs",
            ),
            (
                r#"{"deadlineMs":1000,"probes":[{"id":"a","kind":"icmp","address":"10.0.0.1"},{"id":"a","kind":"icmp","address":"10.0.0.2"}]}"#,
                "`probes[1].id`: duplicate",
            ),
            (r#"{"deadlineMs":1000,"probes":[]}"#, "no probes"),
            (
                r#"{"deadlineMs":1000,"probes":[{"id":"a","kind":"mtu","address":"10.0.0.1","size":10}]}"#,
                "probes[0].size",
            ),
            (
                r#"{"deadlineMs":1000,"probes":[{"id":"a","kind":"mtu","address":"fd00::1","size":40}]}"#,
                "`probes[0].size`: 40 is smaller than an IPv6+ICMPv6 header (48)",
            ),
            (
                r#"{"deadlineMs":1000,"probes":[{"id":"a","kind":"icmp","address":"nope"}]}"#,
                "address",
            ),
            (r#"{"deadlineMs":1000, "probes": ["#, "not valid JSON"),
            ("", "not valid JSON"),
        ];
        for (text, want) in cases {
            let err = parse_plan(text).expect_err(text).to_string();
            assert!(
                err.contains(want),
                "plan {text}\n  error {err}\n  wanted it to mention {want}"
            );
        }
    }

    #[test]
    fn limits_are_refused_naming_the_field() {
        let tcp = |addr: &str| format!(r#"{{"id":"a","kind":"tcp","address":"{addr}","port":1}}"#);
        let plan = |head: &str, probe: &str| format!(r#"{{{head}"probes":[{probe}]}}"#);
        let ok = tcp("10.0.0.1");
        let cases: Vec<(String, &str)> = vec![
            (
                plan(r#""deadlineMs":18446744073709551615,"#, &ok),
                "`deadlineMs`: 18446744073709551615 ms is beyond",
            ),
            (plan(r#""deadlineMs":3600001,"#, &ok), "`deadlineMs`"),
            (
                plan(r#""deadlineMs":1000,"probeTimeoutMs":600001,"#, &ok),
                "`probeTimeoutMs`",
            ),
            (
                plan(r#""deadlineMs":1000,"concurrency":4294967295,"#, &ok),
                "`concurrency`",
            ),
            (
                plan(
                    r#""deadlineMs":1000,"#,
                    r#"{"id":"a","kind":"icmp","address":"10.0.0.1","timeoutMs":9223372036854775808}"#,
                ),
                "`probes[0].timeoutMs`",
            ),
            (
                plan(r#""deadlineMs":1000,"#, &tcp("0.0.0.0")),
                "`probes[0].address`: 0.0.0.0 is the unspecified address",
            ),
            (plan(r#""deadlineMs":1000,"#, &tcp("::")), "unspecified"),
            (
                plan(r#""deadlineMs":1000,"#, &tcp("::ffff:0.0.0.0")),
                "unspecified",
            ),
            (
                plan(r#""deadlineMs":1000,"#, &tcp("255.255.255.255")),
                "broadcast",
            ),
            (
                plan(r#""deadlineMs":1000,"#, &tcp("239.1.2.3")),
                "multicast",
            ),
            (plan(r#""deadlineMs":1000,"#, &tcp("ff02::1")), "multicast"),
            (
                plan(
                    r#""deadlineMs":1000,"#,
                    r#"{"id":"a","kind":"vxlan","address":"224.0.0.1"}"#,
                ),
                "`probes[0].address`",
            ),
            (
                plan(
                    r#""deadlineMs":1000,"#,
                    r#"{"id":"a","kind":"ipip","address":"0.0.0.0"}"#,
                ),
                "`probes[0].address`",
            ),
            (
                plan(
                    r#""deadlineMs":1000,"#,
                    r#"{"id":"a","kind":"dns","name":"x","server":"0.0.0.0:53"}"#,
                ),
                "`probes[0].server`",
            ),
            (
                plan(
                    r#""deadlineMs":1000,"#,
                    r#"{"id":"a","kind":"tls","address":"10.0.0.1","port":443,"path":"/x HTTP/1.1\r\nX: y"}"#,
                ),
                "`probes[0].path`",
            ),
            (
                plan(
                    r#""deadlineMs":1000,"#,
                    &format!(
                        r#"{{"id":"{}","kind":"icmp","address":"10.0.0.1"}}"#,
                        "i".repeat(MAX_ID_BYTES + 1)
                    ),
                ),
                "`probes[0].id`: 1025 bytes",
            ),
        ];
        for (text, want) in &cases {
            let err = parse_plan(text).expect_err(text).to_string();
            assert!(
                err.contains(want),
                "plan {text}\n  error {err}\n  wanted {want}"
            );
        }
        // The limits themselves are accepted; loopback is a fine target.
        let edge = plan(
            r#""deadlineMs":3600000,"probeTimeoutMs":600000,"concurrency":65536,"#,
            &tcp("127.0.0.1"),
        );
        assert!(parse_plan(&edge).is_ok());
        let big = format!(
            r#"{{"deadlineMs":1,"probes":[],"pad":"{}"}}"#,
            "x".repeat(MAX_PLAN_BYTES)
        );
        assert!(matches!(parse_plan(&big), Err(PlanError::TooLarge { .. })));
    }

    #[test]
    fn validate_plan_agrees_with_the_parser() {
        let mut plan = full_plan();
        assert!(validate_plan(&plan).is_ok());
        plan.deadline_ms = NonZeroU64::new(u64::MAX).unwrap();
        assert!(
            validate_plan(&plan)
                .unwrap_err()
                .to_string()
                .contains("deadlineMs")
        );
    }

    #[test]
    fn unknown_kind_is_named() {
        let err = parse_plan(r#"{"deadlineMs":1000,"probes":[{"id":"a","kind":"bogus"}]}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("bogus"), "{err}");
    }

    #[test]
    fn mac_parse_rejects_garbage() {
        assert!(MacAddr::try_from("02:00:00:00:00".to_string()).is_err());
        assert!(MacAddr::try_from("02:00:00:00:00:zz".to_string()).is_err());
        assert!(MacAddr::try_from("02:00:00:00:00:01:02".to_string()).is_err());
        assert_eq!(
            MacAddr::try_from("0a:0b:0c:0d:0e:0f".to_string())
                .unwrap()
                .to_string(),
            "0a:0b:0c:0d:0e:0f"
        );
    }

    #[test]
    fn durations() {
        use std::time::Duration;
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("30m").unwrap(), Duration::from_secs(1800));
        assert_eq!(parse_duration("2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert!(parse_duration("5d").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn vni_must_fit_24_bits() {
        assert!(Vni::new(1 << 24).is_none());
        assert_eq!(Vni::new(0xff_ffff).unwrap().get(), 0xff_ffff);
    }
}
