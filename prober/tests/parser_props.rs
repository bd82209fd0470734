//! Property tests over every parser the coordinator exposes to files a person or another program
//! writes: inventories, scenarios, saved reports, the agents' result lines, the network policies
//! discovery reads (their selector languages) and the scheduled mode's memory. Whatever the
//! input, they return a value or a clear error; they never panic, and never overflow the stack.
//! Mutations of valid documents reach deeper than random text.

// A test: it reads fixtures and the clock freely (clippy.toml bans them in shipped code).
#![allow(clippy::disallowed_methods)]

use prober::inventory::{Inventory, from_yaml};
use prober::lab::scenario::Scenario;
use prober::report::Report;
use proptest::prelude::*;

mod common;

fn read(rel: &str) -> String {
    std::fs::read_to_string(common::root().join(rel)).unwrap()
}

/// A valid inventory, the one the test fixtures describe as a three-node flannel lab.
const INVENTORY: &str = "cluster:
  cni: flannel
  podCIDR: 10.244.0.0/16
  serviceCIDR: 10.96.0.0/12
  overlay: {mode: vxlan, port: 8472, vni: 1}
  api: {service: \"10.96.0.1:443\", endpoints: [\"192.168.56.10:6443\"]}
nodes:
  - name: n1
    roles: [control-plane]
    address: 192.168.56.10
    podCIDR: 10.244.1.0/24
    agents:
      host: {exec: [ip, netns, exec, lab-n1], address: 192.168.56.10, port: 9917}
";

/// A valid saved report with one unknown result (written before results carried `unknown`).
const REPORT: &str = r#"{"schema":"prober.report/v1","results":[{"id":"a","path":"pod-to-pod","from":{"node":"n1","agent":"pod"},"to":{"address":"10.0.0.1","port":9917,"protocol":"tcp"},"outcome":"timeout","detail":"unknown: x"}],"findings":[],"agents":[],"summary":{"total":1,"ok":0,"failed":0,"unknown":1,"nodes":1,"agents":1,"agentsMissing":0,"durationMillis":1,"interrupted":false,"byPath":{},"exitCode":3}}"#;

/// Replaces one character of `text` (chosen by `at`) with `with`, or cuts the text there.
fn mutate(text: &str, at: usize, with: char, cut: bool) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return String::new();
    }
    let i = at % chars.len();
    if cut {
        return chars[..i].iter().collect();
    }
    let mut out = chars;
    out[i] = with;
    out.into_iter().collect()
}

fn any_char() -> impl Strategy<Value = char> {
    prop_oneof![
        Just(':'),
        Just('-'),
        Just(' '),
        Just('\n'),
        Just('{'),
        Just('['),
        Just('"'),
        Just('&'),
        Just('*'),
        Just('9'),
        any::<char>()
    ]
}

/// The cases each property runs: `default` in the normal test run, `PROPTEST_CASES` when set
/// (bench/fuzz.sh runs them longer).
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(default)
}

/// An inventory that validates is one whose every plan the agents accept: ids, names, ports,
/// addresses and sizes within their limits.
fn agents_accept_its_plans(inv: &Inventory) -> Result<(), TestCaseError> {
    use std::num::{NonZeroU32, NonZeroU64};
    let planned = prober::plan::plan(inv, &prober::plan::Filter::default());
    let probes: Vec<probe_proto::ProbeSpec> = planned
        .iter()
        .map(|p| probe_proto::ProbeSpec {
            id: p.id.to_string(),
            timeout_ms: None,
            probe: p.probe.clone(),
        })
        .collect();
    if probes.is_empty() {
        return Ok(());
    }
    let plan = probe_proto::Plan {
        deadline_ms: NonZeroU64::new(60_000).unwrap(),
        concurrency: NonZeroU32::new(64).unwrap(),
        probe_timeout_ms: NonZeroU64::new(2000).unwrap(),
        probes,
    };
    let text = serde_json::to_string(&plan).unwrap();
    prop_assert!(
        probe_proto::parse_plan(&text).is_ok(),
        "{:?}",
        probe_proto::parse_plan(&text).err()
    );
    Ok(())
}

