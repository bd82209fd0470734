//! Property tests of the plan parser: whatever the input, it returns a plan or a short error
//! naming the problem, never panics; a valid plan survives a round trip unchanged.

use std::net::{IpAddr, Ipv4Addr};
use std::num::{NonZeroU32, NonZeroU64};

use probe_proto::{
    DnsProbe, DnsRecordType, IcmpProbe, MAX_PLAN_DEADLINE_MS, MAX_PROBE_TIMEOUT_MS, MtuProbe, Plan,
    Port, Probe, ProbeSpec, SeenProbe, TcpProbe, TlsProbe, Transport, UdpProbe, parse_plan,
    parse_plan_lazy, unusable_target,
};
use proptest::prelude::*;

/// Errors quote at most a short field value: never an unbounded copy of the input.
const MAX_ERROR: usize = 4096;

fn remote_v4() -> impl Strategy<Value = Ipv4Addr> {
    any::<u32>()
        .prop_map(Ipv4Addr::from)
        .prop_filter("a remote peer", |a| {
            unusable_target(IpAddr::V4(*a)).is_none()
        })
}

fn remote_ip() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        remote_v4().prop_map(IpAddr::V4),
        any::<u128>()
            .prop_map(|v| IpAddr::V6(v.into()))
            .prop_filter("a remote peer", |a| unusable_target(*a).is_none()),
    ]
}

fn port() -> impl Strategy<Value = Port> {
    (1u16..).prop_map(|p| Port::new(p).expect("non-zero"))
}

fn probe() -> impl Strategy<Value = Probe> {
    prop_oneof![
        (remote_ip(), port(), any::<bool>()).prop_map(|(address, port, echo)| Probe::Tcp(
            TcpProbe {
                address,
                port,
                echo
            }
        )),
        (remote_ip(), port()).prop_map(|(address, port)| Probe::Udp(UdpProbe { address, port })),
        remote_ip().prop_map(|address| Probe::Icmp(IcmpProbe { address })),
        (remote_v4(), proptest::option::of(28u16..)).prop_map(|(address, size)| Probe::Mtu(
            MtuProbe {
                address: address.into(),
                size
            }
        )),
        (remote_ip(), proptest::option::of(48u16..))
            .prop_map(|(address, size)| Probe::Mtu(MtuProbe { address, size })),
        (remote_ip(), port(), "/[a-z0-9/?=&]{0,40}").prop_map(|(address, port, path)| {
            Probe::Tls(TlsProbe {
                address,
                port,
                server_name: Some("kubernetes.default.svc".into()),
                ca_file: None,
                require_verified: false,
                path,
                token_file: None,
            })
        }),
        ("[a-z]{1,20}(\\.[a-z]{1,10}){0,3}", remote_ip(), port()).prop_map(|(name, ip, p)| {
            Probe::Dns(DnsProbe {
                name,
                record_type: DnsRecordType::A,
                protocol: Transport::Tcp,
                server: Some((ip, p.get()).into()),
                resolv_conf: None,
            })
        }),
        (any::<u64>(), proptest::collection::vec(any::<u32>(), 0..8)).prop_map(
            |(since_ms, nonces)| Probe::Seen(SeenProbe {
                since_ms,
                nonces: Some(nonces),
                flows: None,
                port: Port::new(9917).expect("non-zero"),
            })
        ),
    ]
}

fn plan() -> impl Strategy<Value = Plan> {
    (
        1..=MAX_PLAN_DEADLINE_MS,
        1..=65_536u32,
        1..=MAX_PROBE_TIMEOUT_MS,
        proptest::collection::vec(
            (probe(), proptest::option::of(1..=MAX_PROBE_TIMEOUT_MS)),
            1..20,
        ),
    )
        .prop_map(|(deadline, concurrency, timeout, probes)| Plan {
            deadline_ms: NonZeroU64::new(deadline).expect("non-zero"),
            concurrency: NonZeroU32::new(concurrency).expect("non-zero"),
            probe_timeout_ms: NonZeroU64::new(timeout).expect("non-zero"),
            probes: probes
                .into_iter()
                .enumerate()
                .map(|(i, (probe, t))| ProbeSpec {
                    id: format!("p{i}"),
                    timeout_ms: t.and_then(NonZeroU64::new),
                    probe,
                })
                .collect(),
        })
}

/// Replaces the JSON value at one position of `v` (chosen by `pick`) with `with`.
fn mutate(v: &mut serde_json::Value, pick: &mut usize, with: &serde_json::Value) {
    if *pick == 0 {
        *v = with.clone();
        *pick = usize::MAX;
        return;
    }
    *pick -= 1;
    match v {
        serde_json::Value::Array(a) => {
            for x in a {
                mutate(x, pick, with);
            }
        }
        serde_json::Value::Object(o) => {
            for (_, x) in o.iter_mut() {
                mutate(x, pick, with);
            }
        }
        _ => {}
    }
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<u64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_map(serde_json::Value::from),
        ".{0,30}".prop_map(serde_json::Value::from),
        Just(serde_json::Value::from("0.0.0.0")),
        Just(serde_json::Value::from("255.255.255.255")),
        Just(serde_json::Value::from(u64::MAX)),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            proptest::collection::btree_map("[a-zA-Z]{1,12}", inner, 0..4)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in ".{0,400}") {
        if let Err(e) = parse_plan(&text) {
            prop_assert!(e.to_string().len() < MAX_ERROR);
        }
    }

    #[test]
    fn arbitrary_bytes_as_lossy_text_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let _ = parse_plan_lazy(text);
    }

    #[test]
    fn valid_plans_round_trip(p in plan()) {
        let text = serde_json::to_string(&p).unwrap();
        prop_assert_eq!(parse_plan(&text).unwrap(), p.clone());
        let lazy = parse_plan_lazy(text).unwrap();
        prop_assert_eq!(lazy.len(), p.probes.len());
        for (got, want) in lazy.probes().zip(&p.probes) {
            prop_assert_eq!(&got.unwrap(), want);
        }
    }

    #[test]
    fn any_value_anywhere_is_accepted_or_refused_clearly(
        p in plan(),
        pick in 0usize..200,
        with in json_value(),
    ) {
        let mut v = serde_json::to_value(&p).unwrap();
        let mut at = pick;
        mutate(&mut v, &mut at, &with);
        let text = v.to_string();
        match parse_plan(&text) {
            Ok(plan) => {
                // Whatever was accepted is within the limits.
                prop_assert!(plan.deadline_ms.get() <= MAX_PLAN_DEADLINE_MS);
                prop_assert!(plan.probe_timeout_ms.get() <= MAX_PROBE_TIMEOUT_MS);
                prop_assert!(probe_proto::validate_plan(&plan).is_ok());
            }
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(msg.len() < MAX_ERROR, "{}", msg);
                prop_assert!(msg.starts_with("plan "), "{}", msg);
            }
        }
    }
}
