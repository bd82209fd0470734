//! Property tests over every parser the agent exposes to outside input: kubeconfigs (a token put
//! anywhere never shows up in an error), resolv.conf, HTTP requests to the agent, TCP/UDP echo
//! input, VXLAN/ICMP packets, the ICMP error classification and DNS answers. No panics, bounded
//! output, clear errors.

use std::net::SocketAddr;
use std::time::Duration;

use probe_pod::net::errqueue::{QueuedError, classify, classify_icmp};
use probe_pod::net::packet::{parse_captured, parse_echo_reply, payload_nonce};
use probe_pod::probe::dns::{ResolvConf, judge_answer};
use probe_pod::probe::kubeconfig;
use probe_pod::proto::http1;
use probe_pod::serve::{http as agent_http, udp as agent_udp};
use proptest::prelude::*;

/// The cases a property runs: `default` in the normal test run, `PROPTEST_CASES` when set
/// (bench/fuzz.sh runs them longer).
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(default)
}

const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: https://10.96.0.1:443\n    certificate-authority-data: Q0EK\n    certificate-authority: /etc/cni/net.d/ca.crt\nusers:\n- name: cni\n  user:\n    token: placeholder\n    tokenFile: /var/run/token\ncontexts:\n- name: default\n  context:\n    cluster: local\n    user: cni\ncurrent-context: default\n";

/// Tokens as they come: JWTs (three base64url segments) or opaque strings.
fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        (
            "[A-Za-z0-9_-]{20,60}",
            "[A-Za-z0-9_-]{20,80}",
            "[A-Za-z0-9_-]{20,60}"
        )
            .prop_map(|(a, b, c)| format!("{a}.{b}.{c}")),
        "[A-Za-z0-9]{24,64}",
    ]
}

/// What may stand around the token where it is inserted: nothing, a line break, a mapping or list
/// marker, quotes, brackets.
fn glue() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "", "\n", "\n  ", "\n    ", ": ", "- ", "\"", "'", "{", "[", "]", "}", " ", "\n- ",
        ":\n  ", "#",
    ])
}

fn assert_no_window(text: &str, token: &str) -> Result<(), TestCaseError> {
    for w in token.as_bytes().windows(8) {
        let w = std::str::from_utf8(w).expect("ascii");
        prop_assert!(!text.contains(w), "{:?} holds a piece of the token", text);
    }
    Ok(())
}

/// Inserts `token` (with glue) at the `at`-th char boundary of `base`.
fn insert(base: &str, at: usize, before: &str, token: &str, after: &str) -> String {
    let bounds: Vec<usize> = base
        .char_indices()
        .map(|(i, _)| i)
        .chain([base.len()])
        .collect();
    let at = bounds[at % bounds.len()];
    format!("{}{before}{token}{after}{}", &base[..at], &base[at..])
}

