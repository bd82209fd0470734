//! `pods/exec` over WebSocket, as the kubelet serves it through the API server: the
//! `v5.channel.k8s.io` subprotocol (else `v4.channel.k8s.io`), every binary message prefixed
//! by its channel (0 stdin, 1 stdout, 2 stderr, 3 the final `Status`, and in v5 255 "close this
//! channel"), the command run in the pod's network namespace. Kubernetes:
//! `staging/src/k8s.io/apimachinery/pkg/util/remotecommand/constants.go` and
//! `staging/src/k8s.io/apiserver/pkg/util/wsstream/conn.go`; the 400 for a container that is
//! not running: `pkg/registry/core/pod/strategy.go` (`ExecLocation`).

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::Role;

use super::api::{Body, Query, Route, Status, full};
use super::store::{Key, index};
use super::{Inner, kubelet, lock};

const V5: &str = "v5.channel.k8s.io";
const V4: &str = "v4.channel.k8s.io";

fn bad(message: String) -> Status {
    Status {
        code: 400,
        reason: "BadRequest",
        message,
        details: json!({}),
        retry_after: None,
    }
}

/// Checks the pod and container, answers 101 and runs the session on the upgraded connection.
#[allow(clippy::too_many_lines)] // The checks the API server makes, in its order.
pub fn upgrade(
    inner: Arc<Inner>,
    mut req: Request<Incoming>,
    r: &Route,
    q: &Query,
) -> Result<Response<Body>, Status> {
    let ns = r.ns.clone().unwrap_or_default();
    let name = r.name.clone().unwrap_or_default();
    let pod = lock(&inner.store)
        .get(&Key::new(index("pods"), &ns, &name))
        .cloned()
        .ok_or_else(|| Status::not_found("", "pods", &name))?;
    let containers: Vec<String> = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str().map(String::from))
        .collect();
    let container = match super::api::param(q, "container") {
        Some(c) => c.to_string(),
        None if containers.len() == 1 => containers[0].clone(),
        None => {
            return Err(bad(format!(
                "a container name must be specified for pod {name}, choose one of: {containers:?}"
            )));
        }
    };
    if !containers.contains(&container) {
        return Err(bad(format!(
            "container {container} is not valid for pod {name}"
        )));
    }
    if pod["spec"]["nodeName"].is_null() {
        return Err(bad(format!("pod {name} does not have a host assigned")));
    }
    let Some((netns, _, node)) = lock(&inner.kubelet).sandbox(&ns, &name) else {
        let why = pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
            .as_str()
            .unwrap_or("ContainerCreating")
            .to_string();
        return Err(bad(format!(
            "container {container:?} in pod {name:?} is waiting to start: {why}"
        )));
    };
    let command: Vec<String> = q
        .iter()
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v.clone())
        .collect();
    if command.is_empty() {
        return Err(bad("you must specify at least 1 command".into()));
    }
    let want = |k: &str| matches!(super::api::param(q, k), Some("1" | "true"));
    let streams = (want("stdin"), want("stdout"), want("stderr"));
    let offered: Vec<String> = req
        .headers()
        .get_all("sec-websocket-protocol")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|p| p.trim().to_string()))
        .collect();
    let v4_only = lock(&inner.faults).exec_v4_only;
    let protocol = if !v4_only && offered.iter().any(|p| p == V5) {
        V5
    } else if offered.iter().any(|p| p == V4) {
        V4
    } else {
        return Err(bad(format!(
            "Upgrade request required: the stand-in speaks {V5} and {V4} (offered: {offered:?})"
        )));
    };
    let Some(key) = req.headers().get("sec-websocket-key").cloned() else {
        return Err(bad("Upgrade request required".into()));
    };
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let cut = lock(&inner.faults)
        .exec_cut
        .clone()
        .filter(|(n, _)| *n == node)
        .map(|(_, bytes)| bytes);
    let slow = lock(&inner.faults).exec_slow;
    let on = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let Ok(upgraded) = on.await else { return };
        let ws = tokio_tungstenite::WebSocketStream::from_raw_socket(
            TokioIo::new(upgraded),
            Role::Server,
            None,
        )
        .await;
        Box::pin(session(
            &inner,
            ws,
            &ns,
            &name,
            &netns,
            &command,
            streams,
            protocol == V5,
            (cut, slow),
        ))
        .await;
    });
    let mut resp = Response::new(full(""));
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    h.insert(
        "connection",
        hyper::header::HeaderValue::from_static("Upgrade"),
    );
    h.insert(
        "upgrade",
        hyper::header::HeaderValue::from_static("websocket"),
    );
    h.insert(
        "sec-websocket-protocol",
        hyper::header::HeaderValue::from_static(protocol),
    );
    if let Ok(v) = hyper::header::HeaderValue::from_str(&accept) {
        h.insert("sec-websocket-accept", v);
    }
    Ok(resp)
}

