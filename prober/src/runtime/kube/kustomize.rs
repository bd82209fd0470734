//! The scheduled mode's objects (`prober manifests --scheduled`): exactly what `kubectl kustomize
//! deploy/scheduled` renders, without kubectl. The kustomizations and their files are compiled
//! in; this is the part of kustomize they use — resources (files and directories),
//! strategic-merge patches of maps, the legacy resource order, and its YAML style (sorted keys,
//! sequences flush with their key).

use std::cmp::Ordering;
use std::fmt::Write as _;

use serde_json::{Map, Value};

macro_rules! deploy_file {
    ($path:literal) => {
        (
            $path,
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/", $path)),
        )
    };
}

/// Every file the scheduled overlay reaches, by its path under `deploy/`.
const FILES: &[(&str, &str)] = &[
    deploy_file!("base/kustomization.yaml"),
    deploy_file!("base/agents.yaml"),
    deploy_file!("base/rbac.yaml"),
    deploy_file!("scheduled/kustomization.yaml"),
    deploy_file!("scheduled/rbac.yaml"),
    deploy_file!("scheduled/cronjob.yaml"),
    deploy_file!("scheduled/namespace-pod-security.yaml"),
];

/// kustomize's legacy order: these kinds first, in this order; then every other kind; then the
/// webhooks.
const ORDER_FIRST: [&str; 22] = [
    "Namespace",
    "ResourceQuota",
    "StorageClass",
    "CustomResourceDefinition",
    "ServiceAccount",
    "PodSecurityPolicy",
    "Role",
    "ClusterRole",
    "RoleBinding",
    "ClusterRoleBinding",
    "ConfigMap",
    "Secret",
    "Endpoints",
    "Service",
    "LimitRange",
    "PriorityClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Deployment",
    "StatefulSet",
    "CronJob",
    "PodDisruptionBudget",
];
const ORDER_LAST: [&str; 2] = [
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

fn file(path: &str) -> Result<&'static str, String> {
    FILES
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, text)| *text)
        .ok_or_else(|| {
            format!("deploy/{path} is not compiled into prober (runtime/kube/kustomize.rs)")
        })
}

/// `a/b/../c` -> `a/c`.
fn join(dir: &str, rel: &str) -> String {
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for p in rel.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    parts.join("/")
}

fn docs(path: &str) -> Result<Vec<Value>, String> {
    file(path)?
        .split("\n---")
        .map(|d| d.trim_start_matches("---"))
        .filter(|d| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        })
        .map(|d| serde_saphyr::from_str(d).map_err(|e| format!("deploy/{path}: {e}")))
        .collect()
}

/// Recursive map merge: a strategic-merge patch as far as maps go; anything else replaces.
fn merge(into: &mut Value, patch: &Value) {
    match (into, patch) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}

fn id(v: &Value) -> (&str, &str, &str) {
    let s = |p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or("");
    (s("/kind"), s("/metadata/namespace"), s("/metadata/name"))
}

/// The objects of the kustomization in `dir` (under `deploy/`).
fn build(dir: &str) -> Result<Vec<Value>, String> {
    let k = docs(&join(dir, "kustomization.yaml"))?
        .pop()
        .ok_or_else(|| format!("deploy/{dir}/kustomization.yaml is empty"))?;
    let list = |key: &str| -> Vec<Value> {
        k.get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    for r in list("resources") {
        let r = r.as_str().unwrap_or_default();
        let path = join(dir, r);
        if std::path::Path::new(r)
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"))
        {
            out.extend(docs(&path)?);
        } else {
            out.extend(build(&path)?);
        }
    }
    for p in list("patches") {
        let Some(rel) = p.get("path").and_then(Value::as_str) else {
            return Err(format!(
                "deploy/{dir}: only patches with a path are supported"
            ));
        };
        for patch in docs(&join(dir, rel))? {
            let want = id(&patch);
            let target = out
                .iter_mut()
                .find(|o| {
                    let have = id(o);
                    have.0 == want.0 && have.2 == want.2 && (want.1.is_empty() || have.1 == want.1)
                })
                .ok_or_else(|| format!("deploy/{dir}/{rel}: no {} {} to patch", want.0, want.2))?;
            merge(target, &patch);
        }
    }
    Ok(out)
}

fn rank(kind: &str) -> i64 {
    let len = |n: usize| i64::try_from(n).unwrap_or(0);
    if let Some(i) = ORDER_FIRST.iter().position(|k| *k == kind) {
        len(i) - len(ORDER_FIRST.len())
    } else if let Some(i) = ORDER_LAST.iter().position(|k| *k == kind) {
        len(i) + 1
    } else {
        0
    }
}

fn gvk(v: &Value) -> String {
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("");
    format!("{}|{}", s("apiVersion"), s("kind"))
}

fn order(a: &Value, b: &Value) -> Ordering {
    let (ka, na, ma) = id(a);
    let (kb, nb, mb) = id(b);
    rank(ka)
        .cmp(&rank(kb))
        .then_with(|| gvk(a).cmp(&gvk(b)))
        .then_with(|| na.cmp(nb))
        .then_with(|| ma.cmp(mb))
}

/// Whether a YAML reader would take the plain scalar `s` for something other than a string (as
/// kustomize's YAML library decides; it also keeps YAML 1.1's yes/no/on/off strings quoted).
fn resolves_to_non_string(s: &str) -> bool {
    const WORDS: [&str; 32] = [
        "", "~", "null", "Null", "NULL", "true", "True", "TRUE", "false", "False", "FALSE", "y",
        "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off",
        "OFF", ".inf", ".Inf", ".INF", ".nan", ".NaN",
    ];
    if WORDS.contains(&s) || matches!(s, "-.inf" | "+.inf" | "-.Inf" | "+.Inf" | ".NAN") {
        return true;
    }
    let digits = s.trim_start_matches(['+', '-']);
    let int = !digits.is_empty()
        && (digits.chars().all(|c| c.is_ascii_digit() || c == '_')
            || digits
                .strip_prefix("0x")
                .is_some_and(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()))
            || digits
                .strip_prefix("0o")
                .is_some_and(|o| !o.is_empty() && o.chars().all(|c| ('0'..='7').contains(&c)))
            || digits
                .strip_prefix("0b")
                .is_some_and(|b| !b.is_empty() && b.chars().all(|c| c == '0' || c == '1')));
    let float = digits.chars().any(|c| c.is_ascii_digit())
        && digits
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-' | '_'))
        && s.parse::<f64>().is_ok();
    int || float
}

