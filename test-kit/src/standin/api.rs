//! The HTTPS front: TLS, authentication by bearer token, routing of `/api/v1/...` and
//! `/apis/GROUP/VERSION/...`, RBAC, and the verbs: get, list (paginated), watch, create,
//! server-side apply, merge patch, delete (with preconditions), and the `exec` upgrade.
//! Errors are `Status` objects with the codes and reasons the real server uses.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::UnsyncBoxBody};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

use super::store::{KINDS, Key, Kind, kind_at, kind_of};
use super::{Inner, Seen, lock, rbac, rules, watch};

mod write;
use write::{delete, patch, update};

pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// The largest request body read (an apply of a ConfigMap near its 1 MiB limit fits).
const MAX_BODY: usize = 3 << 20;

/// A failure, as the API server reports it: a `Status` object with its HTTP code.
#[derive(Debug, Clone)]
pub struct Status {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Value,
    pub retry_after: Option<u32>,
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

fn group_resource(k: &Kind) -> String {
    if k.group.is_empty() {
        k.plural.to_string()
    } else {
        format!("{}.{}", k.plural, k.group)
    }
}

impl Status {
    fn new(code: u16, reason: &'static str, message: String) -> Self {
        Self {
            code,
            reason,
            message,
            details: json!({}),
            retry_after: None,
        }
    }

    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        let gr = if group.is_empty() {
            plural.to_string()
        } else {
            format!("{plural}.{group}")
        };
        let mut s = Self::new(404, "NotFound", format!("{gr} {name:?} not found"));
        s.details = json!({"name": name, "group": group, "kind": plural});
        s
    }

    pub fn forbidden(k: &Kind, name: &str, why: &str) -> Self {
        let gr = group_resource(k);
        let subject = if name.is_empty() {
            gr
        } else {
            format!("{gr} {name:?}")
        };
        let mut s = Self::new(403, "Forbidden", format!("{subject} is forbidden: {why}"));
        s.details = json!({"name": name, "group": k.group, "kind": k.plural});
        s
    }

    pub fn cause(mut self, reason: &str, message: &str) -> Self {
        self.details["causes"] = json!([{"reason": reason, "message": message}]);
        self
    }

    pub fn conflict(k: &Kind, name: &str, why: &str) -> Self {
        let mut s = Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} {name:?}: {why}",
                group_resource(k)
            ),
        );
        s.details = json!({"name": name, "group": k.group, "kind": k.plural});
        s
    }

    pub fn already_exists(k: &Kind, name: &str) -> Self {
        let mut s = Self::new(
            409,
            "AlreadyExists",
            format!("{} {name:?} already exists", group_resource(k)),
        );
        s.details = json!({"name": name, "group": k.group, "kind": k.plural});
        s
    }

    /// 422, as `apimachinery/pkg/api/errors.NewInvalid` words it.
    pub fn invalid(kind: &str, group: &str, name: &str, field: &str, what: &str) -> Self {
        let qualified = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let mut s = Self::new(
            422,
            "Invalid",
            format!("{qualified} {name:?} is invalid: {field}: {what}"),
        );
        s.details = json!({"name": name, "group": group, "kind": kind,
            "causes": [{"reason": "FieldValueInvalid", "message": what, "field": field}]});
        s
    }

    /// 429 with `Retry-After` in the header and in the details, as the API server's max-in-flight
    /// and priority-and-fairness filters answer
    /// (`staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go`).
    pub fn too_many_requests(retry_after: u32) -> Self {
        let mut s = Self::new(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.".into(),
        );
        s.details = json!({"retryAfterSeconds": retry_after});
        s.retry_after = Some(retry_after);
        s
    }

    pub fn bad_request(message: String) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn body(&self) -> Value {
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": self.message, "reason": self.reason,
            "details": self.details, "code": self.code,
        })
    }

    fn response(&self) -> Response<Body> {
        let mut r = json_response(self.code, &self.body());
        if let Some(secs) = self.retry_after {
            r.headers_mut()
                .insert("retry-after", hyper::header::HeaderValue::from(secs));
        }
        r
    }
}

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed_unsync()
}

pub fn json_response(code: u16, v: &Value) -> Response<Body> {
    let mut r = Response::new(full(v.to_string()));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

pub fn tls_config(pki: &super::pki::Pki) -> Result<Arc<rustls::ServerConfig>, rustls::Error> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let bad = |e: rustls::pki_types::pem::Error| rustls::Error::General(e.to_string());
    let certs = CertificateDer::pem_slice_iter(pki.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(bad)?;
    let key = PrivateKeyDer::from_pem_slice(pki.key_pem.as_bytes()).map_err(bad)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Accepts TLS connections until the runtime stops.
pub async fn serve(
    inner: Arc<Inner>,
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let acceptor = acceptor.clone();
        let inner = inner.clone();
        tokio::spawn(async move {
            let Ok(Ok(stream)) =
                tokio::time::timeout(std::time::Duration::from_secs(10), acceptor.accept(tcp))
                    .await
            else {
                return;
            };
            let service = hyper::service::service_fn(move |req| handle(inner.clone(), req));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades()
                .await;
        });
    }
}

/// Who a request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum User {
    Admin,
    Coordinator,
}

