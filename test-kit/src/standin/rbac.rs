//! RBAC for the coordinator's token, on every request, from the Roles, ClusterRoles and their
//! bindings stored (the project's own `deploy/` RBAC): a ClusterRoleBinding grants everywhere, a
//! RoleBinding in its namespace only. A rule allows a request when its apiGroups, resources,
//! verbs and (for requests naming one object) resourceNames all match, `*` matching anything
//! (`plugin/pkg/auth/authorizer/rbac/rbac.go` and `pkg/apis/rbac/v1/evaluation_helpers.go`,
//! `RuleAllows`); the 403 is worded as `plugin/pkg/auth/authorizer/rbac` and the apiserver's
//! `responsewriters.forbiddenMessage` word it.

use serde_json::Value;

use super::api::Status;
use super::store::{Key, Kind, Store, index};
use super::{Inner, lock};

fn has(list: &Value, want: &str) -> bool {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .any(|v| v == want || v == "*")
}

fn rule_allows(rule: &Value, group: &str, resource: &str, verb: &str, name: Option<&str>) -> bool {
    let names = rule["resourceNames"].as_array().map_or(0, Vec::len);
    has(&rule["apiGroups"], group)
        && has(&rule["resources"], resource)
        && has(&rule["verbs"], verb)
        && (names == 0 || name.is_some_and(|n| has(&rule["resourceNames"], n)))
}

fn binds(binding: &Value, sa: &(String, String)) -> bool {
    binding["subjects"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|s| {
            s["kind"] == "ServiceAccount"
                && s["namespace"] == sa.0.as_str()
                && s["name"] == sa.1.as_str()
        })
}

fn role_rules(s: &Store, role_ref: &Value, ns: &str) -> Vec<Value> {
    let name = role_ref["name"].as_str().unwrap_or_default();
    let role = match role_ref["kind"].as_str() {
        Some("ClusterRole") => s.get(&Key::new(index("clusterroles"), "", name)),
        _ => s.get(&Key::new(index("roles"), ns, name)),
    };
    role.and_then(|r| r["rules"].as_array().cloned())
        .unwrap_or_default()
}

pub fn authorize(
    inner: &Inner,
    k: &Kind,
    resource: &str,
    verb: &str,
    ns: Option<&str>,
    name: Option<&str>,
) -> Result<(), Status> {
    let sa = &inner.config.coordinator;
    let s = lock(&inner.store);
    let mut rules: Vec<Value> = Vec::new();
    for b in s.list(index("clusterrolebindings"), None) {
        if binds(b, sa) {
            rules.extend(role_rules(&s, &b["roleRef"], ""));
        }
    }
    if let Some(ns) = ns {
        for b in s.list(index("rolebindings"), Some(ns)) {
            if binds(b, sa) {
                rules.extend(role_rules(&s, &b["roleRef"], ns));
            }
        }
    }
    if rules
        .iter()
        .any(|r| rule_allows(r, k.group, resource, verb, name))
    {
        return Ok(());
    }
    let scope = match ns {
        Some(ns) => format!("in the namespace {ns:?}"),
        None => "at the cluster scope".into(),
    };
    let why = format!(
        "User \"system:serviceaccount:{}:{}\" cannot {verb} resource {resource:?} in API group {:?} {scope}",
        sa.0, sa.1, k.group
    );
    Err(Status::forbidden(k, name.unwrap_or_default(), &why))
}
