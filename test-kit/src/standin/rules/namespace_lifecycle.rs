//! Creating in a namespace that does not exist is 404; in one being deleted, 403 until it is
//! gone. Kubernetes: `plugin/pkg/admission/namespace/lifecycle/admission.go` (`Admit`: "unable
//! to create new content in namespace %s because it is being terminated", `NewForbidden`, and
//! `NewNotFound` for a namespace that does not exist).

use super::super::api::Status;
use super::super::store::{Key, Kind, Store, index};

pub fn admit(store: &Store, k: &Kind, ns: &str, name: &str) -> Result<(), Status> {
    let Some(n) = store.get(&Key::new(index("namespaces"), "", ns)) else {
        return Err(Status::not_found("", "namespaces", ns));
    };
    if n["status"]["phase"] == "Terminating" {
        return Err(Status::forbidden(
            k,
            name,
            &format!(
                "unable to create new content in namespace {ns} because it is being terminated"
            ),
        )
        .cause("NamespaceTerminating", ns));
    }
    Ok(())
}