/// Where a request points.
#[derive(Debug, Clone)]
pub struct Route {
    pub kind: usize,
    pub ns: Option<String>,
    pub name: Option<String>,
    pub sub: Option<String>,
}

/// `/api/v1/...` or `/apis/G/V/...`, split into kind, namespace, name and subresource.
#[must_use]
pub fn route(path: &str) -> Option<Route> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match parts.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    let at = |plural: &str| kind_at(group, version, plural);
    let r = |kind, ns: Option<&str>, name: Option<&str>, sub: Option<&str>| {
        Some(Route {
            kind,
            ns: ns.map(String::from),
            name: name.map(String::from),
            sub: sub.map(String::from),
        })
    };
    match rest {
        [plural] => r(at(plural)?, None, None, None),
        ["namespaces", ns, plural] => r(at(plural)?, Some(ns), None, None),
        ["namespaces", ns, plural, name] => r(at(plural)?, Some(ns), Some(name), None),
        ["namespaces", ns, plural, name, sub] => r(at(plural)?, Some(ns), Some(name), Some(sub)),
        [plural, name] => r(at(plural)?, None, Some(name), None),
        [plural, name, sub] => r(at(plural)?, None, Some(name), Some(sub)),
        _ => None,
    }
}

pub type Query = Vec<(String, String)>;

pub fn param<'a>(q: &'a Query, key: &str) -> Option<&'a str> {
    q.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

fn flag(q: &Query, key: &str) -> bool {
    matches!(param(q, key), Some("1" | "true"))
}

async fn handle(inner: Arc<Inner>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or_default().to_string();
    let resp = match dispatch(&inner, req).await {
        Ok(r) => r,
        Err(s) => s.response(),
    };
    lock(&inner.seen).push(Seen {
        method,
        path,
        query,
        code: resp.status().as_u16(),
        at: std::time::Instant::now(),
    });
    Ok(resp)
}

fn authenticate(inner: &Inner, req: &Request<Incoming>) -> Result<User, Status> {
    let token = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    if token == inner.admin_token {
        Ok(User::Admin)
    } else if token == inner.coordinator_token {
        Ok(User::Coordinator)
    } else {
        Err(Status::new(401, "Unauthorized", "Unauthorized".into()))
    }
}

/// The request's verb, as RBAC names it (`staging/src/k8s.io/apiserver/pkg/endpoints/request/
/// requestinfo.go`).
fn verb(method: &Method, r: &Route, q: &Query) -> &'static str {
    match *method {
        Method::GET if r.name.is_none() && flag(q, "watch") => "watch",
        Method::GET if r.name.is_none() => "list",
        Method::GET => "get",
        Method::POST => "create",
        Method::PATCH => "patch",
        Method::PUT => "update",
        Method::DELETE if r.name.is_none() => "deletecollection",
        _ => "delete",
    }
}