/// The inventory's values the mutations aim at: names, ports, sizes, modes.
fn inventory_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("0".to_string()),
        Just("65535".to_string()),
        Just("4294967295".to_string()),
        Just("bogus".to_string()),
        Just("\"a b\"".to_string()),
        "[a-z0-9.-]{0,300}",
        any::<u16>().prop_map(|n| n.to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(256)))]

    #[test]
    fn inventories_never_panic(text in ".{0,400}", at in any::<usize>(), c in any_char(), cut in any::<bool>()) {
        if let Ok(inv) = from_yaml::<Inventory>(&text) {
            let _ = inv.validate();
        }
        if let Ok(inv) = from_yaml::<Inventory>(&mutate(INVENTORY, at, c, cut)) {
            let _ = inv.validate();
        }
    }

    /// Whatever value lands in a field, an inventory that validates plans only what the agents
    /// accept.
    #[test]
    fn a_valid_inventory_makes_plans_the_agents_accept(
        field in prop_oneof![
            Just("name: n1"), Just("port: 9917"), Just("port: 8472"), Just("vni: 1"),
            Just("mode: vxlan"), Just("address: 192.168.56.10"), Just("podCIDR: 10.244.1.0/24"),
        ],
        value in inventory_value(),
        mtu in proptest::option::of(any::<u16>()),
    ) {
        let (key, _) = field.split_once(": ").unwrap();
        let mut text = INVENTORY.replacen(field, &format!("{key}: {value}"), 1);
        if let Some(m) = mtu {
            text = text.replace("vni: 1}", &format!("vni: 1, mtu: {m}}}"));
        }
        if let Ok(inv) = from_yaml::<Inventory>(&text)
            && inv.validate().is_ok()
        {
            agents_accept_its_plans(&inv)?;
        }
    }

    #[test]
    fn scenarios_never_panic(text in ".{0,400}", at in any::<usize>(), c in any_char(), cut in any::<bool>()) {
        let _ = Scenario::parse(&text);
        let _ = Scenario::parse(&mutate(&read("tests/scenarios/flannel-8472.yaml"), at, c, cut));
    }

    /// A scenario that parses never puts a line break, a control character or an unchecked name
    /// into the commands that build its lab.
    #[test]
    fn a_valid_scenario_builds_only_plain_commands(
        name in prop_oneof!["[a-z0-9-]{1,24}", ".{0,30}", Just("rt".to_string()), Just("n1p0".to_string())],
        zone in prop_oneof!["[a-z0-9-]{1,10}", ".{0,12}"],
    ) {
        let text = format!(
            "zones: [{{name: {}, nodes: [n1]}}]\ncandidate: {{name: {}, zone: {}}}\n",
            serde_json::to_string(&zone).unwrap(),
            serde_json::to_string(&name).unwrap(),
            serde_json::to_string(&zone).unwrap(),
        );
        if let Ok(s) = Scenario::parse(&text) {
            let layout = prober::lab::build::layout(&s, "plab-p-", std::path::Path::new("/run/x"));
            let namespaces = layout.namespaces();
            let unique: std::collections::HashSet<&String> = namespaces.iter().collect();
            prop_assert_eq!(unique.len(), namespaces.len(), "two namespaces share a name");
            for st in prober::lab::build::setups(&s, &layout) {
                for line in st.links.iter().chain(&st.config).chain(&st.fdb) {
                    prop_assert!(!line.chars().any(char::is_control), "{:?}", line);
                }
                prop_assert!(st.ns.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'), "{:?}", st.ns);
            }
        }
    }

    #[test]
    fn reports_never_panic(text in ".{0,400}", at in any::<usize>(), c in any_char(), cut in any::<bool>()) {
        let _ = Report::from_json(&text);
        let _ = Report::from_json(&mutate(REPORT, at, c, cut));
    }

    /// Whatever text a saved report holds, its table and its diff reach the terminal without a
    /// raw control character, and without a panic.
    #[test]
    fn a_reports_text_reaches_the_terminal_escaped(
        node in "(.|\n){0,80}",
        detail in "(.|\n){0,200}",
        long in 0usize..70_000,
    ) {
        let node = format!("{node}{}", "x".repeat(long));
        let text = REPORT
            .replace("\"node\":\"n1\"", &format!("\"node\":{}", serde_json::to_string(&node).unwrap()))
            .replace("\"detail\":\"unknown: x\"", &format!("\"detail\":{}", serde_json::to_string(&detail).unwrap()));
        let report = Report::from_json(&text).unwrap();
        let shown = prober::report::table(&report, prober::report::Style { color: false, width: 80 });
        prop_assert!(!shown.chars().any(|c| c.is_control() && c != '\n'), "{:?}", shown);
    }

    /// Agent output of any shape: results, a protocol error, or the budget's refusal; never a
    /// panic, never more than the budget read.
    #[test]
    fn agent_result_lines_never_panic(
        lines in proptest::collection::vec(prop_oneof![
            "(.|\n){0,120}",
            Just("{\"id\":\"a\",\"outcome\":\"ok\",\"detail\":\"x\"}".to_string()),
            Just(String::new()),
        ], 0..20),
        budget in 0u64..4096,
    ) {
        let text = lines.join("\n");
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let read = rt.block_on(prober::runtime::read_results(text.as_bytes(), &tx, budget));
        drop(tx);
        let mut got = 0;
        while rx.try_recv().is_ok() {
            got += 1;
        }
        if let Ok(n) = read {
            prop_assert_eq!(n, got);
            prop_assert!(text.len() as u64 <= budget);
        }
    }
}

