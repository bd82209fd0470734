//! Where a request points (`/api/v1/...` or `/apis/GROUP/VERSION/...`), its query, and the
//! verb it asks for.

use hyper::Method;

use super::super::store::kind_at;

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

pub(super) fn flag(q: &Query, key: &str) -> bool {
    matches!(param(q, key), Some("1" | "true"))
}

/// The request's verb, as RBAC names it (`staging/src/k8s.io/apiserver/pkg/endpoints/request/
/// requestinfo.go`).
pub(super) fn verb(method: &Method, r: &Route, q: &Query) -> &'static str {
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
