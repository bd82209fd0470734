//! A run stopped at every moment it can be stopped (each agent plan and each receipt question)
//! never reports what the whole run contradicts: what had not settled is unknown (interrupted),
//! never `ok`, and a failure stands only once its retries confirmed it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use probe_proto::{Outcome, Plan, Probe, ProbeResult, SeenProbe, Sighting, SightingKind};
use tokio::sync::{Notify, mpsc};

use super::{RunConfig, RunOutput, run};
use crate::model::{AgentRef, Unknown};
use crate::plan::{Filter, Planned, plan};
use crate::runtime::{Runtime, RuntimeError};
use crate::testutil::inventory;

/// A cluster whose n3 is cut off from the overlay: every datagram to n3 goes unseen and every
/// pod probe that involves n3 times out. The `stop_at`-th conversation (an agent's plan or a
/// `seen` question) fires the cancel and never answers.
struct Gap {
    calls: AtomicUsize,
    stop_at: usize,
    stop: Arc<Notify>,
}

fn cut(id: &str) -> bool {
    id.starts_with("pod-to-pod") && id.contains("n3")
}

impl Runtime for Gap {
    async fn run(
        &self,
        agent: &AgentRef,
        plan: Plan,
        results: mpsc::Sender<ProbeResult>,
    ) -> Result<(), RuntimeError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) + 1 == self.stop_at {
            self.stop.notify_one();
            std::future::pending::<()>().await;
        }
        for spec in plan.probes {
            let r = match &spec.probe {
                Probe::Seen(SeenProbe { nonces, .. }) => {
                    let mut r = ProbeResult::new(&spec.id, Outcome::Ok, "seen");
                    let arrived = agent.node != "n3";
                    r.seen = Some(
                        nonces
                            .iter()
                            .flatten()
                            .filter(|_| arrived)
                            .flat_map(|&nonce| {
                                [("eth0", false), ("flannel.1", true)].map(|(i, d)| Sighting {
                                    nonce,
                                    interface: i.into(),
                                    from: "192.168.56.10".parse().unwrap(),
                                    at_ms: 1,
                                    decapsulated: d,
                                    kind: SightingKind::Vxlan,
                                    flow: None,
                                    reply: false,
                                })
                            })
                            .collect(),
                    );
                    r
                }
                Probe::Vxlan(_) => ProbeResult::new(&spec.id, Outcome::Ok, "sent"),
                _ if cut(&spec.id) => ProbeResult::new(&spec.id, Outcome::Timeout, "timeout"),
                _ => ProbeResult::new(&spec.id, Outcome::Ok, "answered"),
            };
            if results.send(r).await.is_err() {
                break;
            }
        }
        Ok(())
    }
}

async fn run_stopped_at(planned: &Planned, stop_at: usize) -> RunOutput {
    let stop = Arc::new(Notify::new());
    let rt = Arc::new(Gap {
        calls: AtomicUsize::new(0),
        stop_at,
        stop: stop.clone(),
    });
    let cfg = RunConfig {
        retries: 1,
        ..RunConfig::default()
    };
    run(planned, rt, &cfg, &(), async move { stop.notified().await }).await
}

#[tokio::test]
async fn an_interrupted_run_claims_only_what_settled() {
    let planned = plan(&inventory(3, 1, "flannel"), &Filter::default());
    let full = run_stopped_at(&planned, usize::MAX).await;
    assert!(!full.interrupted);
    let truth: HashMap<String, Outcome> = full
        .results
        .iter()
        .map(|r| (r.result.id.to_string(), r.result.outcome))
        .collect();
    // The whole run has both: datagrams confirmed, datagrams lost, pod paths cut.
    let vx = |id: &str| id.starts_with("overlay:") && id.contains("vxlan");
    assert!(truth.iter().any(|(id, o)| vx(id) && o.is_ok()));
    assert!(truth.iter().any(|(id, o)| vx(id) && !o.is_ok()));
    assert!(truth.iter().any(|(id, o)| cut(id) && !o.is_ok()));
    // Every moment: each agent's plan, the first pass's receipts, the retry and its receipts.
    let moments: Vec<usize> = (1..=16).collect();
    let runs = moments.iter().map(|&k| run_stopped_at(&planned, k));
    let outs = futures_util::future::join_all(runs).await;
    let mut stopped = 0;
    for (k, out) in moments.iter().zip(outs) {
        if !out.interrupted {
            continue;
        }
        stopped += 1;
        assert_eq!(
            out.results.len(),
            planned.len(),
            "stop {k}: one result per probe"
        );
        for r in &out.results {
            let id = r.result.id.to_string();
            let outcome = r.result.outcome;
            if r.is_unknown() {
                assert_eq!(r.unknown, Some(Unknown::Interrupted), "stop {k}: {id}");
                continue;
            }
            assert_eq!(
                outcome.is_ok(),
                truth[&id].is_ok(),
                "stop {k}: {id} is {outcome} ({}) but the whole run says {}",
                r.result.detail,
                truth[&id]
            );
        }
    }
    assert!(stopped >= 8, "most moments stop the run: {stopped}");
}
