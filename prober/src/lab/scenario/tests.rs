//! Scenario parsing, validation and finding patterns.

use std::path::Path;

use super::*;
use crate::diagnose::Kind;

#[test]
fn defaults() {
    let s = Scenario::parse("{}").unwrap();
    assert_eq!((s.nodes, s.control_planes, s.pods_per_node), (3, 1, 1));
    assert_eq!(s.node_names(), ["n1", "n2", "n3"]);
}

#[test]
fn full_scenario_parses() {
    let s = Scenario::parse(
        r#"
name: flannel-8472
nodes: 3
zones:
  - {name: office, nodes: [n1, n2]}
  - {name: dmz, nodes: [n3]}
faults:
  - {kind: firewall, action: drop, protocol: udp, port: 8472, from: [n3], direction: both}
  - {kind: firewall, action: reject, protocol: tcp, port: "2379-2380", to: [n1], place: host}
  - {kind: mtu, node: n2, mtu: 1400}
  - {kind: dns-loop}
expect:
  reachability:
    - {from: n1/pod, to: n3/pod, probe: tcp, outcome: timeout}
  findings:
    - {kind: firewall-gap, protocol: udp, port: 8472}
"#,
    )
    .unwrap();
    assert_eq!(s.zones.len(), 2);
    assert_eq!(s.faults.len(), 4);
    match &s.faults[1] {
        Fault::Firewall {
            port: Some(Ports::Range((2379, 2380))),
            place: Place::Host,
            ..
        } => {}
        f => panic!("unexpected {f:?}"),
    }
    assert_eq!(s.expect.findings[0].port, Some(8472));
    assert_eq!(s.expect.findings[0].kind, Some(Kind::FirewallGap));
}

#[test]
fn bad_scenarios_name_the_field() {
    let cases = [
        ("nodes: 0", "nodes"),
        ("controlPlanes: 4", "controlPlanes"),
        (
            "faults: [{kind: mtu, node: n9, mtu: 1400}]",
            "faults[0].node",
        ),
        (
            "faults: [{kind: firewall, action: drop, protocol: icmp, port: 1, from: [n1]}]",
            "faults[0].port",
        ),
        (
            "faults: [{kind: firewall, action: drop, protocol: udp, port: \"9-1\", from: [n1]}]",
            "range",
        ),
        ("faults: [{kind: teleport}]", "teleport"),
        ("nodez: 3", "nodez"),
        (
            "zones: [{name: a, nodes: [n1]}, {name: b, nodes: [n1]}]",
            "two zones",
        ),
        (
            "expect: {reachability: [{from: n1, to: n2/pod, probe: tcp, outcome: ok}]}",
            "NODE/host",
        ),
        ("paths: [overlay, sideways]", "sideways"),
        (
            "candidate: {name: new}\npaths: [overlay]",
            "paths: a scenario with a candidate",
        ),
        ("overlay: {mode: vxlan, mtuKnown: maybe}", "mtuKnown"),
    ];
    for (text, want) in cases {
        let err = Scenario::parse(text).unwrap_err().to_string();
        assert!(err.contains(want), "{text}: {err} should mention {want}");
    }
}

#[test]
fn misspelled_keys_are_errors_naming_the_key() {
    // (scenario, the key or value the error names, the field path it names)
    let cases = [
        (
            "expect: {findings: [{kimd: firewall-gap}]}",
            "kimd",
            "expect.findings[0]",
        ),
        (
            "expect: {notFindings: [{kimd: firewall-gap}]}",
            "kimd",
            "expect.notFindings[0]",
        ),
        (
            "expect: {notFindings: [{kind: dns}, {kind: bootstrap-cycle, sate: active}]}",
            "sate",
            "expect.notFindings[1]",
        ),
        (
            "expect: {notFindngs: [{kind: firewall-gap}]}",
            "notFindngs",
            "expect",
        ),
        (
            "expect: {reachability: [{from: n1/pod, to: n2/pod, probe: tcp, outcome: ok, icmpFrm: router}]}",
            "icmpFrm",
            "expect.reachability[0]",
        ),
        (
            "faults: [{kind: mtu, node: n2, mtu: 1400, mut: 1}]",
            "mut",
            "faults[0]",
        ),
        (
            "faults: [{kind: firewall, action: drop, protocol: udp, from: [n1], plase: host}]",
            "plase",
            "faults[0]",
        ),
        ("zones: [{name: a, nodez: [n1]}]", "nodez", "zones[0]"),
        // A misspelled value is as silent as a misspelled key.
        (
            "expect: {findings: [{kind: firewall-gapp}]}",
            "firewall-gapp",
            "expect.findings[0].kind",
        ),
        (
            "expect: {findings: [{kind: dns, protocol: udpp}]}",
            "udpp",
            "expect.findings[0].protocol",
        ),
        (
            "expect: {notFindings: [{kind: bootstrap-cycle, state: actve}]}",
            "actve",
            "expect.notFindings[0].state",
        ),
    ];
    for (text, key, path) in cases {
        match Scenario::parse(text) {
            Err(InvalidScenario::Shape(e)) => {
                assert!(e.field.starts_with(path), "{text}: {e} should be at {path}");
                let e = e.to_string();
                assert!(e.contains(key), "{text}: {e} should name {key}");
            }
            other => panic!("{text}: want a shape error naming {key}, got {other:?}"),
        }
    }
}

