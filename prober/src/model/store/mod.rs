//! A run's results held compactly: per result a 16-byte row and the plan's 16-byte key, and every
//! name, target, detail and rarely set field stored once however many results share it (an
//! agent's name, a target, "tcp connect 10.0.0.2:10250: connected", an HTTP status). Read through
//! [`Record`] views that borrow from the store, so a 1,000-node matrix of millions of results is
//! never held as millions of owned structs.
//!
//! What an `ok` result carries only for its own sake is not kept: the source port it was sent from
//! and the sniffer's sightings of it exist to place a failure, and an answered probe has none.
//!
//! `interner` stores each value once, `names` the agents, targets and ids a plan and its results
//! share, `id` reads an id back without writing it out, `view` the borrowed records; the rows
//! themselves are here.

mod id;
mod interner;
mod names;
mod view;

use std::fmt;

use probe_proto::{Outcome, ProbeResult};
use serde::{Deserialize, Serialize};

pub use id::Id;
pub(crate) use interner::Interner;
pub(crate) use names::Key;
pub use names::Names;
pub use view::{Iter, Record, ResultView, Viewed, Views};

use super::{ResultRecord, Unknown};

/// One result's own fields (its probe's key is in the store's `keys`, shared with the plan).
#[derive(Debug, Clone, Copy)]
struct Row {
    detail: u32,
    /// The rarely set fields, as a `ProbeResult` with the fields here left empty.
    rest: u32,
    /// Microseconds plus one; 0 when absent.
    rtt: u32,
    /// Attempts and the ones that got through, plus one; 0 when absent (at most 254: a run
    /// retries a failure a few times, not hundreds).
    attempts: u8,
    ok_attempts: u8,
    outcome: Outcome,
    unknown: Option<Unknown>,
}

/// A run's results, in plan order.
#[derive(Debug, Clone, Default)]
pub struct Results {
    names: Names,
    /// Each row's probe: the plan's keys, handed on.
    keys: Vec<Key>,
    details: Interner<Box<str>>,
    rests: Interner<ProbeResult>,
    rows: Vec<Row>,
}

/// A row's `rest` before its result is set ([`Results::placeholders`]); it reads as the first
/// rest and detail, which are empty.
const UNSET: u32 = u32::MAX;

static EMPTY_REST: std::sync::LazyLock<ProbeResult> =
    std::sync::LazyLock::new(|| ProbeResult::new("", Outcome::Ok, ""));

fn plus_one(v: Option<u32>) -> u8 {
    v.map_or(0, |v| {
        u8::try_from(v).unwrap_or(u8::MAX - 1).saturating_add(1)
    })
}

fn minus_one(v: u8) -> Option<u32> {
    v.checked_sub(1).map(u32::from)
}

impl Results {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one result at the end.
    pub fn push(&mut self, r: ResultRecord) {
        let key = self.names.key(r.path, r.from, r.to, &r.result.id);
        self.push_keyed(key, r.unknown, r.result);
    }

    /// Adds one result at the end, for the probe `key` (the result's own id is not read).
    pub(crate) fn push_keyed(&mut self, key: Key, unknown: Option<Unknown>, result: ProbeResult) {
        self.keys.push(key);
        let row = self.row(unknown, result);
        self.rows.push(row);
    }

    /// `len` rows, each waiting for its result ([`Results::set`]); the keys and names come last
    /// ([`Results::attach`]), so a run can fill its results while its plan still holds them.
    pub(crate) fn placeholders(len: usize) -> Self {
        let unset = Row {
            detail: 0,
            rest: UNSET,
            rtt: 0,
            attempts: 0,
            ok_attempts: 0,
            outcome: Outcome::Error,
            unknown: Some(Unknown::NoResult),
        };
        let mut out = Self {
            rows: vec![unset; len],
            ..Self::default()
        };
        // What an unset row reads as: nothing rare, no detail.
        out.rests.intern(EMPTY_REST.clone());
        out.details.intern_with("", || "".into());
        out
    }

    /// Sets the result of row `i`.
    pub(crate) fn set(&mut self, i: usize, unknown: Option<Unknown>, result: ProbeResult) {
        if i < self.rows.len() {
            self.rows[i] = self.row(unknown, result);
        }
    }

