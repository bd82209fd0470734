//! What the scheduled mode remembers of a run for the next one: the findings (without the result
//! ids they cite) and the per-path summaries, gzip-compressed and bounded however large the
//! cluster, saying what had to be left out.

use std::collections::BTreeMap;
use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use serde::{Deserialize, Serialize};

use super::diff::{diff, key};
use super::{Counts, PathSummary, Report};
use crate::diagnose::{Finding, Severity};
use crate::model::PathClass;
use crate::runtime::kube::events::{self, EventError};
use crate::runtime::kube::memory::{self, MemoryError};

pub const SCHEMA: &str = "prober.remembered/v1";
/// The most compressed bytes kept: a quarter of the 1 MiB object limit, so base64 and the
/// `ConfigMap`'s own fields leave a wide margin.
pub const BUDGET: usize = 256 * 1024;
/// The most bytes of JSON a remembered report inflates to. The `ConfigMap`'s 1 MiB bounds only
/// the compressed bytes, and gzip inflates JSON a thousandfold (64 MiB of zeros is 65 KB), so
/// the bound is the encoder's: [`Remembered::encode`] never writes more, and
/// [`Remembered::decode`] reads no further. A real memory at the full [`BUDGET`] inflates about
/// five- to fifteenfold (1-4 MiB), well within it.
pub const MAX_INFLATED: usize = 8 * 1024 * 1024;
/// The most JSON values (each number, string, list and object, at any depth) a remembered
/// report holds, which bounds every collection decoded from it: an 8 MiB list of `""` would
/// otherwise be millions of `String`s. The encoder holds to it too; a memory at the full
/// [`BUDGET`] has under 100,000 (a node name each, mostly).
pub const MAX_VALUES: usize = 400_000;

/// A remembered run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Remembered {
    pub schema: String,
    /// When the run finished, seconds since the epoch.
    pub finished: u64,
    pub counts: Counts,
    pub nodes: usize,
    pub exit_code: u8,
    pub by_path: BTreeMap<PathClass, PathSummary>,
    /// The findings without `evidence`, `consequences` and `fix` (see `omitted`).
    pub findings: Vec<Finding>,
    /// What was left out to stay within the budget.
    pub omitted: Omitted,
    /// The kind-and-subject keys (`diff::key`) of the findings whose bodies were dropped to
    /// stay within the budget: the next run matches them and does not announce them as new.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<String>,
    /// What a `--sample` run probed, with its turn of the rotation: the next run takes the
    /// turn after it, so that successive runs cover every node pair. Absent in memories of
    /// unsampled runs and of runs before rotations existed (the next run starts at turn 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<Box<crate::plan::sample::Sampled>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Omitted {
    /// The results themselves, always (only their per-path summaries are kept).
    pub results: usize,
    /// Result ids the findings cited as evidence or consequences, always.
    pub result_ids: usize,
    /// Findings whose bodies were dropped because the rest already filled the budget:
    /// warnings go first, then the last errors. Their keys stay (`dropped`), so the next run
    /// does not see them as new.
    pub findings: usize,
    /// Of those, the ones whose key could not be kept either (thousands of findings beyond the
    /// budget): the next run sees these as new.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub keys: usize,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Which bound a remembered report went past.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// More compressed bytes than the memory's `ConfigMap` is ever written with.
    Compressed,
    /// More than [`MAX_INFLATED`] bytes of JSON.
    Inflated,
    /// More than [`MAX_VALUES`] values.
    Values,
}

