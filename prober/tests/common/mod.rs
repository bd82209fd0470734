//! Helpers shared by the lab and matrix tests.

#![allow(dead_code)]

pub mod mock;

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

/// Whether this test may build network namespaces. Without root it says so in one line and the
/// test returns early; `scripts/test` (CI, as root) sets `PROBER_REQUIRE_NETNS=1`, so there a
/// missing privilege is a failure, never a silent skip.
pub fn netns_available() -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    assert!(
        std::env::var_os("PROBER_REQUIRE_NETNS").is_none(),
        "PROBER_REQUIRE_NETNS is set but this test is not running as root"
    );
    eprintln!("SKIP: this test builds network namespaces and needs root");
    false
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

/// An external tool on the PATH, or `None` after one SKIP line naming `installer`; with
/// `PROBER_REQUIRE_TOOLS` set (scripts/test, after installing them) a missing tool fails.
pub fn require_tool(name: &str, installer: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("PROBER_REQUIRE_TOOLS").is_none(),
            "PROBER_REQUIRE_TOOLS is set but {name} is not installed ({installer})"
        );
        eprintln!("SKIP: {name} is not installed ({installer} installs it)");
    }
    found
}