fn status_of(code: Option<i32>, command: &[String]) -> Value {
    match code {
        Some(0) => json!({"metadata": {}, "status": "Success"}),
        Some(c) => json!({"metadata": {}, "status": "Failure",
            "message": format!("command terminated with non-zero exit code: error executing command {command:?}, exit code {c}"),
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": c.to_string()}]}}),
        None => json!({"metadata": {}, "status": "Failure",
            "message": "command terminated by a signal", "reason": "InternalError"}),
    }
}

fn frame(channel: u8, data: &[u8]) -> Message {
    let mut v = Vec::with_capacity(data.len() + 1);
    v.push(channel);
    v.extend_from_slice(data);
    Message::Binary(v.into())
}

type Ws = tokio_tungstenite::WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

/// Sends stdout bytes on channel 1: at once, or (`slow`: N bytes, D) N bytes every D. Returns
/// false when the connection is gone: it failed, or `exited` said, before a piece left, that it
/// is reset (the rest lost).
async fn send_stdout(
    sink: &mut futures_util::stream::SplitSink<Ws, Message>,
    bytes: &[u8],
    slow: Option<(usize, Duration)>,
    exited: &mut (dyn FnMut() -> bool + Send),
) -> bool {
    let (piece, every) = slow.unwrap_or((bytes.len(), Duration::ZERO));
    for chunk in bytes.chunks(piece.max(1)) {
        if slow.is_some() {
            tokio::time::sleep(every).await;
        }
        if exited() || sink.send(frame(1, chunk)).await.is_err() {
            return false;
        }
    }
    true
}

#[allow(clippy::too_many_arguments)]
async fn session(
    inner: &Arc<Inner>,
    ws: Ws,
    ns: &str,
    name: &str,
    netns: &str,
    command: &[String],
    (stdin_on, stdout_on, stderr_on): (bool, bool, bool),
    v5: bool,
    (cut, slow): (Option<usize>, Option<(usize, Duration)>),
) {
    // The stub's exec round trip: the session opens only after it.
    if let Some(stub) = inner.config.stub {
        tokio::time::sleep(stub.exec_round_trip).await;
    }
    let stub = inner.config.stub;
    let (mut sink, mut source) = ws.split();
    let mut child = match spawn(inner, netns, command, stdin_on) {
        Ok(c) => c,
        Err(message) => {
            let s = json!({"metadata": {}, "status": "Failure", "reason": "InternalError",
                "message": format!("failed to exec in container: {message}")});
            let _ = sink.send(frame(3, s.to_string().as_bytes())).await;
            let _ = sink.close().await;
            return;
        }
    };
    let pid = child.id().unwrap_or_default();
    lock(&inner.kubelet).add_exec(ns, name, pid);
    let reset_on_exit = lock(&inner.faults).exec_reset_on_exit;
    let mut stdin = child.stdin.take();
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let (mut out_buf, mut err_buf) = ([0u8; 16384], [0u8; 16384]);
    let mut sent = 0usize;
    let mut exit = None;
    let mut cut_off = false;
    // A stub agent's answers leave once its probe phase is over.
    let phase = tokio::time::sleep(stub.map_or(Duration::ZERO, |s| s.probe_phase));
    tokio::pin!(phase);
    let mut holding = stub.is_some();
    loop {
        if stdout.is_none() && stderr.is_none() {
            exit = child.wait().await.ok().and_then(|s| s.code());
            break;
        }
        tokio::select! {
            msg = source.next() => match msg {
                Some(Ok(Message::Binary(b))) if !b.is_empty() => match b[0] {
                    0 => {
                        if let Some(w) = stdin.as_mut()
                            && w.write_all(&b[1..]).await.is_err()
                        {
                            stdin = None;
                        }
                    }
                    255 if v5 && b.get(1) == Some(&0) => stdin = None,
                    _ => {}
                },
                Some(Ok(Message::Close(_)) | Err(_)) | None => {
                    // The client went away: the session ends, its process with it.
                    let _ = child.kill().await;
                    lock(&inner.kubelet).remove_exec(ns, name, pid);
                    return;
                }
                Some(Ok(_)) => {}
            },
            () = &mut phase, if holding => holding = false,
            n = read(&mut stdout, &mut out_buf), if !holding => match n {
                0 => stdout = None,
                n => {
                    let mut n = n;
                    if let Some(limit) = cut
                        && sent + n >= limit
                    {
                        n = limit.saturating_sub(sent);
                        cut_off = true;
                    }
                    sent += n;
                    let mut exited = || reset_on_exit && matches!(child.try_wait(), Ok(Some(_)));
                    let on = stdout_on && n > 0;
                    let sent = !on || send_stdout(&mut sink, &out_buf[..n], slow, &mut exited).await;
                    cut_off |= !sent;
                    if cut_off {
                        break;
                    }
                }
            },
            n = read(&mut stderr, &mut err_buf), if !holding => match n {
                0 => stderr = None,
                n => {
                    if stderr_on && sink.send(frame(2, &err_buf[..n])).await.is_err() {
                        break;
                    }
                }
            },
        }
    }
    if cut_off || exit.is_none() && stdout.is_some() {
        // The connection is lost: no Status, no close frame, the TCP connection just ends.
        let _ = child.kill().await;
        lock(&inner.kubelet).remove_exec(ns, name, pid);
        drop(sink);
        drop(source);
        return;
    }
    let _ = sink
        .send(frame(3, status_of(exit, command).to_string().as_bytes()))
        .await;
    let _ = sink.close().await;
    lock(&inner.kubelet).remove_exec(ns, name, pid);
}

/// The exec's process: the command in the pod's network namespace, or the stub agent.
fn spawn(
    inner: &Inner,
    netns: &str,
    command: &[String],
    stdin_on: bool,
) -> Result<tokio::process::Child, String> {
    let argv = kubelet::argv(inner, command);
    let mut cmd = match inner.config.stub {
        None => tokio::process::Command::from(kubelet::in_netns(netns, None, &argv)),
        Some(_) => stub_command(inner, &argv)?,
    };
    cmd.stdin(if stdin_on {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .kill_on_drop(true);
    cmd.spawn().map_err(|e| e.to_string())
}

/// The stub agent (`Config::stub`): `probe-pod probe` run with `--simulate` (no socket
/// opened, nothing sent), outside any namespace, with nothing of the environment but `PATH`.
fn stub_command(inner: &Inner, argv: &[String]) -> Result<tokio::process::Command, String> {
    let entry = inner.config.entrypoint.display().to_string();
    match argv {
        [bin, probe, rest @ ..] if *bin == entry && probe == "probe" => {
            let mut cmd = tokio::process::Command::new(bin);
            cmd.arg("probe")
                .args(rest)
                .env_clear()
                .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
                .env("PROBE_POD_SIMULATE", "true");
            Ok(cmd)
        }
        _ => Err(format!(
            "the stand-in's stub agents run only `probe-pod probe`, not {argv:?}"
        )),
    }
}

async fn read(pipe: &mut Option<impl tokio::io::AsyncRead + Unpin>, buf: &mut [u8]) -> usize {
    match pipe {
        Some(p) => p.read(buf).await.unwrap_or(0),
        None => std::future::pending().await,
    }
}
