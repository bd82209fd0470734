//! Label and field selectors as the API server reads them: `a=b`, `a==b`, `a!=b`, `a`, `!a`,
//! `a in (x,y)`, `a notin (x,y)` for labels (apimachinery `pkg/labels/selector.go`), and
//! `path=value`/`path!=value` over the object's fields (`pkg/fields/selector.go`).

use serde_json::Value;

/// A selector that could not be parsed: the API server answers 400.
#[derive(Debug, thiserror::Error)]
#[error("unable to parse requirement: {0:?}")]
pub struct BadSelector(pub String);

#[derive(Debug, Clone)]
enum Req {
    Eq(String, String),
    Ne(String, String),
    Exists(String),
    Absent(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// A parsed label selector.
#[derive(Debug, Clone, Default)]
pub struct Labels(Vec<Req>);

/// Splits on commas outside parentheses.
fn terms(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut depth) = (Vec::new(), String::new(), 0);
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    out.into_iter()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect()
}

fn set(v: &str) -> Result<Vec<String>, BadSelector> {
    let inner = v
        .trim()
        .strip_prefix('(')
        .and_then(|v| v.strip_suffix(')'))
        .ok_or_else(|| BadSelector(v.to_string()))?;
    Ok(inner.split(',').map(|s| s.trim().to_string()).collect())
}

impl Labels {
    pub fn parse(s: &str) -> Result<Self, BadSelector> {
        let mut reqs = Vec::new();
        for t in terms(s) {
            let req = if let Some((k, v)) = t.split_once("!=") {
                Req::Ne(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = t.split_once("==") {
                Req::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = t.split_once('=') {
                Req::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = t.split_once(" notin ") {
                Req::NotIn(k.trim().into(), set(v)?)
            } else if let Some((k, v)) = t.split_once(" in ") {
                Req::In(k.trim().into(), set(v)?)
            } else if let Some(k) = t.strip_prefix('!') {
                Req::Absent(k.trim().into())
            } else if t.contains(' ') {
                return Err(BadSelector(t));
            } else {
                Req::Exists(t)
            };
            reqs.push(req);
        }
        Ok(Self(reqs))
    }

    /// Whether labels `l` (an object's `metadata.labels`, or a `matchLabels`) match.
    #[must_use]
    pub fn matches(&self, l: &Value) -> bool {
        let get = |k: &str| l.get(k).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Req::Eq(k, v) => get(k) == Some(v.as_str()),
            Req::Ne(k, v) => get(k) != Some(v.as_str()),
            Req::Exists(k) => get(k).is_some(),
            Req::Absent(k) => get(k).is_none(),
            Req::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Req::NotIn(k, vs) => get(k).is_none_or(|x| vs.iter().all(|v| v != x)),
        })
    }
}

/// A parsed field selector.
#[derive(Debug, Clone, Default)]
pub struct Fields(Vec<(String, bool, String)>);

impl Fields {
    pub fn parse(s: &str) -> Result<Self, BadSelector> {
        let mut out = Vec::new();
        for t in terms(s) {
            let (path, eq, value) = if let Some((k, v)) = t.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = t.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = t.split_once('=') {
                (k, true, v)
            } else {
                return Err(BadSelector(t));
            };
            out.push((path.trim().to_string(), eq, value.trim().to_string()));
        }
        Ok(Self(out))
    }

    #[must_use]
    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(path, eq, value)| {
            let mut v = object;
            for part in path.split('.') {
                v = &v[part];
            }
            let got = match v {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            (got == *value) == *eq
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_and_field_selectors_match_as_the_api_server_does() {
        let l = json!({"app": "prober", "tier": "agent"});
        for (s, want) in [
            ("app=prober", true),
            ("app==prober,tier=agent", true),
            ("app!=prober", false),
            ("tier", true),
            ("!run", true),
            ("!tier", false),
            ("tier in (agent, x)", true),
            ("tier notin (agent)", false),
        ] {
            assert_eq!(Labels::parse(s).unwrap().matches(&l), want, "{s}");
        }
        let e = json!({"involvedObject": {"kind": "DaemonSet"}, "reason": "FailedCreate"});
        let f = Fields::parse("involvedObject.kind=DaemonSet,reason=FailedCreate").unwrap();
        assert!(f.matches(&e));
        assert!(!Fields::parse("reason!=FailedCreate").unwrap().matches(&e));
        assert!(Fields::parse("nonsense").is_err());
    }
}
