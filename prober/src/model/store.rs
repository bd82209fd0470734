//! A run's results held compactly: one 32-byte row per result, and every name, target, detail
//! and rarely set field stored once however many results share it (an agent's name, a target,
//! "tcp connect 10.0.0.2:10250: connected", an HTTP status). Read through [`Record`] views that
//! borrow from the store, so a 1,000-node matrix of millions of results is never held as
//! millions of owned structs.
//!
//! What an `ok` result carries only for its own sake is not kept: the source port it was sent from
//! and the sniffer's sightings of it exist to place a failure, and an answered probe has none.

use std::fmt;
use std::hash::{BuildHasher, Hash, RandomState};
use std::ops::Deref;

use hashbrown::HashTable;
use probe_proto::{Outcome, ProbeResult};
use serde::{Deserialize, Serialize};

use super::{AgentRef, PathClass, ResultRecord, Target, Unknown};

/// Each distinct value once; everything else refers to it by its index.
#[derive(Debug, Clone)]
pub(crate) struct Interner<T> {
    items: Vec<T>,
    table: HashTable<u32>,
    hasher: RandomState,
}

impl<T> Default for Interner<T> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            table: HashTable::new(),
            hasher: RandomState::new(),
        }
    }
}

impl<T: Hash + Eq> Interner<T> {
    /// The index of `v`, stored now if it is new.
    pub(crate) fn intern(&mut self, v: T) -> u32 {
        let hash = self.hasher.hash_one(&v);
        let items = &self.items;
        if let Some(&i) = self.table.find(hash, |&i| items[i as usize] == v) {
            return i;
        }
        self.insert(hash, v)
    }

    /// The index of the value equal to `key`, made by `make` only if it is new.
    pub(crate) fn intern_with<Q>(&mut self, key: &Q, make: impl FnOnce() -> T) -> u32
    where
        Q: Hash + Eq + ?Sized,
        T: std::borrow::Borrow<Q>,
    {
        let hash = self.hasher.hash_one(key);
        let items = &self.items;
        if let Some(&i) = self
            .table
            .find(hash, |&i| items[i as usize].borrow() == key)
        {
            return i;
        }
        self.insert(hash, make())
    }

    fn insert(&mut self, hash: u64, v: T) -> u32 {
        let i = u32::try_from(self.items.len()).expect("fewer than 2^32 distinct values");
        self.items.push(v);
        let (items, hasher) = (&self.items, &self.hasher);
        self.table
            .insert_unique(hash, i, |&j| hasher.hash_one(&items[j as usize]));
        i
    }

}

impl<T> Interner<T> {
    pub(crate) fn get(&self, i: u32) -> &T {
        &self.items[i as usize]
    }
}

/// One result: indices into the store's tables and the small fields inline.
#[derive(Debug, Clone, Copy)]
struct Row {
    from: u32,
    to: u32,
    /// The id, or with `prefixed` only what follows `{path}:{from}->` (the planner's ids).
    id: u32,
    detail: u32,
    /// The rarely set fields, as a `ProbeResult` with the fields above left empty.
    rest: u32,
    /// Microseconds plus one; 0 when absent.
    rtt: u32,
    /// Attempts and the ones that got through, plus one; 0 when absent.
    attempts: u16,
    ok_attempts: u16,
    outcome: Outcome,
    path: PathClass,
    unknown: Option<Unknown>,
    prefixed: bool,
}

/// A run's results, in plan order.
#[derive(Debug, Clone, Default)]
pub struct Results {
    agents: Interner<AgentRef>,
    targets: Interner<Target>,
    strings: Interner<Box<str>>,
    rests: Interner<ProbeResult>,
    rows: Vec<Row>,
}

fn plus_one<T: TryInto<u16>>(v: Option<T>) -> u16 {
    v.map_or(0, |v| v.try_into().unwrap_or(u16::MAX - 1).saturating_add(1))
}

fn minus_one(v: u16) -> Option<u32> {
    v.checked_sub(1).map(u32::from)
}

/// What follows `{path}:{from}->` in `id`, when it starts so.
fn id_tail<'a>(id: &'a str, path: PathClass, from: &AgentRef) -> Option<&'a str> {
    id.strip_prefix(path.as_str())?
        .strip_prefix(':')?
        .strip_prefix(from.node.as_str())?
        .strip_prefix('/')?
        .strip_prefix(from.agent.as_str())?
        .strip_prefix("->")
}

