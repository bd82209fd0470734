//! Helpers shared by the lab and matrix tests (the mock API and the stand-in are in test-kit).

#![allow(dead_code)]

pub mod gateway;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn prober() -> &'static str {
    env!("CARGO_BIN_EXE_prober")
}

/// The agent binary, built beside `prober` by the workspace build.
pub fn agent() -> PathBuf {
    let p = Path::new(prober()).with_file_name("probe-pod");
    assert!(
        p.is_file(),
        "{} is missing: build the workspace (cargo build --workspace) first",
        p.display()
    );
    p
}

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Everything a command printed.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Root for network namespaces, an external tool: there, or one SKIP line, or a failure when
/// `scripts/test` requires it.
#[allow(unused_imports)] // each test binary uses some of the shared helpers
pub use test_kit::skip::{require_root, tool};

/// What installs kubectl and kubernetes-validate.
pub const KUBE_DEPS: &str = "scripts/install-kube-test-deps";

/// This test run's own tag, `t` and four lowercase letters or digits: `PROBER_TEST_RUN` when
/// `scripts/test` set it (so it can clean up exactly its own leftovers), else drawn from this
/// test process's id. Every lab a test builds is named with it first, so its namespaces all
/// start with `plab-TAG` and no two runs on one machine touch each other's.
pub fn run_tag() -> String {
    if let Ok(t) = std::env::var("PROBER_TEST_RUN") {
        assert!(
            t.len() == 5
                && t.starts_with('t')
                && t.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()),
            "PROBER_TEST_RUN={t:?}: expected `t` and four lowercase letters or digits"
        );
        return t;
    }
    let mut n = std::process::id();
    let mut tag = String::from("t");
    for _ in 0..4 {
        let d = char::from_digit(n % 36, 36).unwrap_or('0');
        tag.push(d);
        n /= 36;
    }
    tag
}

/// A lab name of this run's own: the run's tag, then `base` (at most 5 characters, since a lab
/// name has at most 10).
pub fn lab_name(base: &str) -> String {
    assert!(base.len() <= 5, "lab base name {base:?} is longer than 5");
    format!("{}{base}", run_tag())
}

/// The namespaces whose names start with `prefix`.
pub fn netns_with(prefix: &str) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(prefix))
        .map(String::from)
        .collect()
}

/// A lab state root of one test's own, removed at the end.
pub struct StateDir(pub PathBuf);

impl StateDir {
    pub fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!("prober-test-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }
}

impl Drop for StateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `prober lab ARGS --state-dir STATE`, with the workspace's agent.
pub fn lab(args: &[&str], state: &StateDir) -> Output {
    Command::new(prober())
        .arg("lab")
        .args(args)
        .arg("--state-dir")
        .arg(&state.0)
        .env("PROBER_AGENT_BIN", agent())
        .output()
        .unwrap()
}

/// The lab's own inventory as discovery can know it: discovery cannot see the lab's exec
/// prefixes, agent binary and host roots (agents are found at run time), nor the lab's extra
/// DNS test name and the overlay MTU it does not read; the lab does not state the node files'
/// layout (discovery finds kubeadm's, which the lab's host roots follow), and its scenario lists
/// only the components it is about (discovery also finds the seeded `CoreDNS`). A node serving no
/// CNI port says so (`serves: []`) where the lab leaves it out.
pub fn comparable_inventory(v: &mut serde_json::Value) {
    let top = v.as_object_mut().unwrap();
    for f in ["agentBin", "components"] {
        top.remove(f);
    }
    v["cluster"].as_object_mut().unwrap().remove("nodeFiles");
    for n in v["nodes"].as_array_mut().unwrap() {
        let n = n.as_object_mut().unwrap();
        for f in ["agents", "hostRoot"] {
            n.remove(f);
        }
        if n.get("serves")
            .is_some_and(|s| s.as_array().is_some_and(Vec::is_empty))
        {
            n.remove("serves");
        }
    }
    v["cluster"]["dns"].as_object_mut().unwrap().remove("names");
    v["cluster"]["overlay"]
        .as_object_mut()
        .unwrap()
        .remove("mtu");
}

/// The JSON report a run printed.
pub fn report(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON report ({e}):\n{}", text(out)))
}

/// Waits until `done` holds, or panics with `what` and its last word after `secs`.
pub fn eventually(secs: u64, what: &str, mut done: impl FnMut() -> Option<String>) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        match done() {
            None => return,
            Some(why) if std::time::Instant::now() > until => panic!("{what}: {why}"),
            Some(_) => std::thread::sleep(std::time::Duration::from_millis(200)),
        }
    }
}
