//! The declared toolchain is honest: `scripts/check-msrv` (run by scripts/test) passes on the
//! repository, and fails when the workspace's `rust-version`, the Dockerfile's builder image or
//! the README's "Rust X+" is older than what a locked dependency declares.

// A test: it reads fixtures and the clock freely (clippy.toml bans them in shipped code).
#![allow(clippy::disallowed_methods)]

mod common;

use common::{root, text};

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn check_msrv(args: &[&Path]) -> Output {
    let mut cmd = Command::new(root().join("scripts/check-msrv"));
    for pair in args.chunks(2) {
        cmd.arg(pair[0]).arg(pair[1]);
    }
    cmd.output().unwrap()
}

fn version_key(v: &str) -> Vec<u64> {
    let mut parts: Vec<u64> = v.split('.').map(|p| p.parse().unwrap()).collect();
    parts.resize(3, 0);
    parts
}

/// `cargo metadata` of this workspace, as the script reads it.
fn metadata() -> Value {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--locked"])
        .args(["--filter-platform", "x86_64-unknown-linux-gnu"])
        .args(["--filter-platform", "aarch64-unknown-linux-gnu"])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The highest `rust-version` a locked dependency declares, and the dependencies declaring it.
fn newest_dependency(meta: &Value) -> (String, Vec<String>) {
    let members: Vec<&Value> = meta["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    let deps: Vec<(String, String)> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| !members.contains(&&p["id"]))
        .filter_map(|p| {
            Some((
                p["name"].as_str()?.to_string(),
                p["rust_version"].as_str()?.to_string(),
            ))
        })
        .collect();
    let newest = deps
        .iter()
        .map(|(_, v)| v.clone())
        .max_by_key(|v| version_key(v))
        .unwrap();
    let names = deps
        .into_iter()
        .filter(|(_, v)| version_key(v) == version_key(&newest))
        .map(|(n, _)| n)
        .collect();
    (newest, names)
}

#[test]
fn the_repository_declares_what_its_lockfile_needs() {
    let out = check_msrv(&[]);
    assert!(out.status.success(), "{}", text(&out));
    let (newest, _) = newest_dependency(&metadata());
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let declared = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .unwrap()
        .trim_matches('"');
    assert_eq!(
        version_key(declared),
        version_key(&newest),
        "the workspace's rust-version is the newest a dependency declares ({newest})"
    );
}

#[test]
fn a_declared_version_below_a_dependency_fails_naming_it() {
    let meta = metadata();
    let (newest, names) = newest_dependency(&meta);
    // One minor release below what the newest dependency needs, said everywhere alike, so the
    // dependency is the only thing wrong.
    let key = version_key(&newest);
    let low = format!("{}.{}", key[0], key[1] - 1);
    let mut lowered = meta.clone();
    let members = meta["workspace_members"].as_array().unwrap().clone();
    for p in lowered["packages"].as_array_mut().unwrap() {
        if members.contains(&p["id"]) {
            p["rust_version"] = Value::String(low.clone());
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let meta_file = dir.path().join("metadata.json");
    std::fs::write(&meta_file, serde_json::to_vec(&lowered).unwrap()).unwrap();
    let dockerfile = dir.path().join("Dockerfile");
    std::fs::write(
        &dockerfile,
        format!("FROM --platform=$BUILDPLATFORM rust:{low}-bookworm AS build\n"),
    )
    .unwrap();
    let readme = dir.path().join("README.md");
    std::fs::write(
        &readme,
        format!("Debian 12 or similar, Rust {low}+, as root\n"),
    )
    .unwrap();
    let flags = |m: &Path, d: &Path, r: &Path| {
        check_msrv(&[
            Path::new("--metadata"),
            m,
            Path::new("--dockerfile"),
            d,
            Path::new("--readme"),
            r,
        ])
    };

    let out = flags(&meta_file, &dockerfile, &readme);
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains(&format!("declares rust-version {low}")),
        "{said}"
    );
    for name in &names {
        assert!(
            said.contains(&format!("{name} ")),
            "{name} is not named: {said}"
        );
    }

    // The same declaration passes once it is the newest (the script itself is not always red).
    let fine = dir.path().join("fine.json");
    let mut raised = lowered;
    for p in raised["packages"].as_array_mut().unwrap() {
        if members.contains(&p["id"]) {
            p["rust_version"] = Value::String(newest.clone());
        }
    }
    std::fs::write(&fine, serde_json::to_vec(&raised).unwrap()).unwrap();
    std::fs::write(
        &dockerfile,
        format!("FROM --platform=$BUILDPLATFORM rust:{newest}-bookworm AS build\n"),
    )
    .unwrap();
    std::fs::write(&readme, format!("Rust {newest}+\n")).unwrap();
    let out = flags(&fine, &dockerfile, &readme);
    assert!(out.status.success(), "{}", text(&out));

    // A builder image older than the declaration fails, naming the file.
    std::fs::write(
        &dockerfile,
        format!("FROM --platform=$BUILDPLATFORM rust:{low}-bookworm AS build\n"),
    )
    .unwrap();
    let out = flags(&fine, &dockerfile, &readme);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("builder image rust:{low}")),
        "{}",
        text(&out)
    );
}
