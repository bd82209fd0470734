//! The reading verbs: get, and list (paginated) with label and field selectors, which watch
//! shares.

use hyper::Response;
use serde_json::{Value, json};

use super::super::store::{KINDS, Key};
use super::super::{Inner, lock};
use super::{Body, Query, Route, Status, json_response, param};

pub(super) fn get(inner: &Inner, r: &Route) -> Result<Response<Body>, Status> {
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
    labels: super::super::select::Labels,
    fields: super::super::select::Fields,
}

impl Selectors {
    pub fn parse(q: &Query) -> Result<Self, Status> {
        let bad = |e: super::super::select::BadSelector| Status::bad_request(e.to_string());
        Ok(Self {
            labels: super::super::select::Labels::parse(
                param(q, "labelSelector").unwrap_or_default(),
            )
            .map_err(bad)?,
            fields: super::super::select::Fields::parse(
                param(q, "fieldSelector").unwrap_or_default(),
            )
            .map_err(bad)?,
        })
    }

    #[must_use]
    pub fn matches(&self, o: &Value) -> bool {
        self.labels.matches(&o["metadata"]["labels"]) && self.fields.matches(o)
    }
}

pub(super) fn list(inner: &Inner, r: &Route, q: &Query) -> Result<Response<Body>, Status> {
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
