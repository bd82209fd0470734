//! The krew manifest (`plugins/probe.yaml`) keeps krew's rules, as krew's manifest guide and its
//! index validation state them (apiVersion, kind, a safe name equal to the file's, a `v` semver,
//! a one-line short description, platforms each with an os/arch selector, uri, a lowercase
//! 64-hex sha256, files with from and to, bin), and names what `scripts/release` builds: the
//! archives by name, their checksums, and a `kubectl-probe` inside that runs.

// A test: it reads fixtures and the clock freely (clippy.toml bans them in shipped code).
#![allow(clippy::disallowed_methods)]

mod common;

use common::{prober, root, text};

use std::fmt::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

const API_VERSION: &str = "krew.googlecontainertools.github.com/v1alpha2";
/// What plugins/probe.yaml says until scripts/release fills in a checksum.
const PLACEHOLDER: &str = "@sha256@";

/// One way to break a manifest.
type Break = fn(&mut Value);

fn load(path: &Path) -> Value {
    serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn is_semver_v(v: &str) -> bool {
    let Some(rest) = v.strip_prefix('v') else {
        return false;
    };
    let core = rest.split(['-', '+']).next().unwrap_or("");
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
}

/// Every way `m` (the manifest in file `file_name`) breaks krew's rules. `placeholder` allows the
/// template's `@sha256@` in place of a checksum.
fn krew_errors(file_name: &str, m: &Value, placeholder: bool) -> Vec<String> {
    let mut errors = Vec::new();
    let mut need = |ok: bool, what: &str| {
        if !ok {
            errors.push(what.to_string());
        }
    };
    need(m["apiVersion"] == API_VERSION, "apiVersion");
    need(m["kind"] == "Plugin", "kind");
    let name = m["metadata"]["name"].as_str().unwrap_or("");
    need(
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
        "metadata.name is a safe plugin name",
    );
    need(
        file_name == format!("{name}.yaml"),
        "metadata.name matches the file name",
    );
    let spec = &m["spec"];
    need(
        spec["version"].as_str().is_some_and(is_semver_v),
        "spec.version is a semantic version with a v",
    );
    need(
        spec["homepage"]
            .as_str()
            .is_some_and(|h| h.starts_with("https://")),
        "spec.homepage",
    );
    need(
        spec["shortDescription"]
            .as_str()
            .is_some_and(|d| !d.is_empty() && !d.contains(['\n', '\r'])),
        "spec.shortDescription is one non-empty line",
    );
    need(
        spec["description"]
            .as_str()
            .is_some_and(|d| !d.trim().is_empty()),
        "spec.description",
    );
    let platforms = spec["platforms"].as_array().cloned().unwrap_or_default();
    need(!platforms.is_empty(), "spec.platforms");
    for (i, p) in platforms.iter().enumerate() {
        errors.extend(
            platform_errors(p, placeholder)
                .into_iter()
                .map(|e| format!("platforms[{i}].{e}")),
        );
    }
    errors
}

/// How one platform entry breaks krew's rules (`validatePlatform`, `validateSelector`).
fn platform_errors(p: &Value, placeholder: bool) -> Vec<String> {
    let mut errors = Vec::new();
    let mut at = |ok: bool, what: &str| {
        if !ok {
            errors.push(what.to_string());
        }
    };
    at(
        p["uri"].as_str().is_some_and(|u| {
            u.starts_with("https://") && [".tar.gz", ".zip"].iter().any(|e| u.ends_with(e))
        }),
        "uri is an https .tar.gz or .zip",
    );
    let sha = p["sha256"].as_str().unwrap_or("");
    at(
        (sha.len() == 64
            && sha
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)))
            || (placeholder && sha == PLACEHOLDER),
        "sha256 is 64 lowercase hex digits",
    );
    at(
        p["bin"].as_str().is_some_and(|b| !b.is_empty()),
        "bin is set",
    );
    match &p["files"] {
        Value::Null => {}
        Value::Array(ops) => {
            at(!ops.is_empty(), "files is unset or non-empty");
            for op in ops {
                at(
                    op["from"].as_str().is_some_and(|s| !s.is_empty())
                        && op["to"].as_str().is_some_and(|s| !s.is_empty()),
                    "files[] has from and to",
                );
            }
        }
        _ => at(false, "files is a list"),
    }
    let sel = &p["selector"];
    let labels = sel["matchLabels"].as_object();
    let exprs = sel["matchExpressions"].as_array();
    at(
        labels.is_some_and(|l| !l.is_empty()) || exprs.is_some_and(|e| !e.is_empty()),
        "selector is not empty",
    );
    let keys: Vec<&str> = labels
        .into_iter()
        .flat_map(|l| l.keys().map(String::as_str))
        .chain(
            exprs
                .into_iter()
                .flatten()
                .filter_map(|e| e["key"].as_str()),
        )
        .collect();
    at(
        keys.iter().all(|k| *k == "os" || *k == "arch"),
        "selector uses only os and arch",
    );
    errors
}

