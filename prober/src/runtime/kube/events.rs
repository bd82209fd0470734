//! Kubernetes Events for what changed since the last scheduled run, in the agents' namespace and
//! about the remembered report's `ConfigMap` there, so that `kubectl get events -n prober-system` and every event exporter already in place see
//! a new firewall gap or an expired CNI token without anyone reading the report.

use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use kube::Api;
use kube::api::PostParams;

/// One event to emit: why (`FirewallGap`, `CredentialExpiredResolved`) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub reason: String,
    pub message: String,
    /// `Warning` rather than `Normal`.
    pub warning: bool,
}

/// Most events one run emits; past this one more event says how many were left out, so a
/// cluster that breaks everywhere at once does not flood the API server.
pub const MAX_EVENTS: usize = 20;
/// The API server truncates longer messages anyway; keep them whole-word readable.
const MAX_MESSAGE: usize = 1000;
/// Each create gives up after this.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum EventError {
    #[error("cannot create the event {reason} in namespace {namespace}: {source}")]
    Create {
        reason: String,
        namespace: String,
        source: kube::Error,
        /// Events created before this one.
        created: usize,
    },
    #[error("creating the event {reason} in namespace {namespace}: no answer within {secs} s")]
    Deadline {
        reason: String,
        namespace: String,
        secs: u64,
        created: usize,
    },
    #[error("event {reason}: {source}")]
    Build {
        reason: String,
        source: serde_json::Error,
    },
}

impl EventError {
    /// How many events were created before this error.
    #[must_use]
    pub fn created(&self) -> usize {
        match self {
            Self::Create { created, .. } | Self::Deadline { created, .. } => *created,
            Self::Build { .. } => 0,
        }
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max.saturating_sub(3);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// The Event object: about the `ConfigMap` that remembers the report (written before the
/// events, in the same namespace). The API server's `legacyValidateEvent`
/// (kubernetes/kubernetes `pkg/apis/core/validation/events.go`) requires an event without
/// `eventTime` to be in its involved object's namespace, and one about a cluster-scoped object
/// (a Namespace) to be in "" or "default": the agents' Namespace itself would be refused (422).
fn event(namespace: &str, n: &Notice, now: &str) -> Result<Event, EventError> {
    let instance = std::env::var("HOSTNAME").unwrap_or_else(|_| "prober".to_string());
    let v = serde_json::json!({
        "metadata": {
            "generateName": "prober-",
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "prober", "app.kubernetes.io/managed-by": "prober"},
        },
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": super::memory::CONFIGMAP,
            "namespace": namespace,
        },
        "reason": n.reason,
        "message": truncate(&n.message, MAX_MESSAGE),
        "type": if n.warning { "Warning" } else { "Normal" },
        "count": 1,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "source": {"component": "prober"},
        "reportingComponent": "prober",
        "reportingInstance": truncate(&instance, 128),
        "action": "Diagnose",
    });
    serde_json::from_value(v).map_err(|source| EventError::Build {
        reason: n.reason.clone(),
        source,
    })
}

/// Creates one event per notice (at most [`MAX_EVENTS`], then one saying how many more), each
/// under [`REQUEST_TIMEOUT`]. Returns how many were created; stops at the first failure.
pub async fn emit(
    client: &kube::Client,
    namespace: &str,
    notices: &[Notice],
) -> Result<usize, EventError> {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let mut list: Vec<Notice> = notices.iter().take(MAX_EVENTS).cloned().collect();
    if notices.len() > MAX_EVENTS {
        list.push(Notice {
            reason: "ProberTruncated".into(),
            message: format!(
                "{} more changes were not sent as events; see the report (prober report, or the \
                 prober-last-report ConfigMap)",
                notices.len() - MAX_EVENTS
            ),
            warning: true,
        });
    }
    let mut created = 0;
    let pp = PostParams::default();
    for n in &list {
        let ev = event(namespace, n, &now)?;
        let create = api.create(&pp, &ev);
        match tokio::time::timeout(REQUEST_TIMEOUT, create).await {
            Ok(Ok(_)) => created += 1,
            Ok(Err(source)) => {
                return Err(EventError::Create {
                    reason: n.reason.clone(),
                    namespace: namespace.to_string(),
                    source,
                    created,
                });
            }
            Err(_) => {
                return Err(EventError::Deadline {
                    reason: n.reason.clone(),
                    namespace: namespace.to_string(),
                    secs: REQUEST_TIMEOUT.as_secs(),
                    created,
                });
            }
        }
    }
    Ok(created)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `legacyValidateEvent` (kubernetes/kubernetes `pkg/apis/core/validation/events.go`) for
    /// an event without `eventTime`: an involved object without a namespace only in "" or
    /// "default", else the event's namespace must be the involved object's.
    fn legacy_namespace_rule(e: &Event) -> bool {
        let ns = e.metadata.namespace.as_deref().unwrap_or_default();
        match e.involved_object.namespace.as_deref().unwrap_or_default() {
            "" => ns.is_empty() || ns == "default",
            involved => ns == involved,
        }
    }

    #[test]
    fn an_event_in_the_agents_namespace_is_about_an_object_in_it() {
        let n = Notice {
            reason: "FirewallGap".into(),
            message: "udp/8472 n1 -> n3".into(),
            warning: true,
        };
        let e = event("prober-system", &n, "2026-01-02T03:04:05Z").unwrap();
        assert!(
            e.event_time.is_none(),
            "a core/v1 event: the legacy rule applies"
        );
        assert!(legacy_namespace_rule(&e), "{:?}", e.involved_object);
        assert_eq!(e.involved_object.kind.as_deref(), Some("ConfigMap"));
        assert_eq!(
            e.involved_object.name.as_deref(),
            Some(super::super::memory::CONFIGMAP)
        );
    }

    #[test]
    fn an_event_is_typed_by_urgency() {
        let n = Notice {
            reason: "FirewallGap".into(),
            message: "x".repeat(5000),
            warning: true,
        };
        let e = event("prober-system", &n, "2026-01-02T03:04:05Z").unwrap();
        assert_eq!(e.type_.as_deref(), Some("Warning"));
        assert!(e.message.unwrap().len() <= MAX_MESSAGE);
        let ok = Notice {
            warning: false,
            ..n
        };
        let e = event("prober-system", &ok, "2026-01-02T03:04:05Z").unwrap();
        assert_eq!(e.type_.as_deref(), Some("Normal"));
    }
}
