//! Where a pass puts its results: a slot per planned probe for the whole matrix, compacted as
//! answers get through, or a map for the few probes a retry runs.

use std::collections::{HashMap, HashSet};

use probe_proto::{Outcome, ProbeResult};

use crate::model::Results;
use crate::plan::Planned;

/// Where a pass puts the results of planned probes, by their index in the plan: a slot per probe
/// for the whole matrix ([`Slots`]), a map for the few a retry runs.
pub(crate) trait Store {
    fn put(&mut self, i: usize, r: ProbeResult);
    /// The outcome of probe `i`, if it has a result.
    fn outcome(&self, i: usize) -> Option<Outcome>;
    /// Takes probe `i`'s result out, whole, to be changed and put back.
    fn take(&mut self, i: usize) -> Option<ProbeResult>;
    /// A result still open: for [`Slots`], a failure, or a failure a retry then got through (the
    /// only ones retries and receipts look at).
    fn result(&self, i: usize) -> Option<&ProbeResult>;
    fn result_mut(&mut self, i: usize) -> Option<&mut ProbeResult>;
    /// Probe `i` has not settled (an interrupted run stopped before it was confirmed): whatever
    /// it has so far is not its result.
    fn unsettle(&mut self, i: usize);
}

impl Store for HashMap<usize, ProbeResult> {
    fn put(&mut self, i: usize, r: ProbeResult) {
        self.insert(i, r);
    }
    fn outcome(&self, i: usize) -> Option<Outcome> {
        self.get(&i).map(|r| r.outcome)
    }
    fn take(&mut self, i: usize) -> Option<ProbeResult> {
        self.remove(&i)
    }
    fn result(&self, i: usize) -> Option<&ProbeResult> {
        self.get(&i)
    }
    fn result_mut(&mut self, i: usize) -> Option<&mut ProbeResult> {
        self.get_mut(&i)
    }
    fn unsettle(&mut self, i: usize) {
        self.remove(&i);
    }
}

/// The first pass's results. An answer that got through is compacted into its row at once (a
/// crafted datagram's "sent" too: its receipt takes it out again, whole, and puts back what the
/// receiver saw); failures, which retries and receipts may change, stay whole until the run ends.
pub(crate) struct Slots {
    done: Results,
    open: HashMap<usize, ProbeResult>,
    /// Probes an interrupted run left unsettled: unknown, whatever they had so far. Empty but
    /// for an interrupted run.
    unsettled: HashSet<usize>,
}

impl Slots {
    pub(in crate::run) fn new(planned: &Planned) -> Self {
        Self {
            done: Results::placeholders(planned.len()),
            open: HashMap::new(),
            unsettled: HashSet::new(),
        }
    }

    /// The failed results, by index.
    pub(in crate::run) fn failed(&self) -> impl Iterator<Item = (usize, &ProbeResult)> {
        self.open
            .iter()
            .filter(|(_, r)| !r.outcome.is_ok())
            .map(|(&i, r)| (i, r))
    }

    pub(in crate::run) fn into_parts(
        self,
    ) -> (Results, HashMap<usize, ProbeResult>, HashSet<usize>) {
        (self.done, self.open, self.unsettled)
    }
}

impl Store for Slots {
    fn put(&mut self, i: usize, r: ProbeResult) {
        // Once open (a failure that a retry then got through), it stays open for its tally.
        if r.outcome.is_ok() && !self.open.contains_key(&i) {
            self.done.set(i, None, r);
        } else {
            self.open.insert(i, r);
        }
    }
    fn outcome(&self, i: usize) -> Option<Outcome> {
        match self.open.get(&i) {
            Some(r) => Some(r.outcome),
            None => self.done.outcome(i),
        }
    }
    fn take(&mut self, i: usize) -> Option<ProbeResult> {
        self.open.remove(&i).or_else(|| self.done.result_of(i))
    }
    fn result(&self, i: usize) -> Option<&ProbeResult> {
        self.open.get(&i)
    }
    fn result_mut(&mut self, i: usize) -> Option<&mut ProbeResult> {
        self.open.get_mut(&i)
    }
    fn unsettle(&mut self, i: usize) {
        self.open.remove(&i);
        self.unsettled.insert(i);
    }
}