fn checked_in() -> Value {
    load(&root().join("plugins/probe.yaml"))
}

fn platforms(m: &Value) -> Vec<Value> {
    m["spec"]["platforms"].as_array().unwrap().clone()
}

/// `kubectl-probe-vVERSION-OS-ARCH.tar.gz`: the name scripts/release gives an archive.
fn archive_name(p: &Value) -> String {
    let labels = &p["selector"]["matchLabels"];
    format!(
        "kubectl-probe-v{}-{}-{}.tar.gz",
        env!("CARGO_PKG_VERSION"),
        labels["os"].as_str().unwrap(),
        labels["arch"].as_str().unwrap()
    )
}

#[test]
fn the_checked_in_manifest_keeps_krews_rules_and_names_the_release_archives() {
    let m = checked_in();
    assert_eq!(krew_errors("probe.yaml", &m, true), Vec::<String>::new());
    assert_eq!(
        m["spec"]["version"],
        format!("v{}", env!("CARGO_PKG_VERSION")),
        "the manifest's version is the crate's"
    );
    for p in platforms(&m) {
        let uri = p["uri"].as_str().unwrap();
        assert!(
            uri.ends_with(&format!(
                "/v{}/{}",
                env!("CARGO_PKG_VERSION"),
                archive_name(&p)
            )),
            "{uri} is not the release archive scripts/release names for its platform"
        );
        assert_eq!(p["bin"], "kubectl-probe");
        assert_eq!(p["sha256"], PLACEHOLDER);
    }
}

#[test]
fn the_checker_refuses_what_krew_refuses() {
    let good = {
        let mut m = checked_in();
        for p in m["spec"]["platforms"].as_array_mut().unwrap() {
            p["sha256"] = json!("0".repeat(64));
        }
        m
    };
    assert_eq!(
        krew_errors("probe.yaml", &good, false),
        Vec::<String>::new()
    );
    let cases: [(&str, Break); 10] = [
        ("apiVersion", |m| {
            m["apiVersion"] = json!("krew/v1");
        }),
        ("kind", |m| {
            m["kind"] = json!("Plugins");
        }),
        ("metadata.name matches", |m| {
            m["metadata"]["name"] = json!("prober");
        }),
        ("spec.version", |m| {
            m["spec"]["version"] = json!("0.1.0");
        }),
        ("spec.shortDescription", |m| {
            m["spec"]["shortDescription"] = json!("two\nlines");
        }),
        ("sha256", |m| {
            m["spec"]["platforms"][0]["sha256"] = json!("0".repeat(63) + "A");
        }),
        ("bin", |m| {
            m["spec"]["platforms"][0]
                .as_object_mut()
                .unwrap()
                .remove("bin");
        }),
        ("files is unset or non-empty", |m| {
            m["spec"]["platforms"][0]["files"] = json!([]);
        }),
        ("selector uses only os and arch", |m| {
            m["spec"]["platforms"][0]["selector"]["matchLabels"]["distro"] = json!("debian");
        }),
        ("selector is not empty", |m| {
            m["spec"]["platforms"][0]["selector"] = json!({});
        }),
    ];
    for (rule, break_it) in cases {
        let mut m = good.clone();
        break_it(&mut m);
        let errors = krew_errors("probe.yaml", &m, false);
        assert!(
            errors.iter().any(|e| e.contains(rule)),
            "breaking {rule} was not caught: {errors:?}"
        );
    }
    assert!(
        !krew_errors("probe.yaml", &checked_in(), false).is_empty(),
        "the placeholder is no checksum"
    );
}

