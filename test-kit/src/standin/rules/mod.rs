//! The API server's rules that bite prober, one file each, each citing the Kubernetes source it
//! follows: what a create goes through (admission, defaults, validation) before it is stored.

pub mod daemonset_restart;
pub mod event_namespace;
pub mod host_ports;
pub mod namespace_lifecycle;
pub mod pod_grace;
pub mod pod_security;

use serde_json::Value;

use super::api::Status;
use super::store::{KINDS, Store};

/// Admission, defaulting and validation of a new object of `kind` in `ns`, in the API server's
/// order: the namespace lifecycle admission plugin first, then defaults, then validation, then
/// Pod Security admission (pods only).
pub fn admit(store: &Store, kind: usize, ns: &str, object: &mut Value) -> Result<(), Status> {
    let k = &KINDS[kind];
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if k.namespaced {
        namespace_lifecycle::admit(store, k, ns, &name)?;
    }
    match k.kind {
        "Pod" => {
            daemonset_restart::default_restart_policy(&mut object["spec"]);
            host_ports::default_host_ports(&mut object["spec"]);
            pod_security::admit(store, ns, &name, object)?;
        }
        "DaemonSet" => {
            daemonset_restart::default_restart_policy(&mut object["spec"]["template"]["spec"]);
            daemonset_restart::validate(&name, object)?;
        }
        "Event" => event_namespace::validate(ns, &name, object)?,
        _ => {}
    }
    Ok(())
}
