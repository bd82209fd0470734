//! The create verb: a name from `generateName` if need be, admission, 409 when the object
//! exists.

use serde_json::{Value, json};

use super::super::store::{KINDS, Key, kind_of};
use super::super::{Inner, lock, rules};
use super::Status;

/// The characters of a `generateName` suffix (no vowels, as apimachinery's `rand.String`).
const CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn random_suffix() -> String {
    let mut b = [0u8; 5];
    let _ = super::super::getrandom_fill(&mut b);
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
