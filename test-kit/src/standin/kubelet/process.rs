//! The kubelet's processes: a container's command started in its sandbox's network namespace
//! as its `runAsUser`, its output in a log file of its own.

use std::process::{Child, Command, Stdio};

use serde_json::Value;

use super::super::Inner;

/// The argv an exec or a container runs: the image's `probe-pod` is the binary cargo built.
pub fn argv(inner: &Inner, command: &[String]) -> Vec<String> {
    let mut out: Vec<String> = command.to_vec();
    if let Some(first) = out.first_mut()
        && (first == "probe-pod" || first.ends_with("/probe-pod"))
    {
        *first = inner.config.entrypoint.display().to_string();
    }
    out
}

/// `ip netns exec NETNS [setpriv --reuid U ...] ARGV`, as the runtime starts a container in its
/// sandbox as its `runAsUser`.
pub fn in_netns(netns: &str, uid: Option<u64>, argv: &[String]) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", netns]);
    if let Some(u) = uid.filter(|u| *u != 0) {
        cmd.args([
            "setpriv",
            &format!("--reuid={u}"),
            &format!("--regid={u}"),
            "--clear-groups",
            "--",
        ]);
    }
    cmd.args(argv);
    cmd
}

/// Starts the pod's first container: its command (else the image's entrypoint) and args, its
/// environment, its pod-level sysctls applied to the sandbox first.
pub(super) fn start(inner: &Inner, pod: &Value, netns: &str) -> Result<Child, String> {
    let c = &pod["spec"]["containers"][0];
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(String::from))
            .collect()
    };
    let mut command = strings(&c["command"]);
    if command.is_empty() {
        command = vec!["probe-pod".into()];
    }
    command.extend(strings(&c["args"]));
    if pod["spec"]["hostNetwork"] != true {
        for s in pod["spec"]["securityContext"]["sysctls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let (Some(n), Some(v)) = (s["name"].as_str(), s["value"].as_str()) else {
                continue;
            };
            let _ = Command::new("ip")
                .args(["netns", "exec", netns, "sysctl", "-qw", &format!("{n}={v}")])
                .status();
        }
    }
    let uid = c["securityContext"]["runAsUser"]
        .as_u64()
        .or_else(|| pod["spec"]["securityContext"]["runAsUser"].as_u64());
    let log = log_path(inner, pod);
    let file = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    let err = file.try_clone().map_err(|e| e.to_string())?;
    let mut cmd = in_netns(netns, uid, &argv(inner, &command));
    cmd.env_clear().env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
    for e in c["env"].as_array().into_iter().flatten() {
        if let (Some(n), Some(v)) = (e["name"].as_str(), e["value"].as_str()) {
            cmd.env(n, v);
        }
    }
    cmd.stdin(Stdio::null()).stdout(file).stderr(err);
    cmd.spawn()
        .map_err(|e| format!("cannot start {command:?}: {e}"))
}

/// Where the pod's container writes its standard output and error.
pub(super) fn log_path(inner: &Inner, pod: &Value) -> std::path::PathBuf {
    inner.config.dir.join("logs").join(format!(
        "{}_{}.log",
        pod["metadata"]["namespace"].as_str().unwrap_or_default(),
        pod["metadata"]["name"].as_str().unwrap_or_default()
    ))
}
