//! Borrowed views of a store's rows: [`Record`] and [`ResultView`], and the iterator over them.

use std::ops::Deref;

use probe_proto::{Outcome, ProbeResult};
use serde::Serialize;

use super::{Id, Results, UNSET, minus_one};
use crate::model::{AgentRef, PathClass, ResultRecord, Target, Unknown};

/// A compact store read row by row through borrowed views ([`Results`], the plan's `Planned`).
pub trait Viewed {
    type View<'a>
    where
        Self: 'a;
    /// The view of row `i`; panics past the end, as indexing does.
    fn view(&self, i: usize) -> Self::View<'_>;
}

/// A store's rows in order, as views.
#[derive(Debug)]
pub struct Views<'a, S> {
    store: &'a S,
    rows: std::ops::Range<usize>,
}

impl<'a, S> Views<'a, S> {
    pub(crate) fn new(store: &'a S, len: usize) -> Self {
        Self {
            store,
            rows: 0..len,
        }
    }
}

impl<S> Clone for Views<'_, S> {
    fn clone(&self) -> Self {
        Self {
            store: self.store,
            rows: self.rows.clone(),
        }
    }
}

impl<'a, S: Viewed> Iterator for Views<'a, S> {
    type Item = S::View<'a>;
    fn next(&mut self) -> Option<Self::Item> {
        self.rows.next().map(|i| self.store.view(i))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.rows.size_hint()
    }
}

impl<S: Viewed> DoubleEndedIterator for Views<'_, S> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.rows.next_back().map(|i| self.store.view(i))
    }
}

impl<S: Viewed> ExactSizeIterator for Views<'_, S> {}

pub type Iter<'a> = Views<'a, Results>;

impl Viewed for Results {
    type View<'a> = Record<'a>;
    fn view(&self, i: usize) -> Record<'_> {
        let (row, key) = (&self.rows[i], &self.keys[i]);
        let rest = self.rests.get(if row.rest == UNSET { 0 } else { row.rest });
        Record {
            path: key.path(),
            from: self.names.from(key),
            to: self.names.to(key),
            unknown: row.unknown,
            result: ResultView {
                id: self.names.id(key),
                outcome: row.outcome,
                rtt_micros: row.rtt.checked_sub(1).map(u64::from),
                detail: self.details.get(row.detail),
                attempts: minus_one(row.attempts),
                ok_attempts: minus_one(row.ok_attempts),
                rest,
            },
        }
    }
}

/// One result, borrowed from [`Results`]: the fields of a [`ResultRecord`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Record<'a> {
    pub path: PathClass,
    pub from: &'a AgentRef,
    pub to: &'a Target,
    pub unknown: Option<Unknown>,
    pub result: ResultView<'a>,
}

impl Record<'_> {
    /// The probe never ran: not known to fail.
    #[must_use]
    pub fn is_unknown(&self) -> bool {
        self.unknown.is_some()
    }

    /// The probe ran and the path failed.
    #[must_use]
    pub fn is_failed(&self) -> bool {
        !self.result.outcome.is_ok() && !self.is_unknown()
    }

    #[must_use]
    pub fn to_owned(&self) -> ResultRecord {
        ResultRecord {
            path: self.path,
            from: self.from.clone(),
            to: self.to.clone(),
            unknown: self.unknown,
            result: self.result.to_owned(),
        }
    }
}

impl Serialize for Record<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_owned().serialize(s)
    }
}

/// A result's own fields, borrowed; the rarely set ones through `Deref` to a [`ProbeResult`]
/// whose id, outcome, detail, round trip and attempts are left empty (read them here).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResultView<'a> {
    pub id: Id<'a>,
    pub outcome: Outcome,
    pub rtt_micros: Option<u64>,
    pub detail: &'a str,
    pub attempts: Option<u32>,
    pub ok_attempts: Option<u32>,
    rest: &'a ProbeResult,
}

impl Deref for ResultView<'_> {
    type Target = ProbeResult;
    fn deref(&self) -> &ProbeResult {
        self.rest
    }
}

impl ResultView<'_> {
    /// Got through on some attempts but not all: a lossy path, not a blocked one.
    #[must_use]
    pub fn is_intermittent(&self) -> bool {
        matches!((self.attempts, self.ok_attempts), (Some(n), Some(k)) if k > 0 && k < n)
    }

    #[must_use]
    pub fn to_owned(&self) -> ProbeResult {
        ProbeResult {
            id: self.id.to_string(),
            outcome: self.outcome,
            rtt_micros: self.rtt_micros,
            detail: self.detail.to_string(),
            attempts: self.attempts,
            ok_attempts: self.ok_attempts,
            ..self.rest.clone()
        }
    }
}
