//! The real `kubectl`, run where the API server can be reached (the control-plane namespace),
//! for set-up and for reading what a run left behind.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

#[derive(Debug, thiserror::Error)]
pub enum KubectlError {
    #[error("cannot run kubectl {args:?}: {source}")]
    Run {
        args: Vec<String>,
        #[source]
        source: std::io::Error,
    },
    #[error("kubectl {args:?} failed: {stderr}")]
    Failed { args: Vec<String>, stderr: String },
    #[error("kubectl {args:?} printed no JSON: {source}")]
    Parse {
        args: Vec<String>,
        #[source]
        source: serde_json::Error,
    },
}

fn command(netns: &str, kubeconfig: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", netns, "kubectl", "--kubeconfig"])
        .arg(kubeconfig)
        .args(["--request-timeout", "20s"])
        .args(args);
    c
}

fn finish(args: &[&str], out: &std::process::Output) -> Result<String, KubectlError> {
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(KubectlError::Failed {
            args: args.iter().map(ToString::to_string).collect(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// `kubectl ARGS` with `kubeconfig` in `netns`: its standard output.
pub(super) fn run(netns: &str, kubeconfig: &Path, args: &[&str]) -> Result<String, KubectlError> {
    let out = command(netns, kubeconfig, args)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| KubectlError::Run {
            args: args.iter().map(ToString::to_string).collect(),
            source,
        })?;
    finish(args, &out)
}

/// `run` with `input` on its standard input.
pub(super) fn run_stdin(
    netns: &str,
    kubeconfig: &Path,
    args: &[&str],
    input: &str,
) -> Result<String, KubectlError> {
    let err = |source| KubectlError::Run {
        args: args.iter().map(ToString::to_string).collect(),
        source,
    };
    let mut child = command(netns, kubeconfig, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(err)?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input.as_bytes()).map_err(err)?;
    }
    let out = child.wait_with_output().map_err(err)?;
    finish(args, &out)
}