#[test]
fn an_empty_pattern_is_an_error() {
    let err = Scenario::parse("expect: {notFindings: [{kind: dns}, {}]}").unwrap_err();
    assert!(
        matches!(&err, InvalidScenario::EmptyPattern { field } if field == "expect.notFindings[1]"),
        "{err:?}"
    );
}

#[test]
fn every_checked_in_scenario_parses() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios");
    let mut files = Vec::new();
    for dir in [root.clone(), root.join("faults")] {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "yaml") {
                files.push(p);
            }
        }
    }
    assert!(files.len() >= 14, "the scenarios are checked in: {files:?}");
    for p in &files {
        let s = Scenario::load(p).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            !s.expect.reachability.is_empty(),
            "{}: expects nothing",
            p.display()
        );
        // The lab saves the scenario it built; the copy must read back as the same scenario.
        let saved = serde_saphyr::to_string(&s).unwrap();
        assert_eq!(Scenario::parse(&saved).unwrap(), s, "{saved}");
    }
}

#[test]
fn others_means_every_node_not_in_from() {
    let mut s = Scenario::load(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/scenarios/flannel-8472.yaml"),
    )
    .unwrap();
    s.nodes = 6;
    let e = s.expanded_expect();
    assert_eq!(
        e.findings[0].to.as_deref(),
        Some(&["n1", "n2", "n4", "n5", "n6"].map(String::from)[..])
    );
}

#[test]
fn kube_proxy_missing_takes_one_family_only_in_a_lab_that_has_it() {
    let s = Scenario::parse(
        "ipFamilies: [ipv4, ipv6]\nfaults: [{kind: kube-proxy-missing, node: n2, family: ipv6}]",
    )
    .unwrap();
    assert!(matches!(
        &s.faults[0],
        Fault::KubeProxyMissing {
            family: Some(crate::inventory::Family::Ipv6),
            ..
        }
    ));
    // Without `family`, both halves are missing, as before.
    let s = Scenario::parse("faults: [{kind: kube-proxy-missing, node: n2}]").unwrap();
    assert!(matches!(
        &s.faults[0],
        Fault::KubeProxyMissing { family: None, .. }
    ));
    let e = Scenario::parse("faults: [{kind: kube-proxy-missing, node: n2, family: ipv6}]")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("faults[0].family") && e.contains("ipFamilies"),
        "{e}"
    );
}

#[test]
fn what_would_do_nothing_or_fail_after_the_build_is_refused_at_parse() {
    for (text, field) in [
        (
            "faults: [{kind: firewall, action: drop, protocol: udp, port: 8472, to: [n2], family: ipv6}]",
            "faults[0].family",
        ),
        (
            "candidate: {name: new, occupied: [10250, 0]}",
            "candidate.occupied[1]",
        ),
        (
            "expect: {reachability: [{from: n1/pod, to: \"n9/pod; id\", probe: tcp, outcome: ok}]}",
            "expect.reachability[0].to",
        ),
        (
            "expect: {reachability: [{from: n1/pod, to: n2/pods, probe: tcp, outcome: ok}]}",
            "expect.reachability[0].to",
        ),
        (
            "expect: {reachability: [{from: n1/pod, to: kubernetes, probe: tcp, outcome: ok}]}",
            "expect.reachability[0].to",
        ),
    ] {
        let e = Scenario::parse(text).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{field}:")), "{text}: {e}");
    }
    // What the checks resolve still parses, and a firewall of the lab's own family.
    for text in [
        "expect: {reachability: [{from: n1/pod, to: n2/vtep, probe: vtep, outcome: ok}, \
         {from: n1/host, to: upstream-dns, probe: dns, outcome: ok}]}",
        "ipFamilies: [ipv4, ipv6]\nfaults: [{kind: firewall, action: drop, protocol: udp, port: 8472, to: [n2], \
         family: ipv6}]",
    ] {
        Scenario::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    }
}

#[test]
#[allow(clippy::disallowed_methods)] // a test reading the repository's own files
fn every_shipped_scenario_validates() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios");
    let mut dirs = vec![root];
    let mut seen = 0;
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml") {
                let text = std::fs::read_to_string(&path).unwrap();
                Scenario::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                seen += 1;
            }
        }
    }
    assert!(seen > 20, "{seen} scenarios");
}
