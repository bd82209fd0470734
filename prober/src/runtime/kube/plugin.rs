//! A kubeconfig's exec credential plugin (`users[].user.exec`: `aws eks get-token`,
//! `gke-gcloud-auth-plugin`, `kubelogin`), run as kubectl runs it, but under a time limit and
//! with its output capped, and named when it fails. kube would run it with neither bound. Its
//! credential then stands in the kubeconfig in its place; a token is fetched again from it
//! before it expires and on a 401 ([`super::refresh`]).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use kube::config::{ExecInteractiveMode, Kubeconfig};
use tokio::io::AsyncReadExt;

/// How long a plugin may take: long enough for an interactive login in a browser.
pub const PLUGIN_TIMEOUT: Duration = Duration::from_secs(120);
/// The most a plugin may print on stdout: an `ExecCredential` with a certificate chain is a
/// few KiB.
pub const MAX_OUTPUT: u64 = 1 << 20;
/// The most of its stderr kept for a message.
const MAX_STDERR: u64 = 4096;

#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("{source_name}: user {user}: cannot start its exec plugin `{command}`: {error}{hint}")]
    Start {
        source_name: String,
        user: String,
        command: String,
        error: std::io::Error,
        hint: String,
    },
    #[error(
        "{source_name}: user {user}: its exec plugin `{command}` did not finish within {secs} s"
    )]
    Deadline {
        source_name: String,
        user: String,
        command: String,
        secs: u64,
    },
    #[error(
        "{source_name}: user {user}: its exec plugin `{command}` printed more than {max} bytes"
    )]
    TooLarge {
        source_name: String,
        user: String,
        command: String,
        max: u64,
    },
    #[error("{source_name}: user {user}: its exec plugin `{command}` failed ({status}): {stderr}")]
    Failed {
        source_name: String,
        user: String,
        command: String,
        status: String,
        stderr: String,
    },
    #[error(
        "{source_name}: user {user}: its exec plugin `{command}` printed no usable ExecCredential: {why}"
    )]
    Credential {
        source_name: String,
        user: String,
        command: String,
        why: String,
    },
}

/// The `ExecCredential` a plugin prints, as far as the prober uses it.
#[derive(serde::Deserialize)]
struct ExecCredential {
    status: Option<CredentialStatus>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct CredentialStatus {
    token: Option<String>,
    client_certificate_data: Option<String>,
    client_key_data: Option<String>,
    expiration_timestamp: Option<String>,
}

/// The plugin's command as client-go starts it: its arguments and environment, and
/// `KUBERNETES_EXEC_INFO` (the cluster only when it asks for it); killed when dropped.
fn command_of(
    exec: &kube::config::ExecConfig,
    command: &str,
    cluster: Option<&kube::config::Cluster>,
) -> tokio::process::Command {
    let interactive = exec.interactive_mode != Some(ExecInteractiveMode::Never);
    let mut spec = serde_json::json!({"interactive": interactive});
    if exec.provide_cluster_info
        && let Some(c) = cluster
    {
        spec["cluster"] = serde_json::json!({
            "server": c.server,
            "tls-server-name": c.tls_server_name,
            "insecure-skip-tls-verify": c.insecure_skip_tls_verify,
            "certificate-authority-data": c.certificate_authority_data,
            "proxy-url": c.proxy_url,
        });
    }
    let info = serde_json::json!({
        "apiVersion": exec.api_version,
        "kind": "ExecCredential",
        "spec": spec,
    });
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(exec.args.iter().flatten())
        .envs(
            exec.env
                .iter()
                .flatten()
                .filter_map(|e| Some((e.get("name")?, e.get("value")?))),
        )
        .env("KUBERNETES_EXEC_INFO", info.to_string())
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    for name in exec.drop_env.iter().flatten() {
        cmd.env_remove(name);
    }
    if interactive {
        cmd.stdin(Stdio::inherit()).stderr(Stdio::inherit());
    } else {
        cmd.stdin(Stdio::null()).stderr(Stdio::piped());
    }
    cmd
}

/// A finished plugin: its exit, its stdout and the start of its stderr.
type Collected = (std::io::Result<std::process::ExitStatus>, Vec<u8>, Vec<u8>);

/// What a plugin printed, read under `timeout`: `None` when it took longer, `Some(None)`
/// when its stdout went past [`MAX_OUTPUT`].
async fn collect(mut child: tokio::process::Child, timeout: Duration) -> Option<Option<Collected>> {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let work = async {
        let read_out = async {
            if let Some(o) = stdout {
                let _ = o.take(MAX_OUTPUT + 1).read_to_end(&mut out).await;
            }
        };
        let read_err = async {
            if let Some(e) = stderr {
                let _ = e.take(MAX_STDERR).read_to_end(&mut err).await;
            }
        };
        tokio::join!(read_out, read_err);
        if out.len() as u64 > MAX_OUTPUT {
            return None;
        }
        Some(child.wait().await)
    };
    let status = tokio::time::timeout(timeout, work).await.ok()?;
    Some(status.map(|s| (s, out, err)))
}

/// A user's exec plugin, ready to be run (again).
pub struct Plugin {
    exec: kube::config::ExecConfig,
    command: String,
    /// The command as said in messages: its file name.
    shown: String,
    cluster: Option<kube::config::Cluster>,
    source_name: String,
    user: String,
    timeout: Duration,
}

/// A plugin's credential: a token (and its expiry, unix seconds) or a client certificate.
enum Credential {
    Token(super::refresh::Token),
    Certificate { cert: String, key: String },
}

impl Plugin {
    fn fail(&self, why: String) -> PluginError {
        PluginError::Credential {
            source_name: self.source_name.clone(),
            user: self.user.clone(),
            command: self.shown.clone(),
            why,
        }
    }

