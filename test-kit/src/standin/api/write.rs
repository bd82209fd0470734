//! The writing verbs besides create: server-side apply and merge patch, update (PUT) with
//! optimistic concurrency, and delete with preconditions and graceful deletion.

use std::sync::Arc;

use hyper::Response;
use serde_json::{Value, json};

use super::super::store::{KINDS, Key};
use super::super::{Inner, lock};
use super::create::create;
use super::route::flag;
use super::{Body, Query, Route, Status, json_response, param};

/// Maps deep-merged: `patch`'s fields replace `base`'s, maps merge, `null` removes (RFC 7386).
fn merge(base: &mut Value, patch: &Value) {
    match (base.as_object_mut(), patch.as_object()) {
        (Some(b), Some(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    b.remove(k);
                } else {
                    merge(b.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        _ => *base = patch.clone(),
    }
}

/// The leaf fields of `patch` whose values differ in `current`, as `.a.b` paths.
fn differing(current: &Value, patch: &Value, at: &str, out: &mut Vec<String>) {
    match patch.as_object() {
        Some(p) => {
            for (k, v) in p {
                if at.is_empty() && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                differing(&current[k], v, &format!("{at}.{k}"), out);
            }
        }
        None if current != patch && !current.is_null() => out.push(at.to_string()),
        None => {}
    }
}

/// Server-side apply (`application/apply-patch+yaml`) and JSON merge patch. Apply needs a
/// `fieldManager` (400 otherwise); it creates the object when it does not exist; a field another
/// manager applied with a different value is a 409 conflict unless `force=true`
/// (`staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go`, structured-merge-diff's
/// conflict). Lists are replaced whole, not merged by key: a simplification.
pub(super) fn patch(
    inner: &Inner,
    r: &Route,
    q: &Query,
    content_type: &str,
    body: &[u8],
) -> Result<Response<Body>, Status> {
    let k = &KINDS[r.kind];
    let name = r.name.clone().unwrap_or_default();
    let ns = r.ns.clone().unwrap_or_default();
    let key = Key::new(r.kind, &ns, &name);
    let apply = content_type.starts_with("application/apply-patch");
    let p: Value = if apply {
        serde_saphyr::from_slice(body)
            .map_err(|e| Status::bad_request(format!("the apply patch is no YAML: {e}")))?
    } else if content_type.starts_with("application/merge-patch+json")
        || content_type.starts_with("application/strategic-merge-patch+json")
    {
        serde_json::from_slice(body)
            .map_err(|e| Status::bad_request(format!("the patch is no JSON: {e}")))?
    } else {
        return Err(Status::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/merge-patch+json, application/apply-patch+yaml (got {content_type:?})"
            ),
        ));
    };
    let manager = param(q, "fieldManager").unwrap_or_default().to_string();
    if apply && manager.is_empty() {
        return Err(Status::invalid(
            "PatchOptions",
            "meta.k8s.io",
            "",
            "fieldManager",
            "Required value: is required for apply patch",
        ));
    }
    let force = flag(q, "force");
    let current = lock(&inner.store).get(&key).cloned();
    let Some(mut current) = current else {
        if !apply {
            return Err(Status::not_found(k.group, k.plural, &name));
        }
        let mut obj = p;
        obj["metadata"]["name"] = json!(name);
        if k.namespaced {
            obj["metadata"]["namespace"] = json!(ns);
        }
        obj["metadata"]["managedFields"] =
            json!([{"manager": manager, "operation": "Apply", "apiVersion": k.api_version()}]);
        let made = create(inner, r.kind, obj)?;
        return Ok(json_response(201, &made));
    };
    if apply {
        let managers: Vec<String> = current["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["manager"].as_str().map(String::from))
            .collect();
        let others: Vec<&String> = managers.iter().filter(|m| **m != manager).collect();
        let mut fields = Vec::new();
        differing(&current, &p, "", &mut fields);
        if !force && !others.is_empty() && !fields.is_empty() {
            return Err(Status::conflict(
                k,
                &name,
                &format!(
                    "Apply failed with {} conflict(s): conflict with {:?}: {}",
                    fields.len(),
                    others[0],
                    fields.join(", ")
                ),
            ));
        }
        current["metadata"]["managedFields"] =
            json!([{"manager": manager, "operation": "Apply", "apiVersion": k.api_version()}]);
    }
    merge(&mut current, &p);
    current["metadata"]["name"] = json!(name);
    let updated = lock(&inner.store).update(r.kind, current);
    inner.changed();
    Ok(json_response(200, &updated))
}

/// Replaces an object (PUT). A `resourceVersion` in the body must be the stored one, else 409
/// "the object has been modified" (optimistic concurrency,
/// `staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go`, `Update`).
pub(super) fn update(inner: &Inner, r: &Route, body: &[u8]) -> Result<Response<Body>, Status> {
    let k = &KINDS[r.kind];
    let name = r.name.clone().unwrap_or_default();
    let mut obj: Value = serde_json::from_slice(body)
        .map_err(|e| Status::bad_request(format!("the body is no JSON object: {e}")))?;
    if obj["metadata"]["name"] != name.as_str() {
        return Err(Status::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({name})",
            obj["metadata"]["name"]
        )));
    }
    if k.namespaced {
        obj["metadata"]["namespace"] = json!(r.ns.clone().unwrap_or_default());
    }
    let key = Key::new(r.kind, r.ns.as_deref().unwrap_or_default(), &name);
    let mut s = lock(&inner.store);
    let Some(current) = s.get(&key) else {
        return Err(Status::not_found(k.group, k.plural, &name));
    };
    if let Some(want) = obj["metadata"]["resourceVersion"].as_str()
        && current["metadata"]["resourceVersion"] != want
    {
        return Err(Status::conflict(
            k,
            &name,
            "the object has been modified; please apply your changes to the latest version and try again",
        ));
    }
    let updated = s.update(r.kind, obj);
    drop(s);
    inner.changed();
    Ok(json_response(200, &updated))
}