fn sha256_hex(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap();
    ring::digest::digest(&ring::digest::SHA256, &bytes)
        .as_ref()
        .iter()
        .fold(String::new(), |mut hex, b| {
            let _ = write!(hex, "{b:02x}");
            hex
        })
}

#[test]
fn scripts_release_builds_what_the_manifest_names() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("dist");
    // The binary this test build made: CI builds once.
    let bin_dir = Path::new(prober()).parent().unwrap();
    let out = Command::new(root().join("scripts/release"))
        .arg("--bin-dir")
        .arg(bin_dir)
        .env("OUT_DIR", &out_dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));

    let rendered = load(&out_dir.join("probe.yaml"));
    assert_eq!(
        krew_errors("probe.yaml", &rendered, false),
        Vec::<String>::new()
    );
    let host_arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    let built = platforms(&rendered);
    assert_eq!(built.len(), 1, "this machine's platform only: {built:?}");
    let template = platforms(&checked_in());
    for p in &built {
        // The rendered platform is the template's, checksum filled in.
        let mut unfilled = p.clone();
        unfilled["sha256"] = json!(PLACEHOLDER);
        assert!(
            template.contains(&unfilled),
            "{p} is not in plugins/probe.yaml"
        );
        assert_eq!(p["selector"]["matchLabels"]["arch"], host_arch);

        let uri = p["uri"].as_str().unwrap();
        let name = uri.rsplit('/').next().unwrap();
        assert_eq!(name, archive_name(p));
        let archive = out_dir.join(name);
        assert_eq!(p["sha256"], sha256_hex(&archive), "{name}");
        let line = std::fs::read_to_string(out_dir.join(format!("{name}.sha256"))).unwrap();
        assert_eq!(line, format!("{}  {name}\n", sha256_hex(&archive)));

        // Installed as krew would: unpack, copy each `files` entry, run `bin`.
        let unpacked = dir.path().join("unpacked");
        std::fs::create_dir_all(&unpacked).unwrap();
        let tar = Command::new("tar")
            .arg("-xzf")
            .arg(&archive)
            .arg("-C")
            .arg(&unpacked)
            .output()
            .unwrap();
        assert!(tar.status.success(), "{}", text(&tar));
        let installed = dir.path().join("installed");
        std::fs::create_dir_all(&installed).unwrap();
        for op in p["files"].as_array().unwrap() {
            let from = unpacked.join(op["from"].as_str().unwrap());
            assert!(from.is_file(), "{name} has no {}", from.display());
            assert_eq!(op["to"], ".");
            std::fs::copy(&from, installed.join(from.file_name().unwrap())).unwrap();
        }
        let bin = installed.join(p["bin"].as_str().unwrap());
        let mode = std::fs::metadata(&bin).unwrap().permissions().mode();
        assert!(mode & 0o111 != 0, "{} is not executable", bin.display());
        let ran = Command::new(&bin).arg("--version").output().unwrap();
        assert!(ran.status.success(), "{}", text(&ran));
        assert!(
            text(&ran).contains(env!("CARGO_PKG_VERSION")),
            "{}",
            text(&ran)
        );
        let help = Command::new(&bin).arg("--help").output().unwrap();
        assert!(text(&help).contains("matrix"), "{}", text(&help));
    }
}
