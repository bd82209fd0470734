//! Golden files: a test's output compared field by field with a file kept in the repository, and
//! rewritten from the output under `PROBER_BLESS=1` (then reviewed in the diff like any change).

use std::path::Path;

use serde_json::Value;

/// The environment variable that rewrites golden files from what the tests produce.
pub const BLESS: &str = "PROBER_BLESS";

/// Compares `actual` (YAML or JSON text) with the golden file at `path`, field by field. Under
/// `PROBER_BLESS=1` it writes `actual` there instead. On a difference, the error names each
/// changed field by its path (`nodes[1].podCIDR`), with the value wanted and the value got.
///
/// # Errors
/// The fields that differ, or why the golden file could not be read or parsed.
pub fn check(path: &Path, actual: &str) -> Result<(), String> {
    if std::env::var_os(BLESS).is_some_and(|v| v == "1") {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        return std::fs::write(path, actual).map_err(|e| format!("{}: {e}", path.display()));
    }
    compare(path, actual)
}

/// Compares `actual` with the golden file at `path` as `check` does, never writing it.
///
/// # Errors
/// The fields that differ, or why the golden file could not be read or parsed.
pub fn compare(path: &Path, actual: &str) -> Result<(), String> {
    let want = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "{}: {e} (run the test with {BLESS}=1 to write it, then review it)",
            path.display()
        )
    })?;
    let parse = |what: &str, text: &str| {
        serde_saphyr::from_str::<Value>(text).map_err(|e| format!("{what} is not YAML: {e}"))
    };
    let changed = diff(
        &parse(&path.display().to_string(), &want)?,
        &parse("the output", actual)?,
    );
    if changed.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{} differs from the output in {} field(s) (if the change is meant, rerun with {BLESS}=1 \
         and review the diff):\n{}",
        path.display(),
        changed.len(),
        changed.join("\n")
    ))
}

/// Every field where `got` differs from `want`, as `path: want W, got G` (a field only one side
/// has shows `-` on the other), in document order.
#[must_use]
pub fn diff(want: &Value, got: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk("", want, got, &mut out);
    out
}

fn walk(at: &str, want: &Value, got: &Value, out: &mut Vec<String>) {
    let field = |k: &str| {
        if at.is_empty() {
            k.to_string()
        } else {
            format!("{at}.{k}")
        }
    };
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                walk(&field(k), wv, g.get(k).unwrap_or(&Value::Null), out);
            }
            for (k, gv) in g.iter().filter(|(k, _)| !w.contains_key(*k)) {
                walk(&field(k), &Value::Null, gv, out);
            }
        }
        (Value::Array(w), Value::Array(g)) => {
            for i in 0..w.len().max(g.len()) {
                walk(
                    &format!("{at}[{i}]"),
                    w.get(i).unwrap_or(&Value::Null),
                    g.get(i).unwrap_or(&Value::Null),
                    out,
                );
            }
        }
        (w, g) if w == g => {}
        (w, g) => {
            let show = |v: &Value| {
                if v.is_null() {
                    "-".to_string()
                } else {
                    v.to_string()
                }
            };
            let at = if at.is_empty() { "(the document)" } else { at };
            out.push(format!("{at}: want {}, got {}", show(w), show(g)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_changed_added_or_removed_field_is_named_by_its_path() {
        let want = json!({"cluster": {"cni": "flannel"}, "nodes": [{"name": "cp1", "podCIDR": "10.244.0.0/24"}, {"name": "w1"}]});
        let mut got = want.clone();
        assert!(diff(&want, &got).is_empty());
        got["nodes"][0]["podCIDR"] = json!("10.244.9.0/24");
        got["cluster"]["mtu"] = json!(1450);
        got["nodes"].as_array_mut().unwrap().pop();
        assert_eq!(
            diff(&want, &got),
            [
                "cluster.mtu: want -, got 1450",
                "nodes[0].podCIDR: want \"10.244.0.0/24\", got \"10.244.9.0/24\"",
                "nodes[1]: want {\"name\":\"w1\"}, got -",
            ]
        );
    }

    #[test]
    fn check_compares_with_the_file_and_says_how_to_bless() {
        let dir = std::env::temp_dir().join(format!("test-kit-golden-{}", std::process::id()));
        let path = dir.join("g.yaml");
        let err = check(&path, "a: 1\n").unwrap_err();
        assert!(err.contains("PROBER_BLESS=1"), "{err}");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(&path, "a: 1\nb: [p, q]\n").unwrap();
        assert_eq!(check(&path, "{\"b\": [\"p\", \"q\"], \"a\": 1}"), Ok(()));
        let err = check(&path, "a: 1\nb: [p, r]\n").unwrap_err();
        assert!(err.contains("b[1]: want \"q\", got \"r\""), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