    /// Runs the plugin under its bounds and reads the credential it printed.
    async fn run(&self) -> Result<Credential, PluginError> {
        if self.command.is_empty() {
            return Err(self.fail("it names no command".into()));
        }
        let child = command_of(&self.exec, &self.command, self.cluster.as_ref())
            .spawn()
            .map_err(|error| PluginError::Start {
                source_name: self.source_name.clone(),
                user: self.user.clone(),
                command: self.shown.clone(),
                error,
                hint: self
                    .exec
                    .install_hint
                    .as_deref()
                    .map(|h| format!(" ({})", h.trim()))
                    .unwrap_or_default(),
            })?;
        let (status, out, err) = match collect(child, self.timeout).await {
            None => {
                return Err(PluginError::Deadline {
                    source_name: self.source_name.clone(),
                    user: self.user.clone(),
                    command: self.shown.clone(),
                    secs: self.timeout.as_secs(),
                });
            }
            Some(None) => {
                return Err(PluginError::TooLarge {
                    source_name: self.source_name.clone(),
                    user: self.user.clone(),
                    command: self.shown.clone(),
                    max: MAX_OUTPUT,
                });
            }
            Some(Some(done)) => done,
        };
        let status = status.map_err(|e| self.fail(e.to_string()))?;
        if !status.success() {
            return Err(PluginError::Failed {
                source_name: self.source_name.clone(),
                user: self.user.clone(),
                command: self.shown.clone(),
                status: status.to_string(),
                stderr: String::from_utf8_lossy(&err).trim().to_string(),
            });
        }
        credential(&out).map_err(|why| self.fail(why))
    }

