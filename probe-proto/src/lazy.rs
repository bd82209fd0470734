//! A plan read the way an agent needs it: validated whole before anything runs, then handed out one
//! probe at a time. Only the plan's text and one small span per probe stay in memory, never a
//! decoded copy of every probe: the plan's text and about 8 bytes of index per probe (more while
//! it is validated), plus what the concurrency keeps in flight.

use std::collections::HashSet;
use std::num::{NonZeroU32, NonZeroU64};

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::limits::{MAX_PLAN_BYTES, check_header, check_spec};
use crate::{PlanError, ProbeSpec, default_concurrency, default_probe_timeout, strip_position};

/// The plan's fields, with each probe left as raw JSON.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Header<'a> {
    deadline_ms: NonZeroU64,
    #[serde(default = "default_concurrency")]
    concurrency: NonZeroU32,
    #[serde(default = "default_probe_timeout")]
    probe_timeout_ms: NonZeroU64,
    #[serde(borrow)]
    probes: Vec<&'a RawValue>,
}

/// A validated plan whose probes are decoded only when asked for.
#[derive(Debug)]
pub struct LazyPlan {
    pub deadline_ms: NonZeroU64,
    pub concurrency: NonZeroU32,
    pub probe_timeout_ms: NonZeroU64,
    text: String,
    /// Byte range of each probe's JSON in `text` (`u32` is enough: plans are capped well below
    /// 4 GiB, and it halves the per-probe cost).
    spans: Vec<(u32, u32)>,
}

fn syntax(e: &serde_json::Error) -> PlanError {
    PlanError::Syntax {
        line: e.line(),
        column: e.column(),
        message: strip_position(&e.to_string()),
    }
}

/// Decodes the `i`-th probe from its raw JSON, naming the field on error.
fn decode(i: usize, raw: &str) -> Result<ProbeSpec, PlanError> {
    let de = &mut serde_json::Deserializer::from_str(raw);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let inner = e.path().to_string();
        let path = if inner.is_empty() || inner == "." {
            format!("probes[{i}]")
        } else {
            format!("probes[{i}].{inner}")
        };
        PlanError::Field {
            path,
            message: strip_position(&e.into_inner().to_string()),
        }
    })
}

/// Parses and validates a whole plan; the probes are decoded once to check them and then dropped.
pub fn parse_plan_lazy(text: String) -> Result<LazyPlan, PlanError> {
    if text.len() > MAX_PLAN_BYTES {
        return Err(PlanError::TooLarge {
            limit: MAX_PLAN_BYTES,
        });
    }
    let (deadline_ms, concurrency, probe_timeout_ms, spans) = {
        let de = &mut serde_json::Deserializer::from_str(&text);
        let header: Header<'_> = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if inner.is_syntax() || inner.is_eof() {
                syntax(&inner)
            } else {
                PlanError::Field {
                    path,
                    message: strip_position(&inner.to_string()),
                }
            }
        })?;
        check_header(
            header.deadline_ms.get(),
            header.concurrency.get(),
            header.probe_timeout_ms.get(),
        )?;
        if header.probes.is_empty() {
            return Err(PlanError::Empty);
        }
        let base = text.as_ptr() as usize;
        let mut ids = HashSet::with_capacity(header.probes.len());
        let mut spans = Vec::with_capacity(header.probes.len());
        for (i, raw) in header.probes.iter().enumerate() {
            let spec = decode(i, raw.get())?;
            check_spec(i, &spec)?;
            if !ids.insert(spec.id) {
                return Err(PlanError::Field {
                    path: format!("probes[{i}].id"),
                    message: "duplicate id".into(),
                });
            }
            // The raw value borrows from `text`: its offset is where it sits in the plan.
            let start = raw.get().as_ptr() as usize - base;
            let end = start + raw.get().len();
            let fit = |v: usize| {
                u32::try_from(v).map_err(|_| PlanError::TooLarge {
                    limit: MAX_PLAN_BYTES,
                })
            };
            spans.push((fit(start)?, fit(end)?));
        }
        (
            header.deadline_ms,
            header.concurrency,
            header.probe_timeout_ms,
            spans,
        )
    };
    Ok(LazyPlan {
        deadline_ms,
        concurrency,
        probe_timeout_ms,
        text,
        spans,
    })
}

impl LazyPlan {
    #[must_use]
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The probes in plan order, decoded one by one. They were all decoded once already, so an
    /// error here would be a bug; it is returned rather than hidden.
    #[must_use]
    pub fn probes(&self) -> impl ExactSizeIterator<Item = Result<ProbeSpec, PlanError>> + '_ {
        self.spans.iter().enumerate().map(|(i, &(start, end))| {
            let raw = self
                .text
                .get(start as usize..end as usize)
                .unwrap_or_default();
            decode(i, raw)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_come_back_in_order_and_equal_to_a_full_parse() {
        let text = r#"{"deadlineMs":1000,"probes":[
            {"id":"a","kind":"icmp","address":"10.0.0.1"},
            {"id":"b\"q","kind":"tcp","address":"10.0.0.2","port":80,"echo":true}]}"#;
        let lazy = parse_plan_lazy(text.to_string()).unwrap();
        assert_eq!(lazy.len(), 2);
        let got: Vec<ProbeSpec> = lazy.probes().map(Result::unwrap).collect();
        assert_eq!(got, crate::parse_plan(text).unwrap().probes);
        assert_eq!(got[1].id, "b\"q");
    }

    #[test]
    fn probes_before_the_header_are_fine() {
        let text = r#"{"probes":[{"id":"a","kind":"icmp","address":"10.0.0.1"}],"deadlineMs":7}"#;
        let lazy = parse_plan_lazy(text.to_string()).unwrap();
        assert_eq!(lazy.deadline_ms.get(), 7);
        assert_eq!(lazy.probes().count(), 1);
    }

    #[test]
    fn a_bad_probe_deep_in_the_plan_is_named_before_anything_runs() {
        let mut probes: Vec<String> = (0..500)
            .map(|i| format!(r#"{{"id":"p{i}","kind":"icmp","address":"10.0.0.1"}}"#))
            .collect();
        probes[400] = r#"{"id":"p400","kind":"icmp","address":"224.0.0.1"}"#.into();
        let text = format!(r#"{{"deadlineMs":1000,"probes":[{}]}}"#, probes.join(","));
        let err = parse_plan_lazy(text).unwrap_err().to_string();
        assert!(
            err.contains("probes[400].address") && err.contains("multicast"),
            "{err}"
        );
    }
}