/// Deletes, checking `preconditions` (uid, resourceVersion: 409 when they do not hold). A
/// namespace and a pod go gracefully (returned with `deletionTimestamp`; a pod with grace 0 at
/// once, `rules::pod_grace`); a namespace stays `Terminating` for `Config::terminating`, then
/// until its pods are gone; a DaemonSet's pods are garbage-collected.
pub(super) fn delete(inner: &Arc<Inner>, r: &Route, body: &[u8]) -> Result<Response<Body>, Status> {
    let k = &KINDS[r.kind];
    let name = r.name.clone().unwrap_or_default();
    let key = Key::new(r.kind, r.ns.as_deref().unwrap_or_default(), &name);
    let opts: Value = if body.is_empty() {
        json!({})
    } else {
        serde_json::from_slice(body)
            .map_err(|e| Status::bad_request(format!("DeleteOptions are no JSON: {e}")))?
    };
    let mut s = lock(&inner.store);
    let Some(current) = s.get(&key).cloned() else {
        return Err(Status::not_found(k.group, k.plural, &name));
    };
    // apiserver/pkg/registry/generic/registry/store.go: "Precondition failed: UID in
    // precondition: %v, UID in object meta: %v" as a 409 Conflict.
    let pre = &opts["preconditions"];
    for (field, meta) in [("uid", "uid"), ("resourceVersion", "resourceVersion")] {
        if let Some(want) = pre[field].as_str() {
            let have = current["metadata"][meta].as_str().unwrap_or_default();
            if want != have {
                let label = if field == "uid" {
                    "UID"
                } else {
                    "ResourceVersion"
                };
                return Err(Status::conflict(
                    k,
                    &name,
                    &format!(
                        "Precondition failed: {label} in precondition: {want}, {label} in object meta: {have}"
                    ),
                ));
            }
        }
    }
    let graceful = match k.kind {
        "Namespace" => true,
        "Pod" => super::super::rules::pod_grace::grace(&current, &opts) > 0,
        _ => false,
    };
    let out = if graceful {
        if current["metadata"]["deletionTimestamp"].is_string() {
            current
        } else {
            let mut o = current;
            o["metadata"]["deletionTimestamp"] = json!(super::super::store::now_rfc3339());
            if k.kind == "Namespace" {
                o["status"]["phase"] = json!("Terminating");
            }
            s.update(r.kind, o)
        }
    } else if k.kind == "Pod" {
        // Grace 0: gone at once, whatever its node's kubelet does; the answer is the pod.
        s.remove(&key).unwrap_or_default()
    } else {
        let gone = s.remove(&key);
        let uid = gone
            .as_ref()
            .and_then(|g| g["metadata"]["uid"].as_str().map(String::from));
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
               "details": {"name": name, "group": k.group, "kind": k.plural, "uid": uid}})
    };
    drop(s);
    if k.kind == "Namespace" {
        let ns = name.clone();
        let delay = inner.config.terminating;
        let inner2 = inner.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            super::super::kubelet::finish_namespace(&inner2, &ns).await;
        });
    }
    inner.changed();
    Ok(json_response(200, &out))
}
