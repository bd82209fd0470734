//! Who a request is (a bearer token: the cluster admin or the coordinator) and what RBAC lets
//! the coordinator do.

use hyper::Request;
use hyper::body::Incoming;

use super::super::store::Kind;
use super::super::{Inner, rbac};
use super::{Route, Status};

/// Who a request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum User {
    Admin,
    Coordinator,
}

pub(super) fn authenticate(inner: &Inner, req: &Request<Incoming>) -> Result<User, Status> {
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

/// Whether RBAC lets the coordinator do `verb` on the route (the cluster admin may do all).
pub(super) fn authorize(
    inner: &Inner,
    user: User,
    k: &Kind,
    r: &Route,
    v: &'static str,
) -> Result<(), Status> {
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
    Ok(())
}
