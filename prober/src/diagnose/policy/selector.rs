//! The Kubernetes `LabelSelector`: `matchLabels` and `matchExpressions` (`In`, `NotIn`,
//! `Exists`, `DoesNotExist`), all of which must hold; an empty selector selects everything.

use std::collections::BTreeMap;

use serde_json::Value;

/// The most requirements (`matchLabels` entries and `matchExpressions` together) one selector
/// may have to be evaluated, and the most values one expression may list. Each flow of a run is
/// matched against every requirement: a selector of thousands is a generator gone wrong or a
/// denial of service, and is a note rather than minutes of work.
pub(in crate::diagnose) const MAX_REQUIREMENTS: usize = 256;
pub(in crate::diagnose) const MAX_VALUES: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(in crate::diagnose) struct LabelSelector {
    labels: BTreeMap<String, String>,
    exprs: Vec<(String, Op)>,
}

impl LabelSelector {
    /// Parses a selector object; `null` is the empty selector. `Err` names what is not a
    /// selector (an unknown operator, a value that is not a string).
    pub(in crate::diagnose) fn parse(v: &Value, field: &str) -> Result<Self, String> {
        let mut s = Self::default();
        if v.is_null() {
            return Ok(s);
        }
        let obj = v
            .as_object()
            .ok_or_else(|| format!("{field}: not a label selector"))?;
        let len = |name: &str| match obj.get(name) {
            Some(Value::Object(m)) => m.len(),
            Some(Value::Array(a)) => a.len(),
            _ => 0,
        };
        let requirements = len("matchLabels") + len("matchExpressions");
        if requirements > MAX_REQUIREMENTS {
            return Err(format!(
                "{field}: {requirements} requirements, more than the {MAX_REQUIREMENTS} prober \
                 evaluates"
            ));
        }
        if let Some(ml) = obj.get("matchLabels").filter(|m| !m.is_null()) {
            let ml = ml
                .as_object()
                .ok_or_else(|| format!("{field}.matchLabels: not a map"))?;
            for (k, v) in ml {
                let v = v
                    .as_str()
                    .ok_or_else(|| format!("{field}.matchLabels.{k}: not a string"))?;
                s.labels.insert(k.clone(), v.to_string());
            }
        }
        for (i, e) in obj
            .get("matchExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let at = format!("{field}.matchExpressions[{i}]");
            let listed = e
                .get("values")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            if listed > MAX_VALUES {
                return Err(format!(
                    "{at}.values: {listed} values, more than the {MAX_VALUES} prober evaluates"
                ));
            }
            let key = e
                .get("key")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("{at}.key: missing"))?;
            let values: Vec<String> = e
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect();
            let op = match e.get("operator").and_then(Value::as_str) {
                Some("In") => Op::In(values),
                Some("NotIn") => Op::NotIn(values),
                Some("Exists") => Op::Exists,
                Some("DoesNotExist") => Op::DoesNotExist,
                other => {
                    return Err(format!("{at}.operator: {other:?} cannot be evaluated"));
                }
            };
            s.exprs.push((key.to_string(), op));
        }
        Ok(s)
    }

    /// Selects everything (no requirement at all).
    pub(in crate::diagnose) fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.exprs.is_empty()
    }

    /// The same selector with every key rewritten by `f` (Cilium's `k8s:` prefixes).
    pub(in crate::diagnose) fn map_keys(self, f: impl Fn(&str) -> String) -> Self {
        Self {
            labels: self.labels.into_iter().map(|(k, v)| (f(&k), v)).collect(),
            exprs: self.exprs.into_iter().map(|(k, op)| (f(&k), op)).collect(),
        }
    }

    /// Whether `labels` satisfy every requirement.
    pub(in crate::diagnose) fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            && self.exprs.iter().all(|(k, op)| match op {
                Op::In(vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
                Op::NotIn(vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
                Op::Exists => labels.contains_key(k),
                Op::DoesNotExist => !labels.contains_key(k),
            })
    }
}
