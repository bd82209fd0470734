//! `matrix --remember`: the scheduled mode's memory. Reads the remembered run before probing,
//! and after it remembers this run and emits an Event per change. None of it fails the run: a
//! problem is said on stderr and the report stands.

use super::out::errln;
use prober::report::Report;
use prober::report::remembered::{self, Changes, RememberError, Remembered};

pub const NEEDS_KUBE: &str = "--remember keeps the last report in the cluster (a ConfigMap in \
                              the agents' namespace): it needs the Kubernetes API, not --inventory";

/// What was found before probing.
pub enum Previous {
    /// A remembered run (`None`: this is the first, or the memory was unreadable and is replaced).
    Found(Option<Remembered>),
    /// The memory could not be read: this run neither diffs nor overwrites it.
    Unreachable,
}

/// The remembered run, when `enabled`.
pub async fn recall(enabled: bool, client: &kube::Client, namespace: &str) -> Option<Previous> {
    if !enabled {
        return None;
    }
    Some(match remembered::recall(client, namespace).await {
        Ok(r) => Previous::Found(r),
        Err(RememberError::Encode(e)) => {
            errln!(
                "{}: --remember: warning: {e}; read as no memory, and this run replaces it",
                super::command("matrix")
            );
            Previous::Found(None)
        }
        Err(e) => {
            errln!(
                "{}: --remember: {e}; this run is not remembered",
                super::command("matrix")
            );
            Previous::Unreachable
        }
    })
}

/// The turn of `--sample`'s rotation this run takes: the one after the remembered run's (the
/// sample reduces it modulo its runs), so that successive runs cover every node pair; the
/// first turn without a remembered sample.
pub fn next_turn(previous: Option<&Previous>) -> usize {
    match previous {
        Some(Previous::Found(Some(r))) => r.sample.as_ref().map_or(0, |s| s.turn + 1),
        _ => 0,
    }
}

/// Diffs, emits the Events, remembers `report`; says on stderr what went wrong, if anything.
pub async fn remember(
    previous: Option<Previous>,
    client: &kube::Client,
    namespace: &str,
    report: &Report,
    finished: u64,
) -> Option<Changes> {
    let Some(Previous::Found(previous)) = previous else {
        return None;
    };
    match remembered::remember(client, namespace, previous.as_ref(), report, finished).await {
        Ok(c) => {
            // The run is remembered all the same: the Events are the announcement, not the
            // memory, and a refused one must not make every later run repeat it.
            if let Some(e) = &c.events_error {
                errln!(
                    "{}: --remember: warning: {e}; {} of the changes were announced as Events, \
                     and this run is remembered",
                    super::command("matrix"),
                    c.events
                );
            }
            Some(c)
        }
        Err(e) => {
            errln!("{}: --remember: {e}", super::command("matrix"));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remembered(turn: Option<usize>) -> Remembered {
        let mut report: Report = serde_json::from_value(serde_json::json!({
            "schema": "prober.report/v1", "results": [], "findings": [], "agents": [],
            "summary": {"total": 0, "ok": 0, "failed": 0, "unknown": 0, "nodes": 40, "agents": 80,
                        "agentsMissing": 0, "durationMillis": 10, "interrupted": false,
                        "byPath": {}, "exitCode": 0},
        }))
        .unwrap();
        report.sample = turn.map(|t| prober::plan::sample::Sampled {
            peers: 3,
            pairs: 120,
            possible_pairs: 1560,
            zones: vec!["a".into()],
            sampled_paths: prober::plan::sample::SAMPLED_PATHS.to_vec(),
            turn: t,
            runs: 13,
        });
        Remembered::of(&report, 1)
    }

    #[test]
    fn each_run_takes_the_turn_after_the_remembered_one() {
        let next = |p: Option<Previous>| next_turn(p.as_ref());
        assert_eq!(next(Some(Previous::Found(Some(remembered(Some(4)))))), 5);
        // The last turn's successor is reduced by the sample (turn modulo runs).
        assert_eq!(next(Some(Previous::Found(Some(remembered(Some(12)))))), 13);
        assert_eq!(next(Some(Previous::Found(Some(remembered(None))))), 0);
        assert_eq!(next(Some(Previous::Found(None))), 0);
        assert_eq!(next(Some(Previous::Unreachable)), 0);
        assert_eq!(next(None), 0);
    }
}
