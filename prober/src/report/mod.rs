//! The report (`prober.report/v1`, docs/design.md, "Contracts") and its renderings.

pub mod checklist;
pub mod diff;
#[cfg(test)]
mod fixture;
mod html;
mod junit;
pub mod prometheus;
pub mod remembered;
pub mod safe;
mod table;

use std::collections::BTreeMap;
use std::io::Write as _;

use serde::{Deserialize, Serialize};

use crate::diagnose::{Finding, Severity};
use crate::inventory::Inventory;
use crate::model::PathClass;
use crate::model::{AgentStatus, Record, Results};
use crate::run::RunOutput;

pub use html::render as html;
pub use junit::render as junit;
pub use table::{Style, render as table, wrap};

/// A value's name as the report writes it (`firewall-gap`, `error`): its serde string.
#[must_use]
pub fn kebab<T: serde::Serialize>(v: T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

pub const SCHEMA: &str = "prober.report/v1";

/// A saved report that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("not JSON: {0}")]
    Syntax(#[source] serde_json::Error),
    #[error("schema {0:?} is not {SCHEMA:?}")]
    Schema(String),
    #[error("no \"schema\" field: not a prober report (expected {SCHEMA:?})")]
    NoSchema,
    /// `field`: where serde was (`results[0].to.port`), so that the message names it.
    #[error("not a valid {SCHEMA} report: {}{source}", if field.is_empty() || field == "." { String::new() } else { format!("{field}: ") })]
    Shape {
        field: String,
        #[source]
        source: serde_json::Error,
    },
}

/// Exit codes (docs/design.md, "Contracts").
pub const EXIT_OK: u8 = 0;
pub const EXIT_FAILURES: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_PARTIAL: u8 = 3;
/// Stopped by SIGINT or SIGTERM: the report holds what was gathered (128 + SIGINT).
pub const EXIT_INTERRUPTED: u8 = 130;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub schema: String,
    pub results: Results,
    /// The diagnosis: firewall gaps first, then bootstrap cycles, then the rest.
    #[serde(default)]
    pub findings: Vec<Finding>,
    #[serde(default)]
    pub agents: Vec<AgentStatus>,
    pub summary: Summary,
    /// Set on a `prober preflight` report: the machine about to join, and as what.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preflight: Option<Preflight>,
    /// Set on a `--sample` run: which node pairs were probed. Findings between nodes speak only
    /// for those pairs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<crate::plan::sample::Sampled>,
}

/// What a `prober preflight` report is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Preflight {
    pub candidate: String,
    /// `worker` or `control-plane`.
    pub role: String,
}

/// Latency of the successful probes of one class, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Latency {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub max: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    pub total: usize,
    pub ok: usize,
    pub failed: usize,
    /// Probes whose agent could not run, or that were interrupted: not known to fail.
    pub unknown: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PathSummary {
    #[serde(flatten)]
    pub counts: Counts,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_micros: Option<Latency>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    #[serde(flatten)]
    pub counts: Counts,
    pub nodes: usize,
    pub agents: usize,
    pub agents_missing: usize,
    pub duration_millis: u64,
    pub interrupted: bool,
    pub by_path: BTreeMap<PathClass, PathSummary>,
    pub exit_code: u8,
}

/// Counts and latencies of one path class (or of all), gathered one result at a time.
struct Tally {
    counts: Counts,
    latency: Option<hdrhistogram::Histogram<u64>>,
}

impl Tally {
    fn new() -> Self {
        Self {
            counts: Counts::default(),
            latency: hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000, 3).ok(),
        }
    }

    fn add(&mut self, r: &Record<'_>) {
        self.counts.total += 1;
        if r.is_unknown() {
            self.counts.unknown += 1;
        } else if r.result.outcome.is_ok() {
            self.counts.ok += 1;
            if let (Some(h), Some(us)) = (self.latency.as_mut(), r.result.rtt_micros) {
                let _ = h.record(us.max(1));
            }
        } else {
            self.counts.failed += 1;
        }
    }

    fn latency(&self) -> Option<Latency> {
        let h = self.latency.as_ref().filter(|h| !h.is_empty())?;
        Some(Latency {
            p50: h.value_at_quantile(0.5),
            p90: h.value_at_quantile(0.9),
            p99: h.value_at_quantile(0.99),
            max: h.max(),
        })
    }
}