    /// The outcome of row `i`, once set.
    pub(crate) fn outcome(&self, i: usize) -> Option<Outcome> {
        self.rows
            .get(i)
            .filter(|r| r.rest != UNSET)
            .map(|r| r.outcome)
    }

    /// Row `i`'s result, whole but for its id (the row's key says which probe it is), once set.
    /// Works before the names are attached.
    pub(crate) fn result_of(&self, i: usize) -> Option<ProbeResult> {
        let row = self.rows.get(i).filter(|r| r.rest != UNSET)?;
        Some(ProbeResult {
            id: String::new(),
            outcome: row.outcome,
            rtt_micros: row.rtt.checked_sub(1).map(u64::from),
            detail: self.details.get(row.detail).to_string(),
            attempts: minus_one(row.attempts),
            ok_attempts: minus_one(row.ok_attempts),
            ..self.rests.get(row.rest).clone()
        })
    }

    /// Whether row `i` has its result.
    pub(crate) fn is_set(&self, i: usize) -> bool {
        self.rows.get(i).is_some_and(|r| r.rest != UNSET)
    }

    /// The rows' keys (one per row, in order) and the names they point into.
    pub(crate) fn attach(&mut self, names: Names, keys: Vec<Key>) {
        debug_assert_eq!(keys.len(), self.rows.len());
        self.names = names;
        self.keys = keys;
    }

    fn row(&mut self, unknown: Option<Unknown>, result: ProbeResult) -> Row {
        let detail = self
            .details
            .intern_with(result.detail.as_str(), || result.detail.as_str().into());
        let row = Row {
            detail,
            rtt: result.rtt_micros.map_or(0, |us| {
                u32::try_from(us).unwrap_or(u32::MAX - 1).saturating_add(1)
            }),
            attempts: plus_one(result.attempts),
            ok_attempts: plus_one(result.ok_attempts),
            outcome: result.outcome,
            unknown,
            rest: 0,
        };
        let answered = result.outcome.is_ok() && unknown.is_none();
        let mut rest = result;
        rest.id = String::new();
        rest.outcome = Outcome::Ok;
        rest.detail = String::new();
        rest.rtt_micros = None;
        rest.attempts = None;
        rest.ok_attempts = None;
        if answered {
            // Only a failure needs to be placed.
            rest.source = None;
            rest.nonce = None;
            rest.seen = None;
        }
        let rest = self.rests.intern(rest);
        Row { rest, ..row }
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The result at `i` in plan order; panics past the end, as indexing does.
    #[must_use]
    pub fn at(&self, i: usize) -> Record<'_> {
        self.view(i)
    }

    /// The result at `i` in plan order.
    #[must_use]
    pub fn get(&self, i: usize) -> Option<Record<'_>> {
        (i < self.len()).then(|| self.view(i))
    }

    #[must_use]
    pub fn iter(&self) -> Iter<'_> {
        Views::new(self, self.len())
    }

    /// The results as owned records (tests, and small reports).
    #[must_use]
    pub fn to_vec(&self) -> Vec<ResultRecord> {
        self.iter().map(|r| r.to_owned()).collect()
    }
}

impl<'a> IntoIterator for &'a Results {
    type Item = Record<'a>;
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl FromIterator<ResultRecord> for Results {
    fn from_iter<I: IntoIterator<Item = ResultRecord>>(iter: I) -> Self {
        let mut out = Self::new();
        for r in iter {
            out.push(r);
        }
        out
    }
}

impl Results {
    /// A store of copies of `records` (tests, and small reports).
    #[must_use]
    pub fn of(records: &[ResultRecord]) -> Self {
        records.iter().cloned().collect()
    }
}

impl From<Vec<ResultRecord>> for Results {
    fn from(v: Vec<ResultRecord>) -> Self {
        v.into_iter().collect()
    }
}

impl PartialEq for Results {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().zip(other.iter()).all(|(a, b)| a == b)
    }
}

/// Written as the list of records, one at a time.
impl Serialize for Results {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

/// Read one record at a time into the compact form.
impl<'de> Deserialize<'de> for Results {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Results;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of results")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Results, A::Error> {
                let mut out = Results::new();
                while let Some(r) = seq.next_element::<ResultRecord>()? {
                    out.push(r);
                }
                Ok(out)
            }
        }
        d.deserialize_seq(Visit)
    }
}

#[cfg(test)]
mod tests;