#[allow(clippy::too_many_lines)] // One match over the verbs reads best whole.
async fn dispatch(inner: &Arc<Inner>, req: Request<Incoming>) -> Result<Response<Body>, Status> {
    let user = authenticate(inner, &req)?;
    {
        let mut f = lock(&inner.faults);
        if f.throttle > 0 {
            f.throttle -= 1;
            return Err(Status::too_many_requests(1));
        }
    }
    let slow = lock(&inner.faults).slow_writes;
    if let Some(d) = slow.filter(|_| req.method() != Method::GET) {
        tokio::time::sleep(d).await;
    }
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
    if user == User::Coordinator && inner.config.rbac {
        let resource = match &r.sub {
            Some(sub) => format!("{}/{sub}", k.plural),
            None => k.plural.to_string(),
        };
        let mut verbs = vec![v];
        // A WebSocket exec is a GET: authorised as `get`, and (the
        // AuthorizePodWebsocketUpgradeCreatePermission gate, on from 1.35) as `create` too
        // (staging/src/k8s.io/apiserver/pkg/endpoints/filters/authorization.go).
        if r.sub.as_deref() == Some("exec") {
            verbs = vec!["get", "create"];
        }
        for v in verbs {
            rbac::authorize(inner, k, &resource, v, r.ns.as_deref(), r.name.as_deref())?;
        }
    }
    if r.sub.as_deref() == Some("exec") {
        if let Some((n, secs)) = lock(&inner.faults).throttle_exec.as_mut()
            && *n > 0
        {
            *n -= 1;
            return Err(Status::too_many_requests(*secs));
        }
        return super::exec::upgrade(inner.clone(), req, &r, &q);
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

async fn read_body(req: Request<Incoming>) -> Result<Bytes, Status> {
    let limited = http_body_util::Limited::new(req.into_body(), MAX_BODY);
    limited
        .collect()
        .await
        .map(http_body_util::Collected::to_bytes)
        .map_err(|e| Status::bad_request(format!("cannot read the request body: {e}")))
}

fn get(inner: &Inner, r: &Route) -> Result<Response<Body>, Status> {
    let k = &KINDS[r.kind];
    let name = r.name.as_deref().unwrap_or_default();
    let key = Key::new(r.kind, r.ns.as_deref().unwrap_or_default(), name);
    match lock(&inner.store).get(&key) {
        Some(o) => Ok(json_response(200, o)),
        None => Err(Status::not_found(k.group, k.plural, name)),
    }
}

/// The objects of a list or watch request that its selectors select.
pub fn selected(
    inner: &Inner,
    r: &Route,
    q: &Query,
) -> Result<(Vec<Value>, u64, Selectors), Status> {
    let sel = Selectors::parse(q)?;
    let s = lock(&inner.store);
    let items = s
        .list(r.kind, r.ns.as_deref())
        .into_iter()
        .filter(|o| sel.matches(o))
        .cloned()
        .collect();
    Ok((items, s.rv(), sel))
}

/// A request's label and field selectors.
#[derive(Debug, Clone, Default)]
pub struct Selectors {
    labels: super::select::Labels,
    fields: super::select::Fields,
}

impl Selectors {
    pub fn parse(q: &Query) -> Result<Self, Status> {
        let bad = |e: super::select::BadSelector| Status::bad_request(e.to_string());
        Ok(Self {
            labels: super::select::Labels::parse(param(q, "labelSelector").unwrap_or_default())
                .map_err(bad)?,
            fields: super::select::Fields::parse(param(q, "fieldSelector").unwrap_or_default())
                .map_err(bad)?,
        })
    }

    #[must_use]
    pub fn matches(&self, o: &Value) -> bool {
        self.labels.matches(&o["metadata"]["labels"]) && self.fields.matches(o)
    }
}

fn list(inner: &Inner, r: &Route, q: &Query) -> Result<Response<Body>, Status> {
    let k = &KINDS[r.kind];
    let (items, rv, _) = selected(inner, r, q)?;
    // Pages: `continue` is the offset of the next one (opaque to clients, as the real token).
    let start: usize = param(q, "continue")
        .map(|c| {
            c.parse()
                .map_err(|_| Status::bad_request(format!("continue token {c:?} is invalid")))
        })
        .transpose()?
        .unwrap_or(0);
    let limit: usize = param(q, "limit")
        .and_then(|l| l.parse().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    let end = start.saturating_add(limit).min(items.len());
    let page = items.get(start..end).unwrap_or_default().to_vec();
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if end < items.len() {
        meta["continue"] = json!(end.to_string());
        meta["remainingItemCount"] = json!(items.len() - end);
    }
    Ok(json_response(
        200,
        &json!({"apiVersion": k.api_version(), "kind": format!("{}List", k.kind),
                "metadata": meta, "items": page}),
    ))
}

/// The characters of a `generateName` suffix (no vowels, as apimachinery's `rand.String`).
const CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn random_suffix() -> String {
    let mut b = [0u8; 5];
    let _ = super::getrandom_fill(&mut b);
    b.iter()
        .map(|x| CHARS[usize::from(*x) % CHARS.len()] as char)
        .collect()
}

/// An object from a manifest (`apiVersion`, `kind`, `metadata.namespace`), created as the
/// cluster admin would create it.
pub fn create_object(inner: &Inner, obj: Value) -> Result<Value, Status> {
    let kind = kind_of(
        obj["apiVersion"].as_str().unwrap_or_default(),
        obj["kind"].as_str().unwrap_or_default(),
    )
    .ok_or_else(|| {
        Status::bad_request(format!(
            "the stand-in serves no {} {}",
            obj["apiVersion"], obj["kind"]
        ))
    })?;
    let mut obj = obj;
    if KINDS[kind].namespaced && obj["metadata"]["namespace"].is_null() {
        obj["metadata"]["namespace"] = json!("default");
    }
    create(inner, kind, obj)
}

/// Creates an object through admission; 409 when it exists.
pub fn create(inner: &Inner, kind: usize, mut obj: Value) -> Result<Value, Status> {
    let k = &KINDS[kind];
    let ns = obj["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .is_empty()
    {
        let Some(prefix) = obj["metadata"]["generateName"].as_str() else {
            return Err(Status::invalid(
                k.kind,
                k.group,
                "",
                "metadata.name",
                "Required value: name or generateName is required",
            ));
        };
        obj["metadata"]["name"] = json!(format!("{prefix}{}", random_suffix()));
    }
    let made = {
        let mut s = lock(&inner.store);
        let key = Key::of(kind, &obj);
        rules::admit(&s, kind, &ns, &mut obj)?;
        if s.get(&key).is_some() {
            return Err(Status::already_exists(k, &key.name));
        }
        if k.kind == "Namespace" {
            obj["status"] = json!({"phase": "Active"});
        }
        s.create(kind, obj)
    };
    inner.changed();
    Ok(made)
}