/// How many failed results count as failures for the exit code: all but those that findings
/// explain and every one of those findings is a warning (a refused optional port whose servers are
/// unknown, an intermittent loss). A failure no finding explains, or one an error explains, counts.
/// A run's exit code from what it found: interrupted, failures (or an error finding), partial
/// (agents missing, results unknown), or none of these.
fn exit_code(interrupted: bool, results: &Results, findings: &[Finding], partial: bool) -> u8 {
    if interrupted {
        EXIT_INTERRUPTED
    } else if failing(results, findings) > 0
        || findings.iter().any(|f| f.severity == Severity::Error)
    {
        EXIT_FAILURES
    } else if partial {
        EXIT_PARTIAL
    } else {
        EXIT_OK
    }
}

fn failing(results: &Results, findings: &[Finding]) -> usize {
    use std::collections::BTreeMap;
    // Per cited result id: whether some finding citing it is an error.
    let mut cited: BTreeMap<&str, bool> = BTreeMap::new();
    for f in findings {
        for id in f.evidence.iter().chain(&f.consequences) {
            *cited.entry(id.as_str()).or_default() |= f.severity == Severity::Error;
        }
    }
    results
        .iter()
        .filter(crate::model::Record::is_failed)
        .filter(|r| cited.get(r.result.id.to_string().as_str()) != Some(&false))
        .count()
}

impl Report {
    /// How many findings are errors (the rest are warnings).
    #[must_use]
    pub fn error_findings(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .count()
    }

    /// Builds the report of a run, with its diagnosis.
    #[must_use]
    pub fn new(run: RunOutput, inv: &Inventory) -> Self {
        Self::new_sampled(run, inv, None)
    }

    /// [`Report::new`] for a run that probed only `sample` of the node pairs (`--sample`): says
    /// what was sampled, and the findings between nodes speak only for the pairs probed.
    #[must_use]
    pub fn new_sampled(
        run: RunOutput,
        inv: &Inventory,
        sample: Option<crate::plan::sample::Sampled>,
    ) -> Self {
        let nodes = inv.nodes.len();
        let findings =
            crate::diagnose::diagnose_sampled(inv, &run.results, &run.agents, sample.as_ref());
        let mut all = Tally::new();
        let mut tallies: BTreeMap<PathClass, Tally> = BTreeMap::new();
        for r in &run.results {
            all.add(&r);
            tallies.entry(r.path).or_insert_with(Tally::new).add(&r);
        }
        let by_path = tallies
            .into_iter()
            .map(|(p, t)| {
                let summary = PathSummary {
                    counts: t.counts.clone(),
                    latency_micros: t.latency(),
                };
                (p, summary)
            })
            .collect();
        let counts = all.counts;
        let agents_missing = run.agents.iter().filter(|a| !a.ran).count();
        let exit_code = exit_code(
            run.interrupted,
            &run.results,
            &findings,
            agents_missing > 0 || counts.unknown > 0,
        );
        let summary = Summary {
            counts,
            nodes,
            agents: run.agents.len(),
            agents_missing,
            duration_millis: u64::try_from(run.elapsed.as_millis()).unwrap_or(u64::MAX),
            interrupted: run.interrupted,
            by_path,
            exit_code,
        };
        Self {
            schema: SCHEMA.into(),
            results: run.results,
            findings,
            agents: run.agents,
            summary,
            preflight: None,
            sample,
        }
    }

    /// Reads a saved JSON report, refusing other schemas.
    /// Marks a finished run as interrupted (a signal while its agents were being removed): its
    /// results stand, and its exit code says it was cut short.
    pub fn mark_interrupted(&mut self) {
        self.summary.interrupted = true;
        self.summary.exit_code = EXIT_INTERRUPTED;
    }

