//! What a test needs from the machine (root, an external tool): there, or one SKIP line, or a failure when the run requires it.

use std::path::PathBuf;

/// Whether this test may build network namespaces (it runs as root). Otherwise one SKIP line,
/// or, with `PROBER_REQUIRE_NETNS` set (`scripts/test`), a failure.
#[must_use]
pub fn require_root() -> bool {
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

/// The external tool `name` found on the PATH, or `None` after one SKIP line naming
/// `installer`; with `PROBER_REQUIRE_TOOLS` set (`scripts/test`, after installing them) a
/// missing tool fails.
#[must_use]
pub fn tool(name: &str, installer: &str) -> Option<PathBuf> {
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

#[cfg(test)]
mod tests {
    #[test]
    fn a_tool_is_found_on_the_path_and_a_missing_one_is_none() {
        if std::env::var_os("PROBER_REQUIRE_TOOLS").is_some() {
            return;
        }
        assert!(super::tool("sh", "apt").is_some());
        assert!(super::tool("no-such-tool-prober-test", "apt").is_none());
    }
}
