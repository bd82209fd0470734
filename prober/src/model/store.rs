//! A run's results held compactly: per result a 16-byte row and the plan's 16-byte key, and every
//! name, target, detail and rarely set field stored once however many results share it (an
//! agent's name, a target, "tcp connect 10.0.0.2:10250: connected", an HTTP status). Read through
//! [`Record`] views that borrow from the store, so a 1,000-node matrix of millions of results is
//! never held as millions of owned structs.
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

impl<T: Hash + Eq> Interner<T> {
    /// The index of the value equal to `key`, if there is one.
    pub(crate) fn find<Q>(&self, key: &Q) -> Option<u32>
    where
        Q: Hash + Eq + ?Sized,
        T: std::borrow::Borrow<Q>,
    {
        let hash = self.hasher.hash_one(key);
        self.table
            .find(hash, |&i| self.items[i as usize].borrow() == key)
            .copied()
    }
}

impl<T> Interner<T> {
    pub(crate) fn get(&self, i: u32) -> &T {
        &self.items[i as usize]
    }

    /// How many distinct values it holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }
}

/// The names a run's plan and results share, each stored once: agents, targets, and strings (ids
/// and details).
#[derive(Debug, Clone, Default)]
pub struct Names {
    agents: Interner<AgentRef>,
    targets: Interner<Target>,
    strings: Interner<Box<str>>,
}

/// Where one probe goes, by index into [`Names`]: what a plan row and a result row share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key {
    from: u32,
    to: u32,
    /// The id, or with `prefixed` only what follows `{path}:{from}->` (the planner's ids).
    id: u32,
    path: PathClass,
    prefixed: bool,
}

impl Key {
    pub(crate) fn path(&self) -> PathClass {
        self.path
    }

    /// The sending agent's interned index.
    pub(crate) fn sender(&self) -> u32 {
        self.from
    }
}

impl Names {
    /// The key of a probe from `from` to `to` with this id, its names stored now if new.
    pub(crate) fn key(&mut self, path: PathClass, from: AgentRef, to: Target, id: &str) -> Key {
        let tail = id_tail(id, path, &from);
        let text = tail.unwrap_or(id);
        Key {
            id: self.strings.intern_with(text, || text.into()),
            from: self.agents.intern(from),
            to: self.targets.intern(to),
            path,
            prefixed: tail.is_some(),
        }
    }

    /// The interned agents (the senders), each once, in name order.
    pub(crate) fn senders(&self) -> Vec<AgentRef> {
        let mut all = self.agents.items.clone();
        all.sort_unstable();
        all
    }

    /// Each agent's place in name order, by its interned index.
    pub(crate) fn agent_ranks(&self) -> Vec<u32> {
        let agents = &self.agents.items;
        let mut by_name: Vec<u32> = (0..u32::try_from(agents.len()).unwrap_or(u32::MAX)).collect();
        by_name.sort_unstable_by(|&a, &b| agents[a as usize].cmp(&agents[b as usize]));
        let mut rank = vec![0; agents.len()];
        for (r, &a) in (0u32..).zip(&by_name) {
            rank[a as usize] = r;
        }
        rank
    }

    pub(crate) fn from(&self, k: &Key) -> &AgentRef {
        self.agents.get(k.from)
    }

    pub(crate) fn to(&self, k: &Key) -> &Target {
        self.targets.get(k.to)
    }

    pub(crate) fn id(&self, k: &Key) -> Id<'_> {
        Id {
            prefix: k.prefixed.then(|| (k.path, self.agents.get(k.from))),
            tail: self.strings.get(k.id),
        }
    }

    /// A key's place in [`Names::lookup`] order: agent, path and id tail, or the whole id.
    pub(crate) fn order(k: &Key) -> (u32, u8, u32) {
        if k.prefixed {
            (k.from, k.path as u8, k.id)
        } else {
            (u32::MAX, 0, k.id)
        }
    }

    /// Where the id `id` falls in [`Names::order`], if its names are known at all (an answer's id
    /// found without writing out every planned id).
    pub(crate) fn lookup(&self, id: &str) -> Vec<(u32, u8, u32)> {
        let mut out = Vec::with_capacity(2);
        if let Some((path, rest)) = id.split_once(':')
            && let Some(path) = PathClass::parse(path)
        {
            // A node name from an inventory file may itself hold "->": every split is tried.
            for (at, _) in rest.match_indices("->") {
                let (from, tail) = (&rest[..at], &rest[at + 2..]);
                if let Some((node, agent)) = from.rsplit_once('/')
                    && let Some(agent) = super::AgentKind::parse(agent)
                    && let Some(from) = self.agents.find(&AgentRef {
                        node: node.to_string(),
                        agent,
                    })
                    && let Some(tail) = self.strings.find(tail)
                {
                    out.push((from, path as u8, tail));
                }
            }
        }
        if let Some(whole) = self.strings.find(id) {
            out.push((u32::MAX, 0, whole));
        }
        out
    }
}

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
            path: key.path,
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
    /// The id's text in pieces, written out nowhere.
    pub fn parts(&self) -> impl Iterator<Item = &'a str> {
        let prefix = self.prefix.map(|(path, from)| {
            [
                path.as_str(),
                ":",
                from.node.as_str(),
                "/",
                from.agent.as_str(),
                "->",
            ]
        });
        prefix
            .into_iter()
            .flatten()
            .chain(std::iter::once(self.tail))
    }

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
            Some(_) => self
                .parts()
                .flat_map(str::bytes)
                .eq(other.parts().flat_map(str::bytes)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AgentKind, Protocol};
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
}