    pub fn from_json(text: &str) -> Result<Self, ReportError> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(ReportError::Syntax)?;
        match v.get("schema").and_then(|s| s.as_str()) {
            Some(SCHEMA) => {}
            Some(other) => return Err(ReportError::Schema(other.to_string())),
            None => return Err(ReportError::NoSchema),
        }
        let mut report: Report = serde_path_to_error::deserialize(v).map_err(|e| {
            let field = e.path().to_string();
            ReportError::Shape {
                field,
                source: e.into_inner(),
            }
        })?;
        // Reports written before results carried `unknown` said so in the detail.
        let legacy = |r: &crate::model::Record<'_>| {
            r.unknown.is_none() && r.result.detail.starts_with("unknown:")
        };
        if report.results.iter().any(|r| legacy(&r)) {
            report.results = report
                .results
                .iter()
                .map(|r| {
                    let mut owned = r.to_owned();
                    if legacy(&r) {
                        owned.unknown = Some(crate::model::Unknown::AgentFailed);
                    }
                    owned
                })
                .collect();
        }
        // The file's `exitCode` is only its word (255 from a hand-edited file, 0 beside error
        // findings): the code is the content's, as the run would have computed it.
        let partial =
            report.agents.iter().any(|a| !a.ran) || report.results.iter().any(|r| r.is_unknown());
        report.summary.exit_code = exit_code(
            report.summary.interrupted,
            &report.results,
            &report.findings,
            partial,
        );
        Ok(report)
    }

    /// Writes the JSON report (the bytes of [`Report::to_json`] and a newline) to `out` as it is
    /// serialised: a report of millions of results is never held as one string.
    pub fn write_json<W: std::io::Write>(&self, out: W) -> std::io::Result<()> {
        let mut out = std::io::BufWriter::with_capacity(256 * 1024, out);
        serde_json::to_writer_pretty(&mut out, self)?;
        out.write_all(b"\n")?;
        out.flush()
    }

    /// Writes the JSON report to the file at `path`, streamed.
    pub fn save_json(&self, path: &std::path::Path) -> std::io::Result<()> {
        self.write_json(std::fs::File::create(path)?)
    }

    #[must_use]
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

#[cfg(test)]
mod tests {
    use super::{Severity, failing, fixture};

    #[test]
    fn a_value_out_of_range_names_its_field() {
        let text = r#"{"schema":"prober.report/v1","results":[{"id":"a","path":"pod-to-pod","from":{"node":"n1","agent":"pod"},"to":{"address":"10.0.0.1","port":70000,"protocol":"tcp"},"outcome":"ok","detail":""}],"findings":[],"agents":[],"summary":{"total":1,"ok":1,"failed":0,"unknown":0,"nodes":1,"agents":1,"agentsMissing":0,"durationMillis":1,"interrupted":false,"byPath":{},"exitCode":0}}"#;
        let e = super::Report::from_json(text).unwrap_err().to_string();
        assert!(
            e.contains("results[0].to.port: invalid value: integer `70000`, expected u16"),
            "{e}"
        );
    }

    #[test]
    fn a_saved_reports_exit_code_is_its_content_not_its_word() {
        let healthy = r#"{"schema":"prober.report/v1","results":[{"id":"a","path":"pod-to-pod","from":{"node":"n1","agent":"pod"},"to":{"address":"10.0.0.1","port":9917,"protocol":"tcp"},"outcome":"ok","detail":""}],"findings":[],"agents":[],"summary":{"total":1,"ok":1,"failed":0,"unknown":0,"nodes":1,"agents":1,"agentsMissing":0,"durationMillis":1,"interrupted":false,"byPath":{},"exitCode":255}}"#;
        let r = super::Report::from_json(healthy).unwrap();
        assert_eq!(r.summary.exit_code, super::EXIT_OK);
        // An error finding says 0: it is 1.
        let mut report = fixture::flannel_gap_report();
        report.summary.exit_code = 0;
        let back = super::Report::from_json(&report.to_json()).unwrap();
        assert_eq!(back.summary.exit_code, super::EXIT_FAILURES);
        // An interrupted run stays interrupted.
        report.summary.interrupted = true;
        let back = super::Report::from_json(&report.to_json()).unwrap();
        assert_eq!(back.summary.exit_code, super::EXIT_INTERRUPTED);
    }

    #[test]
    fn failures_explained_by_warnings_alone_do_not_count() {
        let mut report = fixture::flannel_gap_report();
        let failed: Vec<String> = report
            .results
            .iter()
            .filter(crate::model::Record::is_failed)
            .map(|r| r.result.id.to_string())
            .collect();
        assert!(failed.len() > 2, "{}", failed.len());
        // The fixture's gap cites nothing: every failure counts.
        assert_eq!(failing(&report.results, &report.findings), failed.len());
        let mut f = report.findings[0].clone();
        f.evidence = failed[..1].to_vec();
        f.consequences = failed[1..].to_vec();
        f.severity = Severity::Error;
        report.findings = vec![f.clone()];
        assert_eq!(failing(&report.results, &report.findings), failed.len());
        f.severity = Severity::Warning;
        report.findings = vec![f.clone()];
        assert_eq!(failing(&report.results, &report.findings), 0);
        // A warning over part of them leaves the rest counting; an error anywhere makes one count.
        let mut part = f.clone();
        part.consequences.pop();
        let mut err = f.clone();
        err.severity = Severity::Error;
        err.evidence = Vec::new();
        err.consequences = failed[..1].to_vec();
        assert_eq!(failing(&report.results, &[part.clone()]), 1);
        assert_eq!(failing(&report.results, &[part, err]), 2);
    }
}
