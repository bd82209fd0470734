//! The objects the stand-in holds: one resource version counter for all of them, as etcd has,
//! and the history of changes that watches replay from a version.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// A resource the stand-in serves: only the kinds prober reads or writes, and the RBAC kinds
/// its own `deploy/` manifests carry.
#[derive(Debug)]
pub struct Kind {
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
}

impl Kind {
    /// `v1` or `apps/v1`.
    #[must_use]
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

const fn k(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
) -> Kind {
    Kind {
        group,
        version,
        plural,
        kind,
        namespaced,
    }
}

pub static KINDS: &[Kind] = &[
    k("", "v1", "nodes", "Node", false),
    k("", "v1", "namespaces", "Namespace", false),
    k("", "v1", "pods", "Pod", true),
    k("", "v1", "services", "Service", true),
    k("", "v1", "endpoints", "Endpoints", true),
    k("", "v1", "configmaps", "ConfigMap", true),
    k("", "v1", "secrets", "Secret", true),
    k("", "v1", "serviceaccounts", "ServiceAccount", true),
    k("", "v1", "events", "Event", true),
    k("apps", "v1", "daemonsets", "DaemonSet", true),
    k("apps", "v1", "deployments", "Deployment", true),
    k("batch", "v1", "cronjobs", "CronJob", true),
    k(
        "discovery.k8s.io",
        "v1",
        "endpointslices",
        "EndpointSlice",
        true,
    ),
    k(
        "networking.k8s.io",
        "v1",
        "servicecidrs",
        "ServiceCIDR",
        false,
    ),
    k(
        "networking.k8s.io",
        "v1",
        "networkpolicies",
        "NetworkPolicy",
        true,
    ),
    k(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterroles",
        "ClusterRole",
        false,
    ),
    k(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        false,
    ),
    k("rbac.authorization.k8s.io", "v1", "roles", "Role", true),
    k(
        "rbac.authorization.k8s.io",
        "v1",
        "rolebindings",
        "RoleBinding",
        true,
    ),
];

/// The index of the kind served at `group/version/plural`.
#[must_use]
pub fn kind_at(group: &str, version: &str, plural: &str) -> Option<usize> {
    KINDS
        .iter()
        .position(|k| k.group == group && k.version == version && k.plural == plural)
}

/// The index of the kind an object names (`apiVersion`, `kind`).
#[must_use]
pub fn kind_of(api_version: &str, kind: &str) -> Option<usize> {
    KINDS
        .iter()
        .position(|k| k.api_version() == api_version && k.kind == kind)
}

/// The index of a plural the stand-in serves (a test's own typo panics, naming it).
#[must_use]
pub fn index(plural: &str) -> usize {
    KINDS
        .iter()
        .position(|k| k.plural == plural)
        .unwrap_or_else(|| panic!("the stand-in serves no {plural}"))
}

/// Where an object lives: its kind, namespace ("" when cluster-scoped) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    pub kind: usize,
    pub ns: String,
    pub name: String,
}

impl Key {
    #[must_use]
    pub fn new(kind: usize, ns: &str, name: &str) -> Self {
        Self {
            kind,
            ns: ns.to_string(),
            name: name.to_string(),
        }
    }

    /// The key of `object` of kind `kind`.
    #[must_use]
    pub fn of(kind: usize, object: &Value) -> Self {
        let meta = &object["metadata"];
        Self::new(
            kind,
            meta["namespace"].as_str().unwrap_or_default(),
            meta["name"].as_str().unwrap_or_default(),
        )
    }
}

/// One change, as a watch sends it.
#[derive(Debug, Clone)]
pub struct Change {
    pub rv: u64,
    pub kind: usize,
    pub ty: &'static str,
    pub object: Value,
}

#[derive(Debug, Default)]
pub struct Store {
    rv: u64,
    uids: u64,
    objects: BTreeMap<Key, Value>,
    history: Vec<Change>,
    /// Watches from a version older than this are told 410 Gone (etcd compacted it).
    pub compacted: u64,
}

