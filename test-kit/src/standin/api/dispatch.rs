//! A request's way through the front: authentication, the faults that throttle or slow it,
//! routing, authorisation, then the verb's handler.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use serde_json::{Value, json};

use super::super::store::KINDS;
use super::super::{Inner, lock, watch};
use super::auth::{authenticate, authorize};
use super::create::create;
use super::read::{get, list};
use super::route::{Query, route, verb};
use super::write::{delete, patch, update};
use super::{Body, Status, json_response};

/// The largest request body read (an apply of a ConfigMap near its 1 MiB limit fits).
const MAX_BODY: usize = 3 << 20;

pub(super) async fn dispatch(
    inner: &Arc<Inner>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Status> {
    let user = authenticate(inner, &req)?;
    {
        let mut f = lock(&inner.faults);
        if f.throttle > 0 {
            f.throttle -= 1;
            return Err(Status::too_many_requests(1));
        }
    }
    slowed(inner, req.method()).await;
    let path = req.uri().path().to_string();
    if path == "/version" {
        return Ok(json_response(
            200,
            &json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0-standin", "platform": "linux/amd64"}),
        ));
    }
    let q: Query = form_urlencoded::parse(req.uri().query().unwrap_or_default().as_bytes())
        .into_owned()
        .collect();
    let Some(r) = route(&path) else {
        return Err(Status::new(
            404,
            "NotFound",
            "the server could not find the requested resource".into(),
        ));
    };
    let k = &KINDS[r.kind];
    if k.namespaced != r.ns.is_some() && !(r.ns.is_none() && r.name.is_none()) {
        return Err(Status::new(
            404,
            "NotFound",
            "the server could not find the requested resource".into(),
        ));
    }
    let v = verb(req.method(), &r, &q);
    authorize(inner, user, k, &r, v)?;
    if r.sub.as_deref() == Some("exec") {
        if let Some((n, secs)) = lock(&inner.faults).throttle_exec.as_mut()
            && *n > 0
        {
            *n -= 1;
            return Err(Status::too_many_requests(*secs));
        }
        return super::super::exec::upgrade(inner.clone(), req, &r, &q);
    }
    if r.sub.is_some() {
        return Err(Status::new(
            404,
            "NotFound",
            "the server could not find the requested resource".into(),
        ));
    }
    match v {
        "get" => get(inner, &r),
        "list" => list(inner, &r, &q),
        "watch" => watch::watch(inner, &r, &q),
        "create" => {
            let body = read_body(req).await?;
            let mut obj: Value = serde_json::from_slice(&body)
                .map_err(|e| Status::bad_request(format!("the body is no JSON object: {e}")))?;
            let ns = r.ns.clone().unwrap_or_default();
            if k.namespaced {
                obj["metadata"]["namespace"] = json!(ns);
            }
            let made = create(inner, r.kind, obj)?;
            Ok(json_response(201, &made))
        }
        "patch" => {
            let ct = req
                .headers()
                .get(hyper::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            let body = read_body(req).await?;
            patch(inner, &r, &q, &ct, &body)
        }
        "update" => {
            let body = read_body(req).await?;
            update(inner, &r, &body)
        }
        "delete" => {
            let body = read_body(req).await?;
            delete(inner, &r, &body)
        }
        _ => Err(Status::new(
            405,
            "MethodNotAllowed",
            format!("{v} is not supported by the stand-in"),
        )),
    }
}

/// The faults that answer a write late: every write (`slow_writes`), every delete
/// (`slow_deletes`).
async fn slowed(inner: &Inner, method: &Method) {
    let (writes, deletes) = {
        let f = lock(&inner.faults);
        (f.slow_writes, f.slow_deletes)
    };
    if let Some(d) = writes.filter(|_| method != Method::GET) {
        tokio::time::sleep(d).await;
    }
    if let Some(d) = deletes.filter(|_| method == Method::DELETE) {
        tokio::time::sleep(d).await;
    }
}

async fn read_body(req: Request<Incoming>) -> Result<Bytes, Status> {
    let limited = http_body_util::Limited::new(req.into_body(), MAX_BODY);
    limited
        .collect()
        .await
        .map(http_body_util::Collected::to_bytes)
        .map_err(|e| Status::bad_request(format!("cannot read the request body: {e}")))
}