impl std::fmt::Display for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Compressed => write!(f, "more than {} bytes compressed", memory::MAX_BYTES),
            Self::Inflated => write!(f, "more than {MAX_INFLATED} bytes of JSON"),
            Self::Values => write!(f, "more than {MAX_VALUES} values"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RememberedError {
    #[error("the remembered report is larger than any prober writes: {bound}")]
    TooLarge { bound: Bound },
    #[error("cannot compress the remembered report: {0}")]
    Compress(#[source] std::io::Error),
    #[error("the remembered report is not gzip: {0}")]
    Decompress(#[source] std::io::Error),
    #[error("the remembered report is not {SCHEMA} JSON: {0}")]
    Shape(#[source] serde_json::Error),
    #[error("the remembered report has schema {0:?}, not {SCHEMA:?}")]
    Schema(String),
}

fn gzip(json: &[u8]) -> Result<Vec<u8>, RememberedError> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::best());
    enc.write_all(json).map_err(RememberedError::Compress)?;
    enc.finish().map_err(RememberedError::Compress)
}

/// Gzip-compressed JSON of `r`, or the bound it goes past: what `decode` would refuse is never
/// written.
fn compressed(r: &Remembered) -> Result<Result<Vec<u8>, Bound>, RememberedError> {
    let json = serde_json::to_vec(r).map_err(RememberedError::Shape)?;
    if json.len() > MAX_INFLATED {
        return Ok(Err(Bound::Inflated));
    }
    match values(&json) {
        Ok(_) => gzip(&json).map(Ok),
        Err(Counted::TooMany) => Ok(Err(Bound::Values)),
        Err(Counted::Json(e)) => Err(RememberedError::Shape(e)),
    }
}

/// Whether `r` compresses within `budget` and every bound.
fn fits(r: &Remembered, budget: usize) -> Result<bool, RememberedError> {
    Ok(compressed(r)?.is_ok_and(|gz| gz.len() <= budget))
}

/// Why counting stopped.
enum Counted {
    TooMany,
    Json(serde_json::Error),
}

/// The number of JSON values in `json`, walked without building any of them (strings are
/// skipped in place, the depth is `serde_json`'s 128), stopping past [`MAX_VALUES`].
fn values(json: &[u8]) -> Result<usize, Counted> {
    use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

    #[derive(Clone, Copy)]
    struct Count<'a>(&'a std::cell::Cell<usize>);

    impl Count<'_> {
        fn tick<E: serde::de::Error>(self) -> Result<(), E> {
            let n = self.0.get() + 1;
            self.0.set(n);
            if n > MAX_VALUES {
                Err(E::custom("too many values"))
            } else {
                Ok(())
            }
        }
    }

    impl<'de> DeserializeSeed<'de> for Count<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Count<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
            self.tick()
        }
        fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
            self.tick()
        }
        fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
            self.tick()
        }
        fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
            self.tick()
        }
        fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<(), E> {
            self.tick()
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
            self.tick()
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            self.tick()?;
            while seq.next_element_seed(self)?.is_some() {}
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            self.tick()?;
            while map.next_key_seed(self)?.is_some() {
                map.next_value_seed(self)?;
            }
            Ok(())
        }
    }

    let n = std::cell::Cell::new(0);
    let mut de = serde_json::Deserializer::from_slice(json);
    let walked = Count(&n).deserialize(&mut de).and_then(|()| de.end());
    match walked {
        Ok(()) => Ok(n.get()),
        Err(_) if n.get() > MAX_VALUES => Err(Counted::TooMany),
        Err(e) => Err(Counted::Json(e)),
    }
}

impl Remembered {
    /// The remembered form of `report`, finished at `finished` (seconds since the epoch).
    #[must_use]
    pub fn of(report: &Report, finished: u64) -> Self {
        let mut result_ids = 0;
        let mut findings: Vec<Finding> = report
            .findings
            .iter()
            .map(|f| {
                result_ids += f.evidence.len() + f.consequences.len();
                Finding {
                    evidence: Vec::new(),
                    consequences: Vec::new(),
                    fix: Vec::new(),
                    notes: Vec::new(),
                    ..f.clone()
                }
            })
            .collect();
        // Errors first, so a budget cut drops warnings before any error.
        findings.sort_by_key(|f| f.severity != Severity::Error);
        Self {
            schema: SCHEMA.into(),
            finished,
            counts: report.summary.counts.clone(),
            nodes: report.summary.nodes,
            exit_code: report.summary.exit_code,
            by_path: report.summary.by_path.clone(),
            findings,
            omitted: Omitted {
                results: report.results.len(),
                result_ids,
                findings: 0,
                keys: 0,
            },
            dropped: Vec::new(),
            sample: report.sample.clone().map(Box::new),
        }
    }

