//! The image `scripts/image` builds, run as a cluster would run it: built from the binaries this
//! test build made (no second cargo build), unpacked with `umoci`, its layout checked against what
//! `deploy/` runs, and both agents of a lab started from the image's own root filesystem (chroot
//! inside each node's and pod's namespace) while lab scenarios pass. Needs root, the lab's tools
//! and buildah, skopeo, umoci (scripts/install-image-deps).

// A test: it reads fixtures and the clock freely (clippy.toml bans them in shipped code).
#![allow(clippy::disallowed_methods)]

mod common;

use common::{StateDir, prober, require_root, root, text, tool};

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const INSTALLER: &str = "scripts/install-image-deps";
/// The PATH the image's configuration sets (a runtime starts the agent with it).
const IMAGE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?} failed:\n{}", text(&out));
    out
}

/// Every document of a multi-document YAML file, as JSON values.
fn yaml_docs(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .split("\n---\n")
        .filter(|d| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.starts_with('#'))
        })
        .map(|d| serde_saphyr::from_str::<Value>(d).unwrap())
        .collect()
}

/// The containers of every workload in `deploy/`: (what, container).
fn deployed_containers() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for file in ["deploy/base/agents.yaml", "deploy/scheduled/cronjob.yaml"] {
        for doc in yaml_docs(&root().join(file)) {
            let pod = match doc["kind"].as_str() {
                Some("DaemonSet") => &doc["spec"]["template"]["spec"],
                Some("CronJob") => &doc["spec"]["jobTemplate"]["spec"]["template"]["spec"],
                _ => continue,
            };
            for c in pod["containers"].as_array().unwrap() {
                let mut c = c.clone();
                // A container's own runAsUser wins over the pod's.
                if c["securityContext"]["runAsUser"].is_null() {
                    c["securityContext"]["runAsUser"] = pod["securityContext"]["runAsUser"].clone();
                }
                out.push((format!("{file} {}", doc["metadata"]["name"]), c));
            }
        }
    }
    out
}

/// A file inside the unpacked root filesystem, by its path in the image.
fn in_image(rootfs: &Path, path: &str) -> PathBuf {
    rootfs.join(path.trim_start_matches('/'))
}

fn executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The container runtime's part of starting an agent from the image, as a script the lab uses as
/// its agent binary: a private mount namespace (`ip netns exec` already made one; this keeps the
/// mounts private even without it), the image's root read-only (the agents'
/// `readOnlyRootFilesystem`), the kernel's /proc, /sys (the node's network namespace's) and
/// /dev, the lab's host roots at the same path (a `DaemonSet` mounts the node's files under /host;
/// the lab's inventory names them by their path here), then the image's own binary in the image's
/// root. Nothing of the host's file system is used by the agent but those mounts.
fn chroot_agent(dir: &Path, rootfs: &Path, state: &Path) -> PathBuf {
    for d in ["proc", "sys", "dev"] {
        std::fs::create_dir_all(rootfs.join(d)).unwrap();
    }
    std::fs::create_dir_all(in_image(rootfs, state.to_str().unwrap())).unwrap();
    let script = dir.join("probe-pod-in-image");
    let r = rootfs.display();
    let s = state.display();
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n\
             set -e\n\
             if [ -z \"$PROBER_IMAGE_MOUNTS\" ]; then\n\
             \x20 exec env PROBER_IMAGE_MOUNTS=1 unshare --mount --propagation private \"$0\" \"$@\"\n\
             fi\n\
             mount --bind '{r}' '{r}'\n\
             mount -o remount,bind,ro '{r}'\n\
             mount --rbind /proc '{r}/proc'\n\
             mount --rbind /sys '{r}/sys'\n\
             mount --rbind /dev '{r}/dev'\n\
             mount --bind '{s}' '{r}{s}'\n\
             chroot=$(command -v chroot)\n\
             exec env -i PATH='{IMAGE_PATH}' \"$chroot\" '{r}' /usr/local/bin/probe-pod \"$@\"\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

/// Takes a kept lab down however the test ends.
struct KeptLab<'a> {
    name: &'a str,
    state: &'a StateDir,
}

impl Drop for KeptLab<'_> {
    fn drop(&mut self) {
        let _ = Command::new(prober())
            .args(["lab", "down", self.name, "--state-dir"])
            .arg(&self.state.0)
            .output();
    }
}

