//! The store keeps what a result needs, once.

use super::*;
use crate::model::{AgentKind, AgentRef, PathClass, Protocol, Target};
use probe_proto::{IcmpInfo, Receipt};

fn record(from: &str, to: &str, id: &str, outcome: Outcome) -> ResultRecord {
    let mut result = ProbeResult::new(id, outcome, format!("{outcome} to {to}"));
    result.rtt_micros = outcome.is_ok().then_some(250);
    result.source = Some("10.0.0.1:40000".parse().unwrap());
    result.nonce = Some(7);
    ResultRecord {
        path: PathClass::NodeToNode,
        from: AgentRef {
            node: from.into(),
            agent: AgentKind::Host,
        },
        to: Target {
            node: Some(to.into()),
            agent: Some(AgentKind::Host),
            service: None,
            address: "10.0.0.2".parse().unwrap(),
            port: Some(10250),
            protocol: Protocol::Tcp,
        },
        unknown: None,
        result,
    }
}

#[test]
fn a_failure_reads_back_whole_and_an_answer_without_what_only_places_a_failure() {
    let mut failed = record(
        "n1",
        "n2",
        "node-to-node:n1/host->n2/host:tcp/10250",
        Outcome::Timeout,
    );
    failed.result.icmp = Some(IcmpInfo {
        icmp_type: 3,
        code: 13,
        from: None,
    });
    failed.result.receipt = Some(Receipt::NotArrived);
    failed.result.attempts = Some(3);
    failed.result.ok_attempts = Some(0);
    let ok = record(
        "n2",
        "n1",
        "node-to-node:n2/host->n1/host:tcp/10250",
        Outcome::Ok,
    );
    // An id the planner did not write: kept whole.
    let odd = record("n1", "n3", "a hand-written id", Outcome::Refused);
    let store = Results::of(&[failed.clone(), ok.clone(), odd.clone()]);
    assert_eq!(store.len(), 3);
    assert_eq!(store.at(0).to_owned(), failed);
    assert_eq!(store.at(2).to_owned(), odd);
    let mut expected = ok.clone();
    expected.result.source = None;
    expected.result.nonce = None;
    assert_eq!(store.at(1).to_owned(), expected);
    assert_eq!(store.at(0).result.icmp.map(|i| i.code), Some(13));
    assert!(store.at(0).is_failed());
    assert!(!store.at(1).is_failed());
    // The JSON is the owned record's, one record at a time.
    let json = serde_json::to_value(&store).unwrap();
    assert_eq!(json[0], serde_json::to_value(&failed).unwrap());
    let back: Results = serde_json::from_value(json).unwrap();
    assert_eq!(back, store);
}

#[test]
fn ids_are_compared_and_written_without_storing_their_prefix() {
    let id = "node-to-node:n1/host->n2/host:tcp/10250";
    let store = Results::of(&[record("n1", "n2", id, Outcome::Ok)]);
    let r = store.at(0);
    assert_eq!(r.result.id.to_string(), id);
    assert!(r.result.id.is(id));
    assert!(!r.result.id.is("node-to-node:n1/host->n2/host:tcp/1025"));
    assert!(!r.result.id.is("node-to-node:n9/host->n2/host:tcp/10250"));
    assert_eq!(r.result.id.parts().collect::<String>(), id);
    assert_eq!(r.result.id.text(), id);
}

#[test]
fn names_and_details_shared_by_many_results_are_stored_once() {
    let records: Vec<ResultRecord> = (0..1000)
        .map(|i| {
            let id = format!("node-to-node:n{}/host->n2/host:tcp/10250", i % 10);
            record(&format!("n{}", i % 10), "n2", &id, Outcome::Ok)
        })
        .collect();
    let store = Results::of(&records);
    assert_eq!(store.names.agents.items.len(), 10);
    assert_eq!(store.names.targets.items.len(), 1);
    assert_eq!(store.names.strings.items.len(), 1, "one id tail");
    assert_eq!(store.details.items.len(), 1);
    assert_eq!(store.rests.items.len(), 1);
    assert_eq!(std::mem::size_of::<Row>(), 16);
    assert_eq!(std::mem::size_of::<Key>(), 16);
}

#[test]
fn placeholders_wait_for_their_result() {
    let mut names = Names::default();
    let r = record(
        "n1",
        "n2",
        "node-to-node:n1/host->n2/host:tcp/10250",
        Outcome::Ok,
    );
    let key = names.key(r.path, r.from.clone(), r.to.clone(), &r.result.id);
    let mut store = Results::placeholders(2);
    assert!(!store.is_set(0) && !store.is_set(1));
    store.set(1, None, r.result.clone());
    assert!(!store.is_set(0) && store.is_set(1));
    store.attach(names, vec![key, key]);
    assert_eq!(store.at(1).result.outcome, Outcome::Ok);
    assert_eq!(store.at(0).unknown, Some(Unknown::NoResult));
    assert_eq!(store.at(1).result.id.to_string(), r.result.id);
}

#[test]
fn a_result_is_written_with_the_family_of_the_address_it_probed() {
    let v4 = record(
        "n1",
        "n2",
        "node-to-node:n1/host->n2/host:tcp/10250",
        Outcome::Ok,
    );
    let mut v6 = record(
        "n1",
        "n2",
        "node-to-node:n1/host->n2/host:tcp/10250/ipv6",
        Outcome::Timeout,
    );
    v6.to.address = "fd00:56::11".parse().unwrap();
    let store = Results::of(&[v4, v6.clone()]);
    let json = serde_json::to_value(&store).unwrap();
    assert_eq!(json[0]["family"], "ipv4");
    assert_eq!(json[1]["family"], "ipv6");
    assert_eq!(json[1]["to"]["address"], "fd00:56::11");
    // Derived, never stored: reading it back gives the same record.
    let back: Results = serde_json::from_value(json).unwrap();
    assert_eq!(back.at(1).to_owned(), v6);
}
