//! The failures the front answers, as the API server reports them: `Status` objects with the
//! HTTP codes, reasons and wording the real server uses.

use hyper::Response;
use serde_json::{Value, json};

use super::super::store::Kind;
use super::{Body, json_response};

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
    pub(super) fn new(code: u16, reason: &'static str, message: String) -> Self {
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

    pub(super) fn response(&self) -> Response<Body> {
        let mut r = json_response(self.code, &self.body());
        if let Some(secs) = self.retry_after {
            r.headers_mut()
                .insert("retry-after", hyper::header::HeaderValue::from(secs));
        }
        r
    }
}