    /// Gzip-compressed JSON of at most `budget` bytes, dropping the fewest finding bodies
    /// needed and keeping the keys of those dropped (as many as fit); the kept form is returned
    /// with it.
    pub fn encode(mut self, budget: usize) -> Result<(Vec<u8>, Self), RememberedError> {
        if let Ok(whole) = compressed(&self)?
            && whole.len() <= budget
        {
            return Ok((whole, self));
        }
        let all = std::mem::take(&mut self.findings);
        let keys: Vec<String> = all.iter().map(key).collect();
        // `n` findings whole and the keys of the next `k`.
        let form = |n: usize, k: usize, base: &Self| -> Self {
            let mut r = base.clone();
            r.findings = all[..n].to_vec();
            r.dropped = keys[n..n + k].to_vec();
            r.omitted.findings = all.len() - n;
            r.omitted.keys = all.len() - n - k;
            r
        };
        // The largest number that fits, by bisection: compressing is cheap next to a run, and
        // the budget holds thousands of findings.
        let largest = |hi: usize, fits: &dyn Fn(usize) -> Result<bool, RememberedError>| {
            let (mut lo, mut hi) = (0, hi);
            while lo < hi {
                let mid = lo + (hi - lo).div_ceil(2);
                if fits(mid)? {
                    lo = mid;
                } else {
                    hi = mid - 1;
                }
            }
            Ok::<usize, RememberedError>(lo)
        };
        // Whole findings, with the keys of all the others beside them.
        let n = largest(all.len(), &|n| fits(&form(n, all.len() - n, &self), budget))?;
        // When even the keys alone do not fit: as many keys as do.
        let k = if n == 0 {
            largest(all.len(), &|k| fits(&form(0, k, &self), budget))?
        } else {
            all.len() - n
        };
        let kept = form(n, k, &self);
        // Without findings it is a few kilobytes: the per-path summaries of a dozen classes.
        let gz = compressed(&kept)?.map_err(|bound| RememberedError::TooLarge { bound })?;
        Ok((gz, kept))
    }

    /// Reads what [`Remembered::encode`] wrote, refusing anything past the bounds it writes
    /// within before building anything from it: a memory is read before it is replaced, so one
    /// that cannot be decoded within the `CronJob`'s memory would fail every run after it.
    pub fn decode(gz: &[u8]) -> Result<Self, RememberedError> {
        /// The schema alone (every other field skipped in place): another schema is refused as
        /// such, not as a shape error of ours.
        #[derive(Deserialize)]
        struct Head {
            #[serde(default)]
            schema: Option<String>,
        }
        let too_large = |bound| RememberedError::TooLarge { bound };
        if gz.len() > memory::MAX_BYTES {
            return Err(too_large(Bound::Compressed));
        }
        let mut json = Vec::new();
        GzDecoder::new(gz)
            .take(MAX_INFLATED as u64 + 1)
            .read_to_end(&mut json)
            .map_err(RememberedError::Decompress)?;
        if json.len() > MAX_INFLATED {
            return Err(too_large(Bound::Inflated));
        }
        match values(&json) {
            Ok(_) => {}
            Err(Counted::TooMany) => return Err(too_large(Bound::Values)),
            Err(Counted::Json(e)) => return Err(RememberedError::Shape(e)),
        }
        let head: Head = serde_json::from_slice(&json).map_err(RememberedError::Shape)?;
        if head.schema.as_deref() != Some(SCHEMA) {
            // Quoted in a message: a few characters are enough to tell what it is.
            let schema: String = head.schema.unwrap_or_default().chars().take(64).collect();
            return Err(RememberedError::Schema(schema));
        }
        serde_json::from_slice(&json).map_err(RememberedError::Shape)
    }

    /// A few readable lines for the `ConfigMap`'s `data`.
    #[must_use]
    pub fn summary(&self) -> String {
        let errors = self
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .count();
        serde_json::to_string_pretty(&serde_json::json!({
            "schema": self.schema,
            "finished": crate::model::time::utc(self.finished),
            "nodes": self.nodes,
            "exitCode": self.exit_code,
            "probes": self.counts,
            "findings": {"error": errors, "warning": self.findings.len() - errors},
            "omitted": self.omitted,
        }))
        .unwrap_or_default()
    }
}