/// A Calico selector's words, joined at random: operators, terms, and unbalanced runs.
fn selector_text() -> impl Strategy<Value = String> {
    let word = prop_oneof![
        Just("!"),
        Just("("),
        Just(")"),
        Just(" && "),
        Just(" || "),
        Just("all()"),
        Just("has(app.kubernetes.io/name)"),
        Just("app.kubernetes.io/name == 'prober'"),
        Just("role != \"x\""),
        Just("projectcalico.org/namespace in {'prober-system', 'b'}"),
        Just("k not in {}"),
        Just("global()"),
        Just("'"),
        Just("{"),
        Just(","),
    ];
    (
        proptest::collection::vec(word, 0..60),
        0usize..100_000,
        prop_oneof![Just("!"), Just("("), Just("all() && ")],
    )
        .prop_map(|(words, deep, run)| format!("{}{}", run.repeat(deep % 200_000), words.concat()))
}

/// A policy object of `kind` with `spec`, as discovery stores it.
fn policy(
    api_version: &str,
    kind: &str,
    spec: &serde_json::Value,
) -> prober::inventory::PolicyObject {
    serde_json::from_value(serde_json::json!({
        "apiVersion": api_version, "kind": kind,
        "metadata": {"name": "fuzzed", "namespace": "prober-system"}, "spec": &spec,
    }))
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(64)))]

    /// Whatever a policy's selectors say (Calico's expressions, Kubernetes' label selectors),
    /// compiling and judging a flow returns a verdict: no panic, no stack overflow, and a
    /// selector it cannot read is "cannot evaluate".
    #[test]
    fn policy_selectors_never_panic(
        calico in selector_text(),
        keys in proptest::collection::vec("[a-z./-]{0,12}", 0..400),
        op in prop_oneof![Just("In"), Just("NotIn"), Just("Exists"), Just("DoesNotExist"), Just("Bogus")],
        values in proptest::collection::vec(".{0,8}", 0..1_500),
    ) {
        use prober::diagnose::policy::{Agents, Dir, Flow, Peer, Policies};
        let exprs: Vec<serde_json::Value> = keys
            .iter()
            .map(|k| serde_json::json!({"key": k, "operator": op, "values": values}))
            .collect();
        let label_selector = serde_json::json!({"matchExpressions": exprs});
        let objects = [
            policy("projectcalico.org/v3", "GlobalNetworkPolicy", &serde_json::json!({
                "selector": calico, "types": ["Ingress"],
                "ingress": [{"action": "Allow", "source": {"selector": calico}}],
            })),
            policy("networking.k8s.io/v1", "NetworkPolicy", &serde_json::json!({
                "podSelector": label_selector, "policyTypes": ["Ingress"],
                "ingress": [{"from": [{"podSelector": label_selector}]}],
            })),
            policy("cilium.io/v2", "CiliumNetworkPolicy", &serde_json::json!({
                "endpointSelector": label_selector,
                "ingress": [{"fromEndpoints": [label_selector]}],
            })),
            policy("policy.networking.k8s.io/v1alpha1", "AdminNetworkPolicy", &serde_json::json!({
                "priority": 10, "subject": {"namespaces": label_selector},
                "ingress": [{"action": "Deny", "from": [{"namespaces": label_selector}]}],
            })),
        ];
        let policies = Policies::new(&objects, Agents::deployed());
        let flow = Flow {
            dir: Dir::Ingress,
            node: "n2".into(),
            ip: "10.244.2.2".parse().unwrap(),
            peer: Peer::Agent { node: "n1".into(), ip: "10.244.1.2".parse().unwrap() },
            protocol: prober::model::Protocol::Tcp,
            port: Some(9917),
        };
        let _ = policies.verdict(&flow);
        for note in &policies.notes {
            prop_assert!(note.len() < 4096, "a note of {} bytes", note.len());
        }
    }

    /// Whatever bytes the memory's `ConfigMap` holds (gzip or not, JSON or not, a bomb), reading
    /// it returns a memory or an error, within the bounds.
    #[test]
    fn remembered_memories_never_panic(
        raw in proptest::collection::vec(any::<u8>(), 0..512),
        json in "(.|\n){0,300}",
        zeros in 0usize..3_000_000,
        at in any::<usize>(), c in any_char(), cut in any::<bool>(),
    ) {
        use prober::report::remembered::Remembered;
        use std::io::Write as _;
        let gzip = |text: &[u8]| {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(text).unwrap();
            gz.finish().unwrap()
        };
        let _ = Remembered::decode(&raw);
        let _ = Remembered::decode(&gzip(json.as_bytes()));
        let _ = Remembered::decode(&gzip(mutate(MEMORY, at, c, cut).as_bytes()));
        // The issue's bomb, at every size: a list of zeros in `dropped`.
        let bomb = MEMORY.replace("\"dropped\":[]", &format!("\"dropped\":[{}0]", "0,".repeat(zeros)));
        prop_assert!(Remembered::decode(&gzip(bomb.as_bytes())).is_err());
    }
}

/// A valid remembered memory's JSON, with an empty `dropped` for the bomb to fill.
const MEMORY: &str = r#"{"schema":"prober.remembered/v1","finished":0,"counts":{"total":0,"ok":0,"failed":0,"unknown":0},"nodes":0,"exitCode":0,"byPath":{},"findings":[],"omitted":{"results":0,"resultIds":0,"findings":0},"dropped":[]}"#;

#[test]
fn the_valid_documents_parse() {
    // The mutations above start from documents that parse: otherwise they test nothing.
    let inv: Inventory = from_yaml(INVENTORY).unwrap();
    inv.validate().unwrap();
    Scenario::parse(&read("tests/scenarios/flannel-8472.yaml")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, MEMORY.as_bytes()).unwrap();
    prober::report::remembered::Remembered::decode(&gz.finish().unwrap()).unwrap();
    let report = Report::from_json(REPORT).unwrap();
    assert!(
        report.results.at(0).is_unknown(),
        "old unknown results are read as unknown"
    );
}