/// Whether `s` may be written plain in block context.
fn plain_allowed(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    let followed_by_space = s.chars().nth(1).is_none_or(char::is_whitespace);
    if "#,[]{}&*!|>'\"%@`".contains(first)
        || (matches!(first, '-' | '?' | ':') && followed_by_space)
    {
        return false;
    }
    !(s.starts_with(char::is_whitespace)
        || s.ends_with(char::is_whitespace)
        || s.ends_with(':')
        || s.contains(": ")
        || s.contains(" #")
        || s.contains(['\n', '\t'])
        || s.starts_with("---")
        || s.starts_with("..."))
}

fn scalar(s: &str) -> String {
    if resolves_to_non_string(s) {
        serde_json::to_string(s).unwrap_or_default()
    } else if plain_allowed(s) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "''"))
    }
}

fn value_inline(v: &Value) -> Option<String> {
    match v {
        Value::Null => Some("null".into()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(scalar(s)),
        Value::Array(a) if a.is_empty() => Some("[]".into()),
        Value::Object(o) if o.is_empty() => Some("{}".into()),
        _ => None,
    }
}

fn emit_map(out: &mut String, m: &Map<String, Value>, indent: usize, first_inline: bool) {
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    for (i, k) in keys.into_iter().enumerate() {
        if !(i == 0 && first_inline) {
            out.push_str(&" ".repeat(indent));
        }
        let v = &m[k];
        let _ = write!(out, "{}:", scalar(k));
        if let Some(s) = value_inline(v) {
            let _ = writeln!(out, " {s}");
        } else {
            out.push('\n');
            match v {
                // Sequences sit flush with their key.
                Value::Array(a) => emit_seq(out, a, indent),
                Value::Object(o) => emit_map(out, o, indent + 2, false),
                _ => {}
            }
        }
    }
}

fn emit_seq(out: &mut String, a: &[Value], indent: usize) {
    for v in a {
        out.push_str(&" ".repeat(indent));
        out.push_str("- ");
        match (value_inline(v), v) {
            (Some(s), _) => {
                let _ = writeln!(out, "{s}");
            }
            (None, Value::Object(o)) => emit_map(out, o, indent + 2, true),
            (None, Value::Array(inner)) => {
                out.push('\n');
                emit_seq(out, inner, indent + 2);
            }
            (None, _) => {}
        }
    }
}

/// The rendered overlay, as `kubectl kustomize deploy/scheduled` prints it.
pub fn render() -> Result<String, String> {
    let mut objects = build("scheduled")?;
    objects.sort_by(order);
    let mut out = String::new();
    for (i, o) in objects.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        match o {
            Value::Object(m) => emit_map(&mut out, m, 0, false),
            other => return Err(format!("not an object: {other}")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_are_quoted_as_kustomize_quotes_them() {
        for (s, want) in [
            ("prober", "prober"),
            ("", "\"\""),
            ("1", "\"1\""),
            ("0.5", "\"0.5\""),
            ("true", "\"true\""),
            ("on", "\"on\""),
            ("*/15 * * * *", "'*/15 * * * *'"),
            ("--use-existing", "--use-existing"),
            ("0 2147483647", "0 2147483647"),
            ("a: b", "'a: b'"),
            ("it's", "it's"),
            ("- x", "'- x'"),
            ("512Mi", "512Mi"),
            (
                "ghcr.io/prober-dev/prober:0.1.0",
                "ghcr.io/prober-dev/prober:0.1.0",
            ),
        ] {
            assert_eq!(scalar(s), want, "{s:?}");
        }
    }

    #[test]
    fn the_overlay_renders_in_kustomize_order_with_the_pod_security_label() {
        let text = render().unwrap();
        let kinds: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("kind: "))
            .collect();
        assert_eq!(kinds.first(), Some(&"Namespace"));
        // Kinds kustomize's legacy order does not list come last, by group: the DaemonSets
        // (apps), then the agents' NetworkPolicy (networking.k8s.io).
        assert_eq!(
            kinds[kinds.len() - 3..],
            ["DaemonSet", "DaemonSet", "NetworkPolicy"]
        );
        let cron = kinds.iter().position(|k| *k == "CronJob").unwrap();
        assert!(kinds[..cron].iter().all(|k| *k != "DaemonSet"));
        assert!(text.contains("    pod-security.kubernetes.io/enforce: privileged\n"));
        assert!(text.contains("  concurrencyPolicy: Forbid\n"));
        assert!(text.contains("          - args:\n            - matrix\n"));
    }

    #[test]
    fn paths_resolve_like_kustomize() {
        assert_eq!(join("scheduled", "../base"), "base");
        assert_eq!(join("base", "./rbac.yaml"), "base/rbac.yaml");
    }
}