/// Now, as the API server writes timestamps (RFC 3339, seconds, UTC).
#[must_use]
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    i64::try_from(secs)
        .ok()
        .and_then(|s| k8s_openapi::jiff::Timestamp::from_second(s).ok())
        .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
        .to_string()
}

impl Store {
    #[must_use]
    pub fn rv(&self) -> u64 {
        self.rv
    }

    #[must_use]
    pub fn get(&self, key: &Key) -> Option<&Value> {
        self.objects.get(key)
    }

    /// The objects of a kind, in one namespace or (`None`) all.
    #[must_use]
    pub fn list(&self, kind: usize, ns: Option<&str>) -> Vec<&Value> {
        self.objects
            .iter()
            .filter(|(k, _)| k.kind == kind && ns.is_none_or(|n| k.ns == n))
            .map(|(_, v)| v)
            .collect()
    }

    /// Every key of every kind in `ns`.
    #[must_use]
    pub fn keys_in(&self, ns: &str) -> Vec<Key> {
        self.objects
            .keys()
            .filter(|k| k.ns == ns)
            .cloned()
            .collect()
    }

    fn record(&mut self, kind: usize, ty: &'static str, object: Value) {
        self.history.push(Change {
            rv: self.rv,
            kind,
            ty,
            object,
        });
    }

    /// Stores a new object: type fields, uid, creation time and resource version set.
    pub fn create(&mut self, kind: usize, mut object: Value) -> Value {
        let k = &KINDS[kind];
        self.rv += 1;
        self.uids += 1;
        object["apiVersion"] = json!(k.api_version());
        object["kind"] = json!(k.kind);
        let meta = &mut object["metadata"];
        meta["uid"] = json!(format!("00000000-0000-4000-8000-{:012x}", self.uids));
        meta["resourceVersion"] = json!(self.rv.to_string());
        meta["creationTimestamp"] = json!(now_rfc3339());
        if meta.get("generation").is_none() && kind != index("pods") {
            meta["generation"] = json!(1);
        }
        let key = Key::of(kind, &object);
        self.objects.insert(key, object.clone());
        self.record(kind, "ADDED", object.clone());
        object
    }

    /// Replaces a stored object (its uid and creation time kept), with a new version.
    pub fn update(&mut self, kind: usize, mut object: Value) -> Value {
        let key = Key::of(kind, &object);
        self.rv += 1;
        if let Some(old) = self.objects.get(&key) {
            for f in ["uid", "creationTimestamp"] {
                object["metadata"][f] = old["metadata"][f].clone();
            }
        }
        object["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        self.objects.insert(key, object.clone());
        self.record(kind, "MODIFIED", object.clone());
        object
    }

    /// Removes an object; the watch sees it deleted at a new version.
    pub fn remove(&mut self, key: &Key) -> Option<Value> {
        let mut object = self.objects.remove(key)?;
        self.rv += 1;
        object["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        self.record(key.kind, "DELETED", object.clone());
        Some(object)
    }

    /// The changes after version `rv`, of one kind.
    #[must_use]
    pub fn changes_after(&self, rv: u64, kind: usize) -> Vec<Change> {
        let start = self.history.partition_point(|c| c.rv <= rv);
        self.history[start..]
            .iter()
            .filter(|c| c.kind == kind)
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_seconds_in_utc_and_versions_grow() {
        let t = now_rfc3339();
        assert_eq!(t.len(), 20, "{t}");
        assert!(t.ends_with('Z') && t.as_bytes()[10] == b'T', "{t}");
        let mut s = Store::default();
        let a = s.create(
            index("configmaps"),
            json!({"metadata": {"name": "a", "namespace": "n"}}),
        );
        let b = s.update(index("configmaps"), a.clone());
        assert_eq!(a["metadata"]["uid"], b["metadata"]["uid"]);
        assert_eq!(a["metadata"]["resourceVersion"], "1");
        assert_eq!(b["metadata"]["resourceVersion"], "2");
        assert_eq!(s.changes_after(1, index("configmaps")).len(), 1);
        s.remove(&Key::of(index("configmaps"), &b));
        assert!(s.list(index("configmaps"), None).is_empty());
    }
}
