//! `?watch=1`: a chunked stream of `{"type": ..., "object": ...}` lines from a resource version
//! (or, from "" and "0", the current objects as ADDED first), ended by `timeoutSeconds`; a
//! version older than the last compaction gets an ERROR event with a 410 `Status` ("too old
//! resource version"), as `staging/src/k8s.io/apiserver/pkg/storage/cacher` answers it.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::Response;
use hyper::body::Frame;
use serde_json::json;

use super::api::{Body, Query, Route, Status, param, selected};
use super::{Inner, lock};

/// The longest watch the server keeps open without `timeoutSeconds` (as the API server's
/// `--min-request-timeout` of 1800 s, shortened: tests never need more).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

fn line(ty: &str, object: &serde_json::Value) -> Bytes {
    let mut s = json!({"type": ty, "object": object}).to_string();
    s.push('\n');
    Bytes::from(s)
}

pub fn watch(inner: &Arc<Inner>, r: &Route, q: &Query) -> Result<Response<Body>, Status> {
    let (initial, now, sel) = selected(inner, r, q)?;
    let from = param(q, "resourceVersion").unwrap_or_default();
    let asked = param(q, "timeoutSeconds")
        .and_then(|t| t.parse().ok())
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
    let timeout = lock(&inner.faults)
        .watch_end
        .map_or(asked, |end| end.min(asked));
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    let mut first = Vec::new();
    let start = if from.is_empty() || from == "0" {
        first.extend(initial.iter().map(|o| line("ADDED", o)));
        now
    } else {
        let v: u64 = from
            .parse()
            .map_err(|_| Status::bad_request(format!("resourceVersion {from:?} is invalid")))?;
        if v < lock(&inner.store).compacted {
            let gone = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "reason": "Expired", "code": 410,
                "message": format!("too old resource version: {v} ({})", lock(&inner.store).compacted)});
            first.push(line("ERROR", &gone));
            let _ = tx.try_send(first.remove(0));
            drop(tx);
            return Ok(stream(rx));
        }
        v
    };
    let inner = inner.clone();
    let kind = r.kind;
    let ns = r.ns.clone();
    tokio::spawn(async move {
        for b in first {
            if tx.send(b).await.is_err() {
                return;
            }
        }
        let mut tick = inner.tick.subscribe();
        let mut at = start;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let changes = lock(&inner.store).changes_after(at, kind);
            for c in changes {
                at = c.rv;
                let in_ns = ns
                    .as_deref()
                    .is_none_or(|n| c.object["metadata"]["namespace"] == n);
                if in_ns && sel.matches(&c.object) && tx.send(line(c.ty, &c.object)).await.is_err()
                {
                    return;
                }
            }
            tokio::select! {
                r = tick.changed() => if r.is_err() { return },
                () = tokio::time::sleep_until(deadline) => return,
                () = tx.closed() => return,
            }
        }
    });
    Ok(stream(rx))
}

fn stream(mut rx: tokio::sync::mpsc::Receiver<Bytes>) -> Response<Body> {
    let s = futures_util::stream::poll_fn(move |cx| {
        rx.poll_recv(cx)
            .map(|o| o.map(|b| Ok::<_, std::convert::Infallible>(Frame::data(b))))
    });
    let mut r = Response::new(http_body_util::StreamBody::new(s).boxed_unsync());
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}
