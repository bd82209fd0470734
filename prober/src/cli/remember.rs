//! `matrix --remember`: the scheduled mode's memory. Reads the remembered run before probing,
//! and after it remembers this run and emits an Event per change. None of it fails the run: a
//! problem is said on stderr and the report stands.

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
            eprintln!("prober matrix: --remember: {e}; this run replaces it");
            Previous::Found(None)
        }
        Err(e) => {
            eprintln!("prober matrix: --remember: {e}; this run is not remembered");
            Previous::Unreachable
        }
    })
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
                eprintln!(
                    "prober matrix: --remember: warning: {e}; {} of the changes were announced as \
                     Events, and this run is remembered",
                    c.events
                );
            }
            Some(c)
        }
        Err(e) => {
            eprintln!("prober matrix: --remember: {e}");
            None
        }
    }
}
