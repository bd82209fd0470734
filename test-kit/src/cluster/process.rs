//! The cluster's processes: each started in a lab namespace with its output in a log file of
//! its own, in a process group of its own so that stopping it takes its children too.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use super::ClusterError;

/// A process the cluster started.
pub(super) struct Spawned {
    pub(super) what: String,
    pub(super) log: PathBuf,
    child: Option<Child>,
}

/// Starts `argv` in network namespace `ns` (`ip netns exec`), its output to `log`.
pub(super) fn spawn(
    ns: &str,
    what: &str,
    argv: &[String],
    log: &Path,
) -> Result<Spawned, ClusterError> {
    let start_err = |source| ClusterError::Start {
        what: what.to_string(),
        source,
    };
    if let Some(d) = log.parent() {
        std::fs::create_dir_all(d).map_err(start_err)?;
    }
    let out = std::fs::File::create(log).map_err(start_err)?;
    let err = out.try_clone().map_err(start_err)?;
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns])
        .args(argv)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0);
    let child = cmd.spawn().map_err(start_err)?;
    Ok(Spawned {
        what: what.to_string(),
        log: log.to_path_buf(),
        child: Some(child),
    })
}

impl Spawned {
    pub(super) fn exited(&self) -> bool {
        // A `&self` look without reaping: /proc says whether it is still there and alive.
        self.child.as_ref().is_none_or(|c| {
            let stat =
                std::fs::read_to_string(format!("/proc/{}/stat", c.id())).unwrap_or_default();
            stat.is_empty()
                || stat
                    .rsplit_once(')')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
    }

    /// The last lines of its log.
    pub(super) fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(25)..].join("\n")
    }

    /// SIGTERM to its group, SIGKILL after `grace`, and reaps it.
    pub(super) fn stop(&mut self, grace: Duration) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pgid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
        if !grace.is_zero() {
            let _ = killpg(pgid, Signal::SIGTERM);
            let deadline = Instant::now() + grace;
            while Instant::now() < deadline {
                if matches!(child.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        // The group, whether or not its leader is gone: nothing of it may outlive the test.
        let _ = killpg(pgid, Signal::SIGKILL);
        let _ = child.wait();
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        self.stop(Duration::ZERO);
    }
}

/// Whether something listens on TCP `port` in namespace `ns`.
pub(super) fn listening(ns: &str, port: u16) -> bool {
    Command::new("ip")
        .args(["netns", "exec", ns, "ss", "-Hltn"])
        .arg(format!("sport = :{port}"))
        .output()
        .is_ok_and(|o| !o.stdout.is_empty())
}