    /// Runs the plugin again for a new token (see [`super::refresh`]).
    pub async fn token(&self) -> Result<super::refresh::Token, PluginError> {
        match self.run().await? {
            Credential::Token(t) => Ok(t),
            Credential::Certificate { .. } => {
                Err(self.fail("it printed a certificate where it printed a token before".into()))
            }
        }
    }
}

/// Runs the exec plugin of the user of `context` (else the current context), if it has one,
/// and puts its credential in the kubeconfig in place of the plugin, with `timeout`. When the
/// credential is a token: the plugin and that token, to run it again for a new one.
pub async fn run_plugin(
    kc: &mut Kubeconfig,
    context: Option<&str>,
    source_name: &str,
    timeout: Duration,
) -> Result<Option<(Plugin, super::refresh::Token)>, PluginError> {
    use base64::Engine as _;
    let Some(ctx) = super::context_of(kc, context) else {
        return Ok(None);
    };
    let cluster = kc
        .clusters
        .iter()
        .find(|n| n.name == ctx.cluster)
        .and_then(|n| n.cluster.clone());
    let user = ctx.user.unwrap_or_default();
    let Some(auth) = kc
        .auth_infos
        .iter_mut()
        .find(|n| n.name == user)
        .and_then(|n| n.auth_info.as_mut())
    else {
        return Ok(None);
    };
    let Some(exec) = auth.exec.clone() else {
        return Ok(None);
    };
    let command = exec.command.clone().unwrap_or_default();
    let shown = Path::new(&command)
        .file_name()
        .map_or(command.clone(), |f| f.to_string_lossy().into_owned());
    let plugin = Plugin {
        exec,
        command,
        shown,
        cluster,
        source_name: source_name.to_string(),
        user,
        timeout,
    };
    let b64 = |text: String| base64::engine::general_purpose::STANDARD.encode(text);
    let refresh = match plugin.run().await? {
        Credential::Token(t) => {
            auth.token = Some(t.value.clone().into());
            Some((plugin, t))
        }
        Credential::Certificate { cert, key } => {
            auth.client_certificate_data = Some(b64(cert));
            auth.client_key_data = Some(b64(key).into());
            None
        }
    };
    auth.exec = None;
    Ok(refresh)
}

/// The credential a plugin printed (`out`, an `ExecCredential`).
fn credential(out: &[u8]) -> Result<Credential, String> {
    let cred: ExecCredential =
        serde_json::from_slice(out).map_err(|e| format!("not JSON ({e})"))?;
    let s = cred.status.ok_or("no status in it")?;
    let expires = match s.expiration_timestamp {
        None => None,
        Some(t) => {
            let time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time =
                serde_json::from_value(serde_json::Value::String(t))
                    .map_err(|_| "its expirationTimestamp is not an RFC 3339 time")?;
            Some(u64::try_from(time.0.as_second()).unwrap_or(0))
        }
    };
    match (s.token, s.client_certificate_data, s.client_key_data) {
        (Some(token), _, _) if !token.is_empty() => {
            super::token::check(&token)
                .map_err(|r| format!("its token cannot be sent in an HTTP header: {r}"))?;
            Ok(Credential::Token(super::refresh::Token {
                value: token,
                expires,
            }))
        }
        (_, Some(cert), Some(key)) => Ok(Credential::Certificate { cert, key }),
        _ => Err("neither a token nor a client certificate and key".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubeconfig(dir: &Path, script: &str) -> Kubeconfig {
        let plugin = dir.join("plugin.sh");
        std::fs::write(&plugin, format!("#!/bin/sh\n{script}\n")).unwrap();
        let mut perm = std::fs::metadata(&plugin).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        std::fs::set_permissions(&plugin, perm).unwrap();
        Kubeconfig::from_yaml(&format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"https://10.0.0.1:6443\"}}\n\
             users:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {}\n      interactiveMode: Never\n\
             contexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n",
            plugin.display()
        ))
        .unwrap()
    }

    async fn run(script: &str, timeout: Duration) -> (Result<(), PluginError>, Kubeconfig) {
        let tmp = tempfile::tempdir().unwrap();
        let mut kc = kubeconfig(tmp.path(), script);
        let r = run_plugin(&mut kc, None, "kc.yaml", timeout)
            .await
            .map(|_| ());
        (r, kc)
    }

    #[tokio::test]
    async fn a_plugin_that_hangs_is_stopped_and_named() {
        let started = std::time::Instant::now();
        let (r, _) = run("exec sleep 600", Duration::from_millis(300)).await;
        let e = r.unwrap_err().to_string();
        assert!(
            e.contains("plugin.sh") && e.contains("did not finish"),
            "{e}"
        );
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[tokio::test]
    async fn a_plugin_that_prints_without_end_is_capped() {
        let (r, _) = run("exec yes", Duration::from_secs(20)).await;
        let e = r.unwrap_err().to_string();
        assert!(e.contains("plugin.sh") && e.contains("more than"), "{e}");
    }

    #[tokio::test]
    async fn a_failing_plugin_is_named_with_its_words() {
        let (r, _) = run(
            "echo 'token expired, run aws sso login' >&2; exit 3",
            Duration::from_secs(20),
        )
        .await;
        let e = r.unwrap_err().to_string();
        assert!(
            e.contains("plugin.sh") && e.contains("aws sso login"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn the_credential_stands_in_for_the_plugin() {
        let (r, kc) = run(
            r#"echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t0k"}}'"#,
            Duration::from_secs(20),
        )
        .await;
        r.unwrap();
        let user = kc.auth_infos[0].auth_info.as_ref().unwrap();
        assert!(user.exec.is_none());
        assert!(user.token.is_some());
    }
}
