//! The pass's tests: one pass over the agents against in-process runtimes.

use super::*;
use crate::model::{AgentKind, PathClass, Protocol, Target};
use crate::plan::{Filter, PlannedProbe, plan};
use crate::runtime::RuntimeError;
use crate::testutil::inventory;

fn host(node: &str) -> AgentRef {
    AgentRef {
        node: node.into(),
        agent: AgentKind::Host,
    }
}

fn tcp_from(node: &str, id: &str) -> PlannedProbe {
    PlannedProbe {
        id: id.into(),
        path: PathClass::NodeToNode,
        from: host(node),
        to: Target {
            node: Some("n9".into()),
            agent: Some(AgentKind::Host),
            service: None,
            address: "10.0.0.9".parse().unwrap(),
            port: Some(10250),
            protocol: Protocol::Tcp,
        },
        probe: Probe::Tcp(TcpProbe {
            address: "10.0.0.9".parse().unwrap(),
            port: probe_proto::Port::new(10250).unwrap(),
            echo: false,
        }),
        receipt_port: None,
    }
}

/// n2 honestly times out; n1 answers its own probe, then, once n2 is done, claims n2's
/// probes went through, invents one, and answers its own twice.
#[derive(Default)]
struct Forger {
    n2_done: tokio::sync::Notify,
}

impl Runtime for Forger {
    async fn run(
        &self,
        agent: &AgentRef,
        plan: Plan,
        results: mpsc::Sender<ProbeResult>,
    ) -> Result<(), RuntimeError> {
        let send = |id: &str, outcome| results.send(ProbeResult::new(id, outcome, "fake"));
        if agent.node == "n2" {
            for spec in &plan.probes {
                let _ = send(&spec.id, Outcome::Timeout).await;
            }
            self.n2_done.notify_one();
            return Ok(());
        }
        let _ = send("n1-a", Outcome::Ok).await;
        self.n2_done.notified().await;
        for id in ["n2-a", "n2-b", "nobody", "n1-a"] {
            let _ = send(id, Outcome::Ok).await;
        }
        Ok(())
    }
}

/// Kubernetes allows node names of 253 characters: every probe id the planner makes for
/// them is one the agents accept (a 110-character name once left 30 of 92 probes unknown).
#[test]
fn the_longest_node_names_make_ids_the_agents_accept() {
    let mut inv = inventory(3, 1, "flannel");
    // Labels of 63, 63, 63 and 61 characters: 253 in all.
    let label = "a".repeat(63);
    for (i, n) in inv.nodes.iter_mut().enumerate() {
        n.name = format!("{i}{}.{label}.{label}.{}", &label[1..], "a".repeat(61));
        assert_eq!(n.name.len(), probe_proto::MAX_NODE_NAME_BYTES);
    }
    if let Some(dns) = inv.cluster.dns.as_mut() {
        dns.names = vec![format!("{}.cluster.local", "b".repeat(63))];
    }
    inv.validate().unwrap();
    let planned = plan(&inv, &Filter::default());
    let specs: Vec<ProbeSpec> = planned
        .iter()
        .map(|p| ProbeSpec {
            id: p.id.to_string(),
            timeout_ms: None,
            probe: p.probe.clone(),
        })
        .collect();
    let n = specs.len();
    let text = serde_json::to_string(&super::super::plan_for(
        specs,
        &super::super::RunConfig::default(),
    ))
    .unwrap();
    let parsed = probe_proto::parse_plan(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(parsed.probes.len(), n);
}

#[tokio::test]
async fn an_agent_cannot_answer_for_another_agent() {
    let planned = Planned::from(vec![
        tcp_from("n1", "n1-a"),
        tcp_from("n2", "n2-a"),
        tcp_from("n2", "n2-b"),
    ]);
    let cfg = super::super::RunConfig {
        retries: 0,
        ..super::super::RunConfig::default()
    };
    let out = super::super::run(
        &planned,
        Arc::new(Forger::default()),
        &cfg,
        &(),
        std::future::pending(),
    )
    .await;
    let by: HashMap<String, Outcome> = out
        .results
        .to_vec()
        .into_iter()
        .map(|r| (r.result.id.clone(), r.result.outcome))
        .collect();
    assert_eq!(by["n2-a"], Outcome::Timeout, "n1 rewrote n2's result");
    assert_eq!(by["n2-b"], Outcome::Timeout, "n1 rewrote n2's result");
    assert_eq!(by["n1-a"], Outcome::Ok);
    let status = |node: &str| {
        out.agents
            .iter()
            .find(|a| a.node == node)
            .unwrap_or_else(|| panic!("{node}: no status"))
    };
    let n1 = status("n1");
    assert!(!n1.ran, "{n1:?}");
    assert!(
        n1.detail.contains("protocol violation")
            && n1.detail.contains("\"n2-a\"")
            && n1.detail.contains("2 result(s) for the 1 probe(s)"),
        "{}",
        n1.detail
    );
    assert!(status("n2").ran, "{:?}", status("n2"));
}

#[test]
fn slots_compact_what_got_through_and_keep_failures_whole() {
    let planned = plan(&inventory(3, 1, "flannel"), &Filter::default());
    let mut slots = Slots::new(&planned);
    let mut ok = ProbeResult::new("x", Outcome::Ok, "sent");
    ok.nonce = Some(9);
    ok.rtt_micros = Some(120);
    slots.put(0, ok);
    let mut lost = ProbeResult::new("y", Outcome::Timeout, "no answer");
    lost.source = Some("10.0.0.1:40000".parse().unwrap());
    slots.put(1, lost.clone());
    // Only the failure is open for retries and receipts, whole.
    assert_eq!(slots.failed().map(|(i, _)| i).collect::<Vec<_>>(), [1]);
    assert_eq!(slots.result(0), None);
    assert_eq!(slots.result(1), Some(&lost));
    assert_eq!(slots.outcome(0), Some(Outcome::Ok));
    assert_eq!(slots.outcome(2), None);
    // A crafted "sent" is taken out whole (but for what only places a failure) and what its
    // receipt says is put back: a failure goes open.
    let mut sent = slots.take(0).unwrap();
    assert_eq!((sent.detail.as_str(), sent.rtt_micros), ("sent", Some(120)));
    sent.outcome = Outcome::Timeout;
    slots.put(0, sent);
    assert_eq!(slots.outcome(0), Some(Outcome::Timeout));
    assert_eq!(slots.failed().count(), 2);
    // A retry that got through stays open, for its tally.
    slots.put(1, ProbeResult::new("y", Outcome::Ok, "answered"));
    assert_eq!(slots.result(1).map(|r| r.outcome), Some(Outcome::Ok));
    let (done, open, _) = slots.into_parts();
    assert_eq!(open.len(), 2);
    assert!(done.is_set(0) && !done.is_set(2));
}
