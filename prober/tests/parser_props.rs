//! Property tests over every parser the coordinator exposes to files a person or another program
//! writes: inventories, scenarios and saved reports. Whatever the input, they return a value or a
//! clear error; they never panic. Mutations of valid documents reach deeper than random text.

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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn inventories_never_panic(text in ".{0,400}", at in any::<usize>(), c in any_char(), cut in any::<bool>()) {
        if let Ok(inv) = from_yaml::<Inventory>(&text) {
            let _ = inv.validate();
        }
        if let Ok(inv) = from_yaml::<Inventory>(&mutate(INVENTORY, at, c, cut)) {
            let _ = inv.validate();
        }
    }

    #[test]
    fn scenarios_never_panic(text in ".{0,400}", at in any::<usize>(), c in any_char(), cut in any::<bool>()) {
        let _ = Scenario::parse(&text);
        let _ = Scenario::parse(&mutate(&read("tests/scenarios/flannel-8472.yaml"), at, c, cut));
    }

    #[test]
    fn reports_never_panic(text in ".{0,400}", at in any::<usize>(), c in any_char(), cut in any::<bool>()) {
        let _ = Report::from_json(&text);
        let _ = Report::from_json(&mutate(REPORT, at, c, cut));
    }
}

#[test]
fn the_valid_documents_parse() {
    // The mutations above start from documents that parse: otherwise they test nothing.
    let inv: Inventory = from_yaml(INVENTORY).unwrap();
    inv.validate().unwrap();
    Scenario::parse(&read("tests/scenarios/flannel-8472.yaml")).unwrap();
    let report = Report::from_json(REPORT).unwrap();
    assert!(
        report.results.at(0).is_unknown(),
        "old unknown results are read as unknown"
    );
}