impl Results {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one result at the end.
    pub fn push(&mut self, r: ResultRecord) {
        let ResultRecord {
            path,
            from,
            to,
            unknown,
            result,
        } = r;
        let tail = id_tail(&result.id, path, &from);
        let prefixed = tail.is_some();
        let id = self
            .strings
            .intern_with(tail.unwrap_or(&result.id), || {
                tail.unwrap_or(&result.id).into()
            });
        let detail = self
            .strings
            .intern_with(result.detail.as_str(), || result.detail.as_str().into());
        let row = Row {
            from: self.agents.intern(from),
            to: self.targets.intern(to),
            id,
            detail,
            rtt: result.rtt_micros.map_or(0, |us| {
                u32::try_from(us).unwrap_or(u32::MAX - 1).saturating_add(1)
            }),
            attempts: plus_one(result.attempts),
            ok_attempts: plus_one(result.ok_attempts),
            outcome: result.outcome,
            path,
            unknown,
            prefixed,
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
        self.rows.push(Row { rest, ..row });
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
        self.view(&self.rows[i])
    }

    /// The result at `i` in plan order.
    #[must_use]
    pub fn get(&self, i: usize) -> Option<Record<'_>> {
        self.rows.get(i).map(|row| self.view(row))
    }

    #[must_use]
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            store: self,
            rows: self.rows.iter(),
        }
    }

    /// The results as owned records (tests, and small reports).
    #[must_use]
    pub fn to_vec(&self) -> Vec<ResultRecord> {
        self.iter().map(|r| r.to_owned()).collect()
    }

    fn view(&self, row: &Row) -> Record<'_> {
        let from = self.agents.get(row.from);
        let rest = self.rests.get(row.rest);
        Record {
            path: row.path,
            from,
            to: self.targets.get(row.to),
            unknown: row.unknown,
            result: ResultView {
                id: Id {
                    prefix: row.prefixed.then_some((row.path, from)),
                    tail: self.strings.get(row.id),
                },
                outcome: row.outcome,
                rtt_micros: row.rtt.checked_sub(1).map(u64::from),
                detail: self.strings.get(row.detail),
                attempts: minus_one(row.attempts),
                ok_attempts: minus_one(row.ok_attempts),
                rest,
            },
        }
    }
}

/// The results in plan order, as views.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    store: &'a Results,
    rows: std::slice::Iter<'a, Row>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = Record<'a>;
    fn next(&mut self) -> Option<Record<'a>> {
        self.rows.next().map(|row| self.store.view(row))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.rows.size_hint()
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.rows.next_back().map(|row| self.store.view(row))
    }
}

impl ExactSizeIterator for Iter<'_> {}

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
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Results, A::Error> {
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

/// A result's id, borrowed: the planner's `{path}:{from}->` prefix is not stored per result.
#[derive(Debug, Clone, Copy)]
pub struct Id<'a> {
    prefix: Option<(PathClass, &'a AgentRef)>,
    tail: &'a str,
}

impl<'a> Id<'a> {
    /// The id as text: borrowed when it was stored whole.
    #[must_use]
    pub fn text(&self) -> std::borrow::Cow<'a, str> {
        match self.prefix {
            Some(_) => self.to_string().into(),
            None => self.tail.into(),
        }
    }

    /// Whether this is the id `s`, without writing it out.
    #[must_use]
    pub fn is(&self, s: &str) -> bool {
        match self.prefix {
            Some((path, from)) => id_tail(s, path, from) == Some(self.tail),
            None => self.tail == s,
        }
    }
}

impl fmt::Display for Id<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((path, from)) = self.prefix {
            write!(f, "{path}:{from}->")?;
        }
        f.write_str(self.tail)
    }
}

impl PartialEq for Id<'_> {
    fn eq(&self, other: &Self) -> bool {
        match other.prefix {
            None => self.is(other.tail),
            Some(_) => self.is(&other.to_string()),
        }
    }
}

impl PartialEq<str> for Id<'_> {
    fn eq(&self, other: &str) -> bool {
        self.is(other)
    }
}

impl PartialEq<&str> for Id<'_> {
    fn eq(&self, other: &&str) -> bool {
        self.is(other)
    }
}

impl Serialize for Id<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}