/// A `probe-pod serve` on loopback in this process, started once.
fn agent_on_loopback() -> u16 {
    static PORT: std::sync::OnceLock<u16> = std::sync::OnceLock::new();
    *PORT.get_or_init(|| {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let config = probe_pod::serve::Config {
                listen: "127.0.0.1".parse().unwrap(),
                port,
                sniff: probe_pod::serve::SniffMode::Never,
                vxlan_ports: Vec::new(),
                geneve_ports: Vec::new(),
                ttl: None,
                extra_tcp_ports: Vec::new(),
                standin_udp_ports: Vec::new(),
                receipt_tcp_ports: Vec::new(),
            };
            let _ = rt.block_on(probe_pod::serve::run(config, std::future::pending()));
        });
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the agent did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        port
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(64), ..ProptestConfig::default() })]

    /// TCP input to the agent: echoed exactly, or answered as HTTP, or closed; always within the
    /// connection deadline.
    #[test]
    fn agent_tcp_input(data in proptest::collection::vec(any::<u8>(), 1..2000), http in any::<bool>()) {
        use std::io::{Read, Write};
        let mut data = data;
        if http {
            let mut head = b"GET /".to_vec();
            head.extend_from_slice(&data);
            data = head;
        }
        let mut s = std::net::TcpStream::connect(("127.0.0.1", agent_on_loopback())).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(7))).unwrap();
        let started = std::time::Instant::now();
        s.write_all(&data).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut back = Vec::new();
        let _ = s.read_to_end(&mut back);
        prop_assert!(started.elapsed() < Duration::from_secs(6));
        if data.starts_with(b"GET ") {
            prop_assert!(back.is_empty() || back.starts_with(b"HTTP/1.1 "), "{:?}", String::from_utf8_lossy(&back));
        } else {
            prop_assert_eq!(back, data);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(512), ..ProptestConfig::default() })]

    /// The attack: a token somewhere in a kubeconfig, of whatever shape; the error, if
    /// any, never holds 8 characters of it.
    #[test]
    fn a_token_anywhere_in_a_kubeconfig_never_reaches_an_error(
        token in token(),
        at in any::<usize>(),
        before in glue(),
        after in glue(),
        twice in any::<bool>(),
        at2 in any::<usize>(),
    ) {
        let mut text = insert(KUBECONFIG, at, before, &token, after);
        if twice {
            text = insert(&text, at2, after, &token, before);
        }
        if let Err(e) = kubeconfig::parse(&text) {
            let msg = e.to_string();
            prop_assert!(msg.len() < 512, "{}", msg);
            assert_no_window(&msg, &token)?;
        }
    }

    /// The same through the whole node check (files, credential loading, error collection).
    #[test]
    fn a_token_anywhere_never_reaches_the_node_report(
        token in token(),
        at in any::<usize>(),
        before in glue(),
        after in glue(),
    ) {
        let text = insert(KUBECONFIG, at, before, &token, after);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("etc/cni/net.d/cni.kubeconfig");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, &text).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        let r = rt.block_on(probe_pod::probe::node::probe("n", dir.path(), false, deadline));
        let facts = r.node.expect("facts");
        for e in facts.errors.iter().chain(facts.cni_kubeconfigs.iter().filter_map(|k| k.error.as_ref())) {
            assert_no_window(e, &token)?;
        }
        assert_no_window(&r.detail, &token)?;
    }

    #[test]
    fn arbitrary_yaml_never_panics(text in "(.|\n){0,300}") {
        let _ = kubeconfig::parse(&text);
    }

    #[test]
    fn resolv_conf_is_bounded(text in "((nameserver|search|domain|options|#)[ \t]+[ -~]{0,40}\n){0,40}") {
        let rc = ResolvConf::parse(&text);
        prop_assert!(rc.nameservers.len() <= 3);
        prop_assert!(rc.ndots <= 15);
        prop_assert!(rc.timeout >= Duration::from_secs(1) && rc.timeout <= Duration::from_secs(30));
        let names = rc.candidates("kubernetes.default");
        prop_assert!(names.len() <= rc.search.len() + 1);
    }

    #[test]
    fn resolv_conf_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = ResolvConf::parse(&String::from_utf8_lossy(&bytes));
    }

    /// The agent's HTTP side: any request head gets a status from a short list, /seen only for
    /// loopback, /healthz always.
    #[test]
    fn agent_http_requests(head in proptest::collection::vec(any::<u8>(), 0..600), loopback in any::<bool>()) {
        let peer: SocketAddr = if loopback { "127.0.0.1:1".parse().unwrap() } else { "10.0.0.9:1".parse().unwrap() };
        let state = agent_http::State::new(std::sync::Arc::default(), Some("test".into()));
        let (status, body) = agent_http::answer(&head, peer, &state);
        prop_assert!([200u16, 400, 403, 404].contains(&status));
        prop_assert!(body.len() <= 64 * 1024 + 1024);
        if !loopback {
            let leaked = body.starts_with("{\"sightings\"");
            prop_assert!(!leaked, "sightings answered to a remote peer");
        }
    }

    #[test]
    fn agent_http_healthz_always_answers(query in "[!-~]{0,200}", rest in "[ -~]{0,200}") {
        let state = agent_http::State::new(std::sync::Arc::default(), None);
        let head = format!("GET /healthz?{query} HTTP/1.1\r\n{rest}\r\n\r\n");
        let (status, _) = agent_http::answer(head.as_bytes(), "10.0.0.9:1".parse().unwrap(), &state);
        prop_assert_eq!(status, 200);
    }

    /// UDP echo: only probe datagrams get a reply, never larger than what came.
    #[test]
    fn udp_echo_input(d in proptest::collection::vec(any::<u8>(), 0..2000)) {
        match agent_udp::reply(&d) {
            Some(r) => {
                prop_assert_eq!(r.len(), d.len());
                prop_assert!(payload_nonce(&d).is_some());
            }
            None => prop_assert!(payload_nonce(&d).is_none() || d.len() > 1500),
        }
    }

    #[test]
    fn packet_parsers_never_panic(
        pkt in proptest::collection::vec(any::<u8>(), 0..200),
        ports in proptest::collection::vec(any::<u16>(), 0..3),
        with_ip in any::<bool>(),
    ) {
        let _ = parse_captured(&pkt, &ports, &ports);
        let _ = parse_echo_reply(&pkt, with_ip);
        let _ = http1::status(&pkt);
        let _ = http1::request_line(&pkt);
        let _ = http1::split(&pkt);
    }

    /// Mutated real packets (a crafted VXLAN datagram in an IPv4/UDP header) never panic and
    /// never yield a nonce that was not in them.
    #[test]
    fn mutated_vxlan_packets(flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6), cut in any::<usize>()) {
        let inner = probe_pod::net::packet::vxlan_datagram(&probe_pod::net::packet::VxlanProbe {
            vni: 1, source_mac: [2, 0, 0, 0, 0, 1], destination_mac: [2, 0, 0, 0, 0, 2],
            inner_source: "10.244.1.0".parse().unwrap(), inner_destination: "10.244.2.0".parse().unwrap(),
            nonce: 0xdead_beef,
        });
        let mut pkt = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 192, 168, 0, 1, 192, 168, 0, 2, 0x9c, 0x40, 0x21, 0x18, 0, 0, 0, 0];
        pkt.extend_from_slice(&inner);
        for (at, v) in flips {
            let n = pkt.len();
            pkt[at % n] = v;
        }
        pkt.truncate(cut % (pkt.len() + 1));
        if let Some(c) = parse_captured(&pkt, &[8472], &[6081]) {
            let n = c.nonce.to_be_bytes();
            prop_assert!(pkt.windows(4).any(|w| w == n));
        }
    }

    /// Mutated crafted IP-in-IP packets and Geneve datagrams never panic and never yield a nonce
    /// that was not in them; arbitrary Geneve payloads never panic either.
    #[test]
    fn mutated_ipip_and_geneve_packets(
        geneve in any::<bool>(),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
        cut in any::<usize>(),
        junk in proptest::collection::vec(any::<u8>(), 0..100),
    ) {
        use probe_pod::net::encap::{geneve_datagram, geneve_inner, outer_nonce, probe_ipv4};
        let inner = probe_ipv4("10.244.1.0".parse().unwrap(), "10.244.2.0".parse().unwrap(), 0xdead_beef);
        let mut pkt = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 4, 0, 0, 192, 168, 0, 1, 192, 168, 0, 2];
        if geneve {
            pkt[9] = 17;
            pkt.extend_from_slice(&[0x9c, 0x40, 0x17, 0xc1, 0, 0, 0, 0]);
            pkt.extend_from_slice(&geneve_datagram(2, [2, 0, 0, 0, 0, 1], [2; 6], &inner));
        } else {
            pkt.extend_from_slice(&inner);
        }
        for (at, v) in flips {
            let n = pkt.len();
            pkt[at % n] = v;
        }
        pkt.truncate(cut % (pkt.len() + 1));
        for nonce in [outer_nonce(&pkt, &[6081]), parse_captured(&pkt, &[8472], &[6081]).map(|c| c.nonce)].into_iter().flatten() {
            let n = nonce.to_be_bytes();
            prop_assert!(pkt.windows(4).any(|w| w == n));
        }
        if let Some(i) = geneve_inner(&junk) {
            prop_assert!(i.len() < junk.len());
        }
    }

    /// Whatever the kernel queues, classification is total and its text short.
    #[test]
    fn icmp_error_queue_classification(
        errno in proptest::option::of(any::<i32>()),
        origin in any::<u8>(), t in any::<u8>(), code in any::<u8>(), info in any::<u32>(),
        queued in any::<bool>(),
    ) {
        let q = QueuedError { errno: errno.unwrap_or(0), origin, icmp_type: t, code, info, offender: None };
        let (outcome, text) = classify(errno, queued.then_some(&q));
        prop_assert!(text.len() < 200);
        if queued && origin == 2 {
            prop_assert_eq!(outcome, classify_icmp(t, code));
        }
    }

    /// DNS answers from the wire, however malformed, become a result or a clear error.
    #[test]
    fn dns_answers(wire in proptest::collection::vec(any::<u8>(), 0..512), id in any::<u16>()) {
        let server: SocketAddr = "10.96.0.10:53".parse().unwrap();
        match judge_answer("d", "dns", server, "kubernetes.default", &wire, id, Duration::ZERO) {
            Ok(r) => prop_assert!(r.dns.is_some()),
            Err(e) => prop_assert!(e.to_string().len() < 300, "{}", e),
        }
    }

    /// The stdin plan reader: never panics, never returns more than it was given or than the
    /// limit, and stops exactly at the end of a well-formed document whatever follows.
    #[test]
    fn plan_input_stops_at_the_document(
        bytes in proptest::collection::vec(any::<u8>(), 0..600),
        doc in "\\{(\"([^\"\\\\]|\\\\.){0,8}\":\\[[0-9,]{0,8}\\],?){0,4}\\}",
        tail in proptest::collection::vec(any::<u8>(), 0..50),
    ) {
        if let Ok(t) = probe_pod::plan_input::read_document(&bytes[..], 400, "test") {
            prop_assert!(t.len() <= bytes.len() && t.len() <= 400);
        }
        let mut input = doc.clone().into_bytes();
        input.extend_from_slice(&tail);
        prop_assert_eq!(probe_pod::plan_input::read_document(&input[..], 4096, "test").unwrap(), doc);
    }

    /// Real answers with a flipped byte or two.
    #[test]
    fn mutated_dns_answers(flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4)) {
        use hickory_proto::op::{Message, MessageType, OpCode, Query};
        use hickory_proto::rr::{Name, RData, Record, RecordType, rdata::A};
        let name = Name::from_ascii("kubernetes.default.svc.cluster.local.").unwrap();
        let mut m = Message::new(7, MessageType::Response, OpCode::Query);
        m.add_query(Query::query(name.clone(), RecordType::A));
        m.add_answer(Record::from_rdata(name, 30, RData::A(A::new(10, 96, 0, 1))));
        let mut wire = m.to_vec().unwrap();
        for (at, v) in flips {
            let n = wire.len();
            wire[at % n] = v;
        }
        let server: SocketAddr = "10.96.0.10:53".parse().unwrap();
        let _ = judge_answer("d", "dns", server, "kubernetes.default", &wire, 7, Duration::ZERO);
    }
}