/// Why the scheduled mode could not remember a run or announce what changed.
#[derive(Debug, thiserror::Error)]
pub enum RememberError {
    #[error(transparent)]
    Memory(#[from] MemoryError),
    #[error(transparent)]
    Events(#[from] EventError),
    #[error(transparent)]
    Encode(#[from] RememberedError),
    /// Half a matrix would read as findings resolved: an interrupted run (Ctrl-C, or the Job's
    /// deadline) neither announces nor replaces the memory.
    #[error("the run was interrupted; it is not remembered and announces nothing")]
    Interrupted,
}

/// What a scheduled run found changed since the remembered one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Changes {
    /// Whether there was a remembered run to compare with.
    pub first_run: bool,
    pub new: usize,
    pub new_errors: usize,
    pub resolved: usize,
    pub persisting: usize,
    /// Events created.
    pub events: usize,
    /// Why the Events stopped, when they did (the memory was written all the same).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events_error: Option<String>,
    /// Findings the remembered form had to leave out (see [`Omitted`]).
    pub findings_omitted: usize,
    /// Compressed bytes kept in the `ConfigMap`.
    pub bytes: usize,
}

/// The remembered run in `namespace`, if any. One that cannot be read (another schema, damaged)
/// is an error the caller may report and then treat as none.
pub async fn recall(
    client: &kube::Client,
    namespace: &str,
) -> Result<Option<Remembered>, RememberError> {
    match memory::load(client, namespace).await? {
        None => Ok(None),
        Some(gz) => Ok(Some(Remembered::decode(&gz)?)),
    }
}

/// What changed since the `previous` run: [`diff`] against its findings, and a finding the
/// memory kept only as a key (its body dropped for the budget) persists rather than being new
/// again, so its Event is not repeated every run. (Those no longer found cannot be announced
/// as resolved: nothing says what they were.)
#[must_use]
pub fn against(previous: Option<&Remembered>, findings: &[Finding]) -> super::diff::Diff {
    let old: &[Finding] = previous.map_or(&[], |p| &p.findings);
    let mut d = diff(old, findings);
    let mut dropped: BTreeMap<&str, usize> = BTreeMap::new();
    for k in previous.iter().flat_map(|p| &p.dropped) {
        *dropped.entry(k.as_str()).or_default() += 1;
    }
    if !dropped.is_empty() {
        let (known, new): (Vec<Finding>, Vec<Finding>) =
            std::mem::take(&mut d.new).into_iter().partition(|f| {
                dropped.get_mut(key(f).as_str()).is_some_and(|n| {
                    *n > 0 && {
                        *n -= 1;
                        true
                    }
                })
            });
        d.new = new;
        d.persisting.extend(known.into_iter().map(Into::into));
    }
    d
}

/// Diffs `report` against the `previous` run, remembers `report` in place of `previous`, then
/// emits an Event per change (a first run announces everything it found). The memory goes
/// first: Events that fail (a warning, in `events_error`) must not leave the old memory in
/// place, or every later run would announce, and fail on, the same changes again.
pub async fn remember(
    client: &kube::Client,
    namespace: &str,
    previous: Option<&Remembered>,
    report: &Report,
    finished: u64,
) -> Result<Changes, RememberError> {
    if report.summary.interrupted {
        return Err(RememberError::Interrupted);
    }
    let d = against(previous, &report.findings);
    let (gz, kept) = Remembered::of(report, finished).encode(BUDGET)?;
    let bytes = gz.len();
    memory::store(client, namespace, gz, kept.summary()).await?;
    let (events, events_error) = match events::emit(client, namespace, &d.notices()).await {
        Ok(n) => (n, None),
        Err(e) => (e.created(), Some(e.to_string())),
    };
    Ok(Changes {
        first_run: previous.is_none(),
        new: d.new.len(),
        new_errors: d
            .new
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .count(),
        resolved: d.resolved.len(),
        persisting: d.persisting.len(),
        events,
        events_error,
        findings_omitted: kept.omitted.findings,
        bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::finding::NotListening;

    fn report(findings: usize) -> Report {
        let mut r: Report = serde_json::from_value(serde_json::json!({
            "schema": "prober.report/v1", "results": [], "findings": [], "agents": [],
            "summary": {"total": 0, "ok": 0, "failed": 0, "unknown": 0, "nodes": 3, "agents": 6,
                        "agentsMissing": 0, "durationMillis": 10, "interrupted": false,
                        "byPath": {"pod-to-pod": {"total": 6, "ok": 6, "failed": 0, "unknown": 0}},
                        "exitCode": 1}
        }))
        .unwrap();
        for i in 0..findings {
            let severity = if i % 2 == 0 {
                Severity::Warning
            } else {
                Severity::Error
            };
            // Node names that do not compress away, as a large cluster's would not.
            let nodes = (0..40)
                .map(|j| {
                    format!(
                        "node-{:016x}",
                        (i * 40 + j).wrapping_mul(0x9e37_79b9_7f4a_7c15)
                    )
                })
                .collect();
            // A cause of its own each: its port.
            let detail = NotListening {
                protocol: crate::model::Protocol::Tcp,
                port: u16::try_from(i).unwrap_or(u16::MAX),
                from: Vec::new(),
                to: Vec::new(),
                nodes,
            };
            let mut f = Finding::new(detail, severity, format!("finding {i}"));
            f.evidence = vec![format!("e{i}")];
            f.consequences = vec![format!("c{i}"), format!("d{i}")];
            f.fix = vec!["do this".into()];
            r.findings.push(f);
        }
        r
    }

    #[test]
    fn a_sampled_run_remembers_its_turn_and_an_older_memory_reads_without() {
        let mut r = report(1);
        r.sample = Some(crate::plan::sample::Sampled {
            peers: 40,
            pairs: 40_000,
            possible_pairs: 999_000,
            zones: vec!["a".into()],
            sampled_paths: crate::plan::sample::SAMPLED_PATHS.to_vec(),
            turn: 7,
            runs: 25,
        });
        let (gz, _) = Remembered::of(&r, 5).encode(BUDGET).unwrap();
        let back = Remembered::decode(&gz).unwrap();
        let s = back.sample.expect("the sample is remembered");
        assert_eq!((s.turn, s.runs, s.peers), (7, 25, 40));
        // A memory written before rotations existed has no sample: the next run starts at 0.
        let (gz, _) = Remembered::of(&report(1), 5).encode(BUDGET).unwrap();
        assert!(Remembered::decode(&gz).unwrap().sample.is_none());
        let old = serde_json::json!({"peers": 3, "pairs": 30, "possiblePairs": 90,
            "zones": ["a"], "sampledPaths": ["pod-to-pod"]});
        let old: crate::plan::sample::Sampled = serde_json::from_value(old).unwrap();
        assert_eq!((old.turn, old.runs), (0, 1));
    }

    #[test]
    fn round_trips_without_result_ids() {
        let rep = report(3);
        let (gz, kept) = Remembered::of(&rep, 1_700_000_000).encode(BUDGET).unwrap();
        let back = Remembered::decode(&gz).unwrap();
        assert_eq!(back, kept);
        assert_eq!(back.findings.len(), 3);
        assert!(
            back.findings
                .iter()
                .all(|f| f.evidence.is_empty() && f.fix.is_empty())
        );
        assert_eq!(back.omitted.result_ids, 9);
        assert_eq!(back.omitted.findings, 0);
        assert_eq!(back.findings[0].severity, Severity::Error, "errors first");
        assert_eq!(back.by_path[&PathClass::PodToPod].counts.ok, 6);
        assert!(back.summary().contains("\"omitted\""));
    }

    #[test]
    fn stays_within_the_budget_dropping_warnings_first() {
        let rep = report(400);
        let budget = 16 * 1024;
        let (gz, kept) = Remembered::of(&rep, 0).encode(budget).unwrap();
        assert!(gz.len() <= budget, "{} bytes", gz.len());
        assert!(kept.omitted.findings > 0 && !kept.findings.is_empty());
        assert_eq!(kept.findings.len() + kept.omitted.findings, 400);
        assert!(kept.findings.iter().all(|f| f.severity == Severity::Error));
        assert_eq!(Remembered::decode(&gz).unwrap(), kept);
        // The bodies dropped, their keys kept.
        assert_eq!(
            (kept.dropped.len(), kept.omitted.keys),
            (kept.omitted.findings, 0)
        );
    }

    #[test]
    fn findings_kept_only_as_keys_are_not_new_again() {
        let rep = report(400);
        let (_, kept) = Remembered::of(&rep, 0).encode(16 * 1024).unwrap();
        assert!(kept.omitted.findings > 100, "{}", kept.omitted.findings);
        // The same findings next run: nothing new, so no Event repeated.
        let d = against(Some(&kept), &rep.findings);
        assert_eq!((d.new.len(), d.persisting.len()), (0, 400));
        // One really new finding is still new.
        let mut next = rep.findings.clone();
        let dns = crate::diagnose::finding::Dns {
            state: crate::diagnose::finding::DnsState::NoAnswer,
            nodes: Vec::new(),
        };
        next.push(Finding::new(dns, Severity::Error, "new"));
        let d = against(Some(&kept), &next);
        assert_eq!(d.new.len(), 1);
        assert_eq!(d.new[0].summary, "new");
        // Without the keys (an older memory), the dropped ones came back as new.
        let mut old = kept.clone();
        old.dropped.clear();
        assert_eq!(
            against(Some(&old), &rep.findings).new.len(),
            kept.omitted.findings
        );
    }

    #[test]
    fn when_even_the_keys_do_not_fit_as_many_as_fit_are_kept() {
        let rep = report(400);
        let (gz, kept) = Remembered::of(&rep, 0).encode(2 * 1024).unwrap();
        assert!(gz.len() <= 2 * 1024, "{} bytes", gz.len());
        assert!(kept.findings.is_empty());
        assert!(!kept.dropped.is_empty() && kept.omitted.keys > 0);
        assert_eq!(kept.dropped.len() + kept.omitted.keys, 400);
    }

    #[test]
    fn refuses_what_is_not_ours() {
        assert!(matches!(
            Remembered::decode(b"not gzip"),
            Err(RememberedError::Decompress(_))
        ));
        let other = gzip(br#"{"schema": "prober.report/v1"}"#).unwrap();
        assert!(matches!(
            Remembered::decode(&other),
            Err(RememberedError::Schema(_))
        ));
    }

    /// `{"schema": ..., "dropped": [<item>, <item>, ...]}`, `n` items, otherwise valid.
    fn with_dropped(item: &str, n: usize) -> Vec<u8> {
        let (gz, _) = Remembered::of(&report(0), 0).encode(BUDGET).unwrap();
        let mut json = Vec::new();
        GzDecoder::new(&gz[..]).read_to_end(&mut json).unwrap();
        let head = String::from_utf8(json).unwrap();
        let head = head.strip_suffix('}').unwrap();
        let mut text = format!("{head},\"dropped\":[");
        text.reserve(n * (item.len() + 1));
        for i in 0..n {
            if i > 0 {
                text.push(',');
            }
            text.push_str(item);
        }
        text.push_str("]}");
        gzip(text.as_bytes()).unwrap()
    }

    #[test]
    fn a_memory_past_the_bounds_is_refused_before_it_is_built() {
        // 2.5 million empty keys: 7.5 MB of JSON, millions of Strings.
        let many = with_dropped("\"\"", 2_500_000);
        assert!(matches!(
            Remembered::decode(&many),
            Err(RememberedError::TooLarge {
                bound: Bound::Values
            })
        ));
        // One key of 9 MiB.
        let long = with_dropped(&format!("\"{}\"", "k".repeat(9 << 20)), 1);
        assert!(matches!(
            Remembered::decode(&long),
            Err(RememberedError::TooLarge {
                bound: Bound::Inflated
            })
        ));
        // Within the bounds, the same shape reads.
        assert_eq!(
            Remembered::decode(&with_dropped("\"k\"", 1000))
                .unwrap()
                .dropped
                .len(),
            1000
        );
    }

    #[test]
    fn the_encoder_never_writes_what_the_decoder_refuses() {
        // Findings that compress to nothing: the budget alone would keep 450,000 values.
        let mut rep = report(0);
        let nodes: Vec<String> = (0..40).map(|j| format!("node-{j}")).collect();
        for i in 0..10_000 {
            let detail = NotListening {
                protocol: crate::model::Protocol::Tcp,
                port: 10250,
                from: Vec::new(),
                to: Vec::new(),
                nodes: nodes.clone(),
            };
            rep.findings.push(Finding::new(
                detail,
                Severity::Error,
                format!("finding {}", i % 2),
            ));
        }
        let (gz, kept) = Remembered::of(&rep, 0).encode(BUDGET).unwrap();
        assert!(kept.omitted.findings > 0, "{:?}", kept.omitted);
        assert_eq!(kept.findings.len() + kept.omitted.findings, 10_000);
        assert_eq!(Remembered::decode(&gz).unwrap(), kept);
    }
}