fn lab_run(state: &StateDir, agent: &Path, scenario: &str, name: &str, keep: bool) -> Output {
    let mut cmd = Command::new(prober());
    cmd.args(["lab", "run", "--scenario"])
        .arg(root().join("tests/scenarios").join(scenario))
        .args(["--name", name, "--agent-bin"])
        .arg(agent)
        .arg("--state-dir")
        .arg(&state.0);
    if keep {
        cmd.arg("--keep");
    }
    cmd.output().unwrap()
}

/// The processes in network namespace `ns`, by pid.
fn pids_in(ns: &str) -> Vec<u32> {
    let out = Command::new("ip")
        .args(["netns", "pids", ns])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Runs scripts/image on the binaries this test build made (CI builds once); its output dir.
fn build_image(work: &Path) -> PathBuf {
    let out_dir = work.join("out");
    let bin_dir = Path::new(prober()).parent().unwrap();
    let built = run(Command::new(root().join("scripts/image"))
        .arg("--bin-dir")
        .arg(bin_dir)
        .env("OUT_DIR", &out_dir));
    eprintln!("{}", text(&built).trim_end());
    assert!(out_dir.join("prober-oci.tar").is_file(), "{}", text(&built));
    out_dir
}

/// The SBOM beside the archive names the crates linked in, with Cargo.lock's versions, and
/// nothing that is not linked.
fn check_sbom(out_dir: &Path) {
    let sbom: Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir.join("prober-sbom.cdx.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(sbom["bomFormat"], "CycloneDX");
    let purls: Vec<&str> = sbom["components"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["purl"].as_str())
        .collect();
    let lock = std::fs::read_to_string(root().join("Cargo.lock")).unwrap();
    for krate in ["kube-client", "tokio", "rustls", "hickory-proto"] {
        let version = lock
            .split("[[package]]")
            .find(|p| p.contains(&format!("name = \"{krate}\"\n")))
            .and_then(|p| p.lines().find_map(|l| l.strip_prefix("version = ")))
            .unwrap()
            .trim_matches('"');
        let purl = format!("pkg:cargo/{krate}@{version}");
        assert!(
            purls.contains(&purl.as_str()),
            "{purl} missing from the SBOM"
        );
    }
    // A test-only crate and a proc-macro are not in the binaries.
    for absent in [
        "pkg:cargo/tower-test@",
        "pkg:cargo/tempfile@",
        "pkg:cargo/serde_derive@",
    ] {
        assert!(
            !purls.iter().any(|p| p.starts_with(absent)),
            "{absent} is in the SBOM but not in the image"
        );
    }
    assert!(
        purls.iter().any(|p| p.starts_with("pkg:deb/debian/libc6@")),
        "the image's glibc is in the SBOM"
    );
}

/// Unpacked as a runtime would: skopeo to an OCI layout, umoci to a bundle. The root filesystem
/// and the runtime configuration umoci made from the image's.
fn unpack(work: &Path, archive: &Path, skopeo: &Path, umoci: &Path) -> (PathBuf, Value) {
    let layout = work.join("layout");
    run(Command::new(skopeo)
        .arg("copy")
        .arg(format!("oci-archive:{}", archive.display()))
        .arg(format!("oci:{}:test", layout.display())));
    let bundle = work.join("bundle");
    run(Command::new(umoci)
        .args(["unpack", "--image"])
        .arg(format!("{}:test", layout.display()))
        .arg(&bundle));
    let spec: Value =
        serde_json::from_str(&std::fs::read_to_string(bundle.join("config.json")).unwrap())
            .unwrap();
    (bundle.join("rootfs"), spec)
}

/// The layout deploy/ relies on: the entrypoint runs `serve` for a `DaemonSet` without a command,
/// `probe-pod` (what pods/exec runs) is on the image's PATH, `/usr/local/bin/prober` is the
/// `CronJob`'s command, every user a container runs as exists, and each binary starts from the
/// image alone as that user.
fn check_layout(rootfs: &Path, spec: &Value) {
    let entry: Vec<&str> = spec["process"]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(entry, ["/usr/local/bin/probe-pod", "serve"], "{spec}");
    // Not root by default: only the host agent needs it, and its DaemonSet asks for it.
    assert_eq!(spec["process"]["user"]["uid"], 65534, "{spec}");
    assert_eq!(spec["process"]["user"]["gid"], 65534, "{spec}");
    let path = spec["process"]["env"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|e| e.as_str().unwrap().strip_prefix("PATH="))
        .unwrap();
    assert_eq!(path, IMAGE_PATH);
    let exec = prober::runtime::kube::exec::COMMAND[0];
    assert!(
        path.split(':')
            .any(|d| executable(&in_image(rootfs, d).join(exec))),
        "`{exec}` (pods/exec) is not on the image's PATH {path}"
    );
    let passwd = std::fs::read_to_string(rootfs.join("etc/passwd")).unwrap();
    let containers = deployed_containers();
    assert!(containers.len() >= 3, "{containers:?}");
    for (what, c) in &containers {
        let program = match c["command"].as_array() {
            Some(cmd) => cmd[0].as_str().unwrap(),
            None => entry[0],
        };
        assert!(
            executable(&in_image(rootfs, program)),
            "{what} runs {program}, which the image does not have"
        );
        let uid = c["securityContext"]["runAsUser"].as_u64().unwrap();
        assert!(
            passwd
                .lines()
                .any(|l| l.split(':').nth(2) == Some(&uid.to_string())),
            "{what} runs as {uid}, which the image's /etc/passwd does not name"
        );
        let ran = run(Command::new("chroot")
            .arg(format!("--userspec={uid}:{uid}"))
            .arg(rootfs)
            .arg(program)
            .arg("--version"));
        assert!(
            text(&ran).contains(env!("CARGO_PKG_VERSION")),
            "{}",
            text(&ran)
        );
    }
}

/// Every agent of the kept lab `name` runs the image's binary with the image's root as its root.
fn check_agents_run_from(rootfs: &Path, name: &str) {
    let image_bin = std::fs::canonicalize(rootfs.join("usr/local/bin/probe-pod")).unwrap();
    let image_root = std::fs::canonicalize(rootfs).unwrap();
    for ns in ["n1", "n2", "n3", "n1p0", "n2p0", "n3p0"] {
        let ns = format!("plab-{name}-{ns}");
        let agents: Vec<u32> = pids_in(&ns)
            .into_iter()
            .filter(|pid| {
                std::fs::read_link(format!("/proc/{pid}/exe"))
                    .is_ok_and(|e| e.file_name() == image_bin.file_name())
            })
            .collect();
        assert!(!agents.is_empty(), "no agent runs in {ns}");
        for pid in agents {
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
            let root = std::fs::read_link(format!("/proc/{pid}/root")).unwrap();
            assert_eq!(
                (exe, root),
                (image_bin.clone(), image_root.clone()),
                "agent {pid} in {ns} does not run from the image"
            );
        }
    }
}

#[test]
fn the_image_runs_both_agents_from_its_own_root_in_a_lab() {
    if !require_root() {
        return;
    }
    let (Some(_), Some(skopeo), Some(umoci)) = (
        tool("buildah", INSTALLER),
        tool("skopeo", INSTALLER),
        tool("umoci", INSTALLER),
    ) else {
        return;
    };
    let work = tempfile::Builder::new()
        .prefix("prober-image-test")
        .tempdir()
        .unwrap();
    let out_dir = build_image(work.path());
    check_sbom(&out_dir);
    let (rootfs, spec) = unpack(
        work.path(),
        &out_dir.join("prober-oci.tar"),
        &skopeo,
        &umoci,
    );
    check_layout(&rootfs, &spec);

    // Both agents from the image's root, in every node and pod of a lab, while scenarios pass.
    let state = StateDir::new("image");
    let agent = chroot_agent(work.path(), &rootfs, &state.0);
    let name = common::lab_name("img");
    let kept = KeptLab {
        name: &name,
        state: &state,
    };
    let healthy = lab_run(&state, &agent, "healthy.yaml", kept.name, true);
    assert!(healthy.status.success(), "{}", text(&healthy));
    assert!(
        text(&healthy).contains(" passed, 0 failed\n"),
        "{}",
        text(&healthy)
    );
    check_agents_run_from(&rootfs, kept.name);
    drop(kept);

    let incident = lab_run(&state, &agent, "flannel-8472.yaml", &name, false);
    assert!(incident.status.success(), "{}", text(&incident));
    assert!(
        text(&incident).contains(" passed, 0 failed\n"),
        "{}",
        text(&incident)
    );
}
