//! The lab's only contact with the system: `ip`, `bridge`, `nft`, `sysctl` and `ss` inside the
//! lab's own namespaces (never the root namespace), each under a deadline.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// No single command may take longer than this.
const COMMAND_DEADLINE: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("cannot run `{cmd}`: {source}")]
    Spawn { cmd: String, source: std::io::Error },
    #[error("`{cmd}` failed: {stderr}")]
    Failed { cmd: String, stderr: String },
    #[error("`{cmd}` did not finish within {} s", COMMAND_DEADLINE.as_secs())]
    Timeout { cmd: String },
}

fn describe(program: &str, args: &[&str]) -> String {
    std::iter::once(program)
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs a command to completion, feeding `stdin`; returns stdout.
pub fn run(program: &str, args: &[&str], stdin: Option<&str>) -> Result<String, ExecError> {
    let cmd = describe(program, args);
    let mut child = Command::new(program)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| ExecError::Spawn {
            cmd: cmd.clone(),
            source,
        })?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes())
            .map_err(|source| ExecError::Spawn {
                cmd: cmd.clone(),
                source,
            })?;
    }
    let deadline = Instant::now() + COMMAND_DEADLINE;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(ExecError::Timeout { cmd });
            }
        }
    }
    let out = child
        .wait_with_output()
        .map_err(|source| ExecError::Spawn {
            cmd: cmd.clone(),
            source,
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(ExecError::Failed {
            cmd,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

pub fn add_ns(name: &str) -> Result<(), ExecError> {
    run("ip", &["netns", "add", name], None).map(drop)
}

/// Every named network namespace.
#[must_use]
pub fn list_ns() -> Vec<String> {
    run("ip", &["netns", "list"], None)
        .map(|out| {
            out.lines()
                .filter_map(|l| l.split_whitespace().next())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// Kills everything running in `name`, then deletes it.
pub fn del_ns(name: &str) -> Result<(), ExecError> {
    if let Ok(pids) = run("ip", &["netns", "pids", name], None) {
        for pid in pids
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
        {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
    run("ip", &["netns", "del", name], None).map(drop)
}

/// Runs `tool -n NS -batch -` (`ip` or `bridge`) with one command per line; nothing to do for
/// no lines.
fn batch(tool: &str, ns: &str, lines: &[String]) -> Result<(), ExecError> {
    if lines.is_empty() {
        return Ok(());
    }
    // One command per line, run as root: a line break (or any control character) inside a
    // line would be a command of its own. Scenarios are checked before this; this is the last
    // word.
    if let Some(bad) = lines.iter().find(|l| l.chars().any(char::is_control)) {
        return Err(ExecError::Failed {
            cmd: describe(tool, &["-n", ns, "-batch", "-"]),
            stderr: format!("refused: a batch line holds a control character: {bad:?}"),
        });
    }
    run(
        tool,
        &["-n", ns, "-batch", "-"],
        Some(&(lines.join("\n") + "\n")),
    )
    .map(drop)
}

pub fn ip_batch(ns: &str, lines: &[String]) -> Result<(), ExecError> {
    batch("ip", ns, lines)
}

pub fn bridge_batch(ns: &str, lines: &[String]) -> Result<(), ExecError> {
    batch("bridge", ns, lines)
}

pub fn nft(ns: &str, ruleset: &str) -> Result<(), ExecError> {
    if ruleset.trim().is_empty() {
        return Ok(());
    }
    run(
        "ip",
        &["netns", "exec", ns, "nft", "-f", "-"],
        Some(ruleset),
    )
    .map(drop)
}

pub fn sysctl(ns: &str, kv: &[(String, String)]) -> Result<(), ExecError> {
    if kv.is_empty() {
        return Ok(());
    }
    let pairs: Vec<String> = kv.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut args = vec!["netns", "exec", ns, "sysctl", "-qw"];
    args.extend(pairs.iter().map(String::as_str));
    run("ip", &args, None).map(drop)
}

/// Starts a long-running program in `ns`, detached from our process group (so it outlives `lab up`
/// and a Ctrl-C in the terminal), output to `log`.
pub fn spawn(ns: &str, argv: &[String], log: &Path) -> Result<u32, ExecError> {
    use std::os::unix::process::CommandExt;
    let cmd = format!("ip netns exec {ns} {}", argv.join(" "));
    let file = std::fs::File::create(log).map_err(|source| ExecError::Spawn {
        cmd: cmd.clone(),
        source,
    })?;
    let err = file.try_clone().map_err(|source| ExecError::Spawn {
        cmd: cmd.clone(),
        source,
    })?;
    let child = Command::new("ip")
        .args(["netns", "exec", ns])
        .args(argv)
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(|source| ExecError::Spawn { cmd, source })?;
    Ok(child.id())
}

/// Whether something in `ns` listens on `port` (`tcp` or `udp`).
#[must_use]
pub fn listening(ns: &str, proto: &str, port: u16) -> bool {
    let flag = if proto == "tcp" { "-Hltn" } else { "-Hlun" };
    run(
        "ip",
        &["netns", "exec", ns, "ss", flag, &format!("sport = :{port}")],
        None,
    )
    .is_ok_and(|o| !o.trim().is_empty())
}

/// Which of the lab's tools are missing from PATH.
#[must_use]
pub fn missing_tools() -> Vec<&'static str> {
    let have = |t: &str| {
        std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(t).is_file()))
            || ["/usr/sbin", "/sbin", "/usr/bin"]
                .iter()
                .any(|d| Path::new(d).join(t).is_file())
    };
    [
        ("ip", "iproute2"),
        ("bridge", "iproute2"),
        ("ss", "iproute2"),
        ("nft", "nftables"),
        ("dnsmasq", "dnsmasq-base"),
        ("sysctl", "procps"),
    ]
    .into_iter()
    .filter(|(t, _)| !have(t))
    .map(|(_, pkg)| pkg)
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_line_with_a_line_break_is_refused_before_anything_runs() {
        let lines = vec!["link set lo up\nnetns exec x touch /tmp/owned".to_string()];
        // The namespace does not exist: had `ip` run, the error would be its own.
        let e = ip_batch("prober-no-such-ns", &lines)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("refused: a batch line holds a control character"),
            "{e}"
        );
    }
}
