//! RBAC: every request of every mode is allowed by deploy/base, and every grant is used.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use crate::discover::*;
use prober::runtime::kube::discover::{build, read};
use serde_json::{Value, json};
use test_kit::mock::{
    Seen, created, discovery_answer, fixture_json, list_of, policy_list, respond, serve, split,
    status,
};

/// One granted (verb, group, resource, name) in one scope (a namespace, or everywhere).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Grant {
    pub(crate) scope: Option<String>,
    pub(crate) group: String,
    pub(crate) resource: String,
    pub(crate) verb: String,
    /// `None`: any name.
    pub(crate) name: Option<String>,
    /// Where it comes from, for the message.
    pub(crate) from: String,
}

pub(crate) struct Rbac {
    pub(crate) grants: Vec<Grant>,
}

/// What one request asks, as the API server's authoriser sees it.
#[derive(Debug)]
pub(crate) struct Attributes {
    verbs: Vec<&'static str>,
    group: String,
    resource: String,
    namespace: Option<String>,
    name: Option<String>,
}

pub(crate) fn attributes(s: &Seen) -> Attributes {
    let (path, q) = split(&s.uri);
    let seg: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (group, rest) = match seg.as_slice() {
        ["api", _v, rest @ ..] => (String::new(), rest.to_vec()),
        ["apis", g, _v, rest @ ..] => ((*g).to_string(), rest.to_vec()),
        _ => panic!("not an API path: {path}"),
    };
    let (namespace, rest) = match rest.as_slice() {
        ["namespaces", ns, r, tail @ ..] => (Some((*ns).to_string()), {
            let mut v = vec![*r];
            v.extend(tail);
            v
        }),
        other => (None, other.to_vec()),
    };
    let resource = match rest.get(2) {
        Some(sub) => format!("{}/{sub}", rest[0]),
        None => rest[0].to_string(),
    };
    let name = rest.get(1).map(|n| (*n).to_string());
    let verbs = match (s.method.as_str(), name.is_some()) {
        // A WebSocket exec is authorised as get, and from 1.35 also as create.
        ("GET", true) if resource == "pods/exec" => vec!["get", "create"],
        ("GET", true) => vec!["get"],
        ("GET", false) if q.contains_key("watch") => vec!["watch"],
        ("GET", false) => vec!["list"],
        ("POST", _) => vec!["create"],
        ("PUT", true) => vec!["update"],
        ("DELETE", true) => vec!["delete"],
        ("PATCH", _) => vec!["patch"],
        (m, _) => panic!("unexpected method {m} {path}"),
    };
    Attributes {
        verbs,
        group,
        resource,
        namespace,
        name,
    }
}

impl Rbac {
    /// The rules of deploy/base/rbac.yaml bound to the coordinator, and with `optional` those
    /// under deploy/base/optional/ too.
    pub(crate) fn load(optional: bool) -> Self {
        let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/base");
        let mut files = vec![base.join("rbac.yaml")];
        if optional {
            let mut extra: Vec<PathBuf> = std::fs::read_dir(base.join("optional"))
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            extra.sort();
            files.extend(extra);
        }
        let text: Vec<String> = files
            .iter()
            .map(|f| std::fs::read_to_string(f).unwrap())
            .collect();
        Self::of(&text.join("\n---\n"), "prober")
    }

    /// The rules bound to the `ServiceAccount` `subject` in prober-system by the objects of the
    /// multi-document YAML `text`.
    pub(crate) fn of(text: &str, subject: &str) -> Self {
        let docs: Vec<Value> = text
            .split("\n---")
            .map(|d| d.trim_start_matches("---").to_string())
            .filter(|d| {
                d.lines()
                    .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
            })
            .map(|d| serde_saphyr::from_str::<Value>(&d).unwrap())
            .collect();
        let role = |kind: &str, name: &str, ns: Option<&str>| {
            docs.iter()
                .find(|d| {
                    d["kind"] == kind
                        && d["metadata"]["name"] == name
                        && (kind == "ClusterRole" || d["metadata"]["namespace"].as_str() == ns)
                })
                .unwrap_or_else(|| panic!("no {kind} {name} in {ns:?}"))
        };
        let mut grants = Vec::new();
        let names_subject = |b: &Value| {
            b["subjects"].as_array().is_some_and(|subjects| {
                subjects.iter().any(|x| {
                    x["kind"] == "ServiceAccount"
                        && x["name"] == subject
                        && x["namespace"] == "prober-system"
                })
            })
        };
        for b in docs.iter().filter(|d| {
            (d["kind"] == "RoleBinding" || d["kind"] == "ClusterRoleBinding") && names_subject(d)
        }) {
            let scope = b["metadata"]["namespace"].as_str().map(String::from);
            let r = role(
                b["roleRef"]["kind"].as_str().unwrap(),
                b["roleRef"]["name"].as_str().unwrap(),
                scope.as_deref(),
            );
            for (i, rule) in r["rules"].as_array().unwrap().iter().enumerate() {
                let strs = |k: &str| -> Vec<String> {
                    rule[k]
                        .as_array()
                        .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect())
                        .unwrap_or_default()
                };
                let names: Vec<Option<String>> = match strs("resourceNames") {
                    n if n.is_empty() => vec![None],
                    n => n.into_iter().map(Some).collect(),
                };
                for group in strs("apiGroups") {
                    for resource in strs("resources") {
                        for verb in strs("verbs") {
                            for name in &names {
                                grants.push(Grant {
                                    scope: scope.clone(),
                                    group: group.clone(),
                                    resource: resource.clone(),
                                    verb: verb.clone(),
                                    name: name.clone(),
                                    from: format!(
                                        "{} {} rule {i} (bound in {})",
                                        r["kind"].as_str().unwrap(),
                                        r["metadata"]["name"].as_str().unwrap(),
                                        scope.as_deref().unwrap_or("the cluster")
                                    ),
                                });
                            }
                        }
                    }
                }
            }
        }
        Self { grants }
    }

    /// The grants that allow the request: one per verb it needs, or none if any is missing.
    pub(crate) fn allows(&self, s: &Seen) -> Vec<Grant> {
        let a = attributes(s);
        let mut used = Vec::new();
        for verb in &a.verbs {
            let found = self.grants.iter().find(|g| {
                g.verb == *verb
                    && g.group == a.group
                    && g.resource == a.resource
                    && (g.scope.is_none() || g.scope == a.namespace)
                    // resourceNames cannot limit list, watch or create.
                    && (g.name.is_none() || (g.name == a.name && matches!(*verb, "get" | "update" | "delete" | "patch")))
            });
            match found {
                Some(g) => used.push(g.clone()),
                None => return Vec::new(),
            }
        }
        used
    }
}

/// Every request one full run of `prober matrix` in deploy mode makes against `flavour`:
/// discovery, the permanent-install check, apply, wait, one exec, cleanup.
/// The grants that allow the requests `seen`; fails naming every request `rbac` (from `what`)
/// does not allow.
pub(crate) fn grants_used(rbac: &Rbac, seen: &[Seen], what: &str) -> BTreeSet<Grant> {
    let mut used = BTreeSet::new();
    let mut denied = BTreeSet::new();
    for s in seen {
        let grants = rbac.allows(s);
        if grants.is_empty() {
            denied.insert(format!("{} {} ({:?})", s.method, s.uri, attributes(s)));
        }
        used.extend(grants);
    }
    assert!(
        denied.is_empty(),
        "requests {what} does not allow:\n{}",
        denied.into_iter().collect::<Vec<_>>().join("\n")
    );
    used
}

pub(crate) async fn deploy_mode(flavour: &'static str) -> Vec<Seen> {
    use prober::runtime::kube::deploy::{self, Created};
    let spec = crate::apply::run_spec();
    let (client, server) = serve(Box::new(move |s| {
        let (path, _) = split(&s.uri);
        // Discovery's reads of the policies in the agents' namespace, and cleanup's list.
        if s.method == "GET" && policy_list(&path).is_some() {
            return discovery_answer(flavour, s);
        }
        if path.contains("/namespaces/prober-system/")
            || path == "/api/v1/namespaces"
            || path == "/api/v1/namespaces/prober-system"
        {
            if let Some(r) = crate::wait::agents_router(s, "r1") {
                return r;
            }
            return match s.method.as_str() {
                "POST" => created(s),
                "DELETE" => status(200, "Success"),
                "GET" if path.ends_with("/daemonsets") => {
                    respond(200, &list_of("DaemonSetList", Vec::new(), "1"))
                }
                "GET" if path.ends_with("/serviceaccounts") => {
                    respond(200, &list_of("ServiceAccountList", Vec::new(), "1"))
                }
                _ => status(403, "Forbidden"),
            };
        }
        discovery_answer(flavour, s)
    }));
    let raw = read(&client).await.unwrap();
    let inv = build(&raw).unwrap();
    assert!(!deploy::permanent(&client, "prober-system").await.unwrap());
    // The host agents' port: the other prober agents' in the namespace deploy/base grants.
    let holders = deploy::ports::holders(&client, "prober-system", Some("r1"))
        .await
        .unwrap();
    assert!(holders.is_empty(), "{holders:?}");
    let mut made = Created::default();
    deploy::apply(&client, &spec, &mut made, &mut |_| {})
        .await
        .unwrap();
    let (ready, _) = deploy::wait(
        &client,
        &spec,
        &crate::wait::nodes(),
        std::time::Duration::from_secs(30),
        &|_, _| {},
    )
    .await
    .unwrap();
    exec_once(&client, ready).await;
    deploy::cleanup(&client, &spec, &made).await.unwrap();
    drop((client, inv));
    server.await.unwrap()
}

pub(crate) async fn exec_once(
    client: &kube::Client,
    ready: BTreeMap<prober::model::AgentRef, prober::runtime::kube::deploy::AgentPod>,
) {
    use prober::runtime::Runtime;
    let agent = ready.keys().next().unwrap().clone();
    let exec = prober::runtime::kube::exec::KubeExec::new(client.clone(), "prober-system", ready);
    let plan = probe_proto::parse_plan(
        r#"{"deadlineMs":1000,"probes":[{"id":"a","kind":"icmp","address":"10.244.2.5"}]}"#,
    )
    .unwrap();
    let _ = exec
        .run(&agent, plan, tokio::sync::mpsc::channel(1).0)
        .await;
}

/// How a cluster shaped like `flavour` with deploy/base's permanent agents answers: their
/// `DaemonSets`, pods and exec in prober-system (anything else there refused), and the
/// discovery fixtures (the policies in prober-system included) for the rest.
pub(crate) fn existing_answer(flavour: &str, s: &Seen) -> http::Response<kube::client::Body> {
    let (path, _) = split(&s.uri);
    if path.contains("/namespaces/prober-system/") && policy_list(&path).is_none() {
        if path.ends_with("/daemonsets") {
            let d = |n: &str, c: &str| json!({"metadata": {"name": n, "labels": {"app.kubernetes.io/name": "prober", "app.kubernetes.io/component": c}}});
            return respond(
                200,
                &list_of(
                    "DaemonSetList",
                    vec![d("probe-host", "host-agent"), d("probe-pod", "pod-agent")],
                    "2",
                ),
            );
        }
        return crate::wait::agents_router(s, "").unwrap_or_else(|| status(403, "Forbidden"));
    }
    discovery_answer(flavour, s)
}

/// `--use-existing` (or a permanent install found): discovery, the check, wait, exec; nothing
/// created or deleted.
pub(crate) async fn existing_mode(flavour: &'static str) -> Vec<Seen> {
    use prober::runtime::kube::deploy;
    use prober::runtime::kube::manifests::AgentSpec;
    let (client, server) = serve(Box::new(move |s| existing_answer(flavour, s)));
    let raw = read(&client).await.unwrap();
    build(&raw).unwrap();
    assert!(deploy::permanent(&client, "prober-system").await.unwrap());
    let spec = AgentSpec::default();
    let (ready, _) = deploy::wait(
        &client,
        &spec,
        &crate::wait::nodes(),
        std::time::Duration::from_secs(30),
        &|_, _| {},
    )
    .await
    .unwrap();
    exec_once(&client, ready).await;
    drop(client);
    let seen = server.await.unwrap();
    assert!(
        seen.iter().all(|s| s.method == "GET"),
        "a run on permanent agents changes nothing"
    );
    seen
}

/// `prober cleanup`.
pub(crate) async fn cleanup_mode() -> Vec<Seen> {
    let (client, server) = serve(Box::new(|s| {
        let (path, _) = split(&s.uri);
        match (s.method.as_str(), path.as_str()) {
            ("GET", "/api/v1/namespaces/prober-system") => respond(
                200,
                &json!({"metadata": {"name": "prober-system", "uid": "u", "labels": {"prober.io/run": "r9"}}}),
            ),
            ("GET", p) if p.ends_with("/daemonsets") => respond(
                200,
                &list_of(
                    "List",
                    vec![json!({"metadata": {"name": "probe-host-r9", "uid": "u1"}})],
                    "1",
                ),
            ),
            ("GET", p) if p.ends_with("/serviceaccounts") => respond(
                200,
                &list_of(
                    "List",
                    vec![json!({"metadata": {"name": "prober-agent-r9", "uid": "u2"}})],
                    "1",
                ),
            ),
            ("GET", p) if p.ends_with("/networkpolicies") => respond(
                200,
                &list_of(
                    "List",
                    vec![json!({"metadata": {"name": "prober-agents-r9", "uid": "u3"}})],
                    "1",
                ),
            ),
            ("DELETE", _) => status(200, "Success"),
            _ => status(404, "NotFound"),
        }
    }));
    let (deleted, _) =
        prober::runtime::kube::deploy::cleanup_leftovers(&client, "prober-system", true)
            .await
            .unwrap();
    assert_eq!(deleted.len(), 4, "{deleted:?}");
    drop(client);
    server.await.unwrap()
}

/// A run's cleanup with one of its agent pods bound to a node that is not Ready: that pod is
/// deleted with grace 0 (no kubelet would confirm a graceful delete), the namespace waited for.
pub(crate) async fn cleanup_beside_a_not_ready_node() -> Vec<Seen> {
    use prober::runtime::kube::deploy::{Created, Owned};
    let (client, server) = serve(Box::new(|s| {
        let (path, _) = split(&s.uri);
        match (s.method.as_str(), path.as_str()) {
            ("GET", "/api/v1/namespaces/prober-system/pods") => respond(
                200,
                &list_of(
                    "PodList",
                    vec![
                        crate::wait::pod("h1", "cp1", "host-agent", "r1", "ready", "192.168.56.10"),
                        crate::wait::pod("h2", "w1", "host-agent", "r1", "pending", ""),
                    ],
                    "3",
                ),
            ),
            ("GET", "/api/v1/nodes") => respond(
                200,
                &list_of(
                    "NodeList",
                    vec![
                        json!({"metadata": {"name": "cp1"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
                        json!({"metadata": {"name": "w1"}, "status": {"conditions": [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}]}}),
                    ],
                    "4",
                ),
            ),
            ("GET", p) if p.ends_with("/daemonsets") => {
                respond(200, &list_of("DaemonSetList", Vec::new(), "1"))
            }
            ("GET", p) if p.ends_with("/serviceaccounts") || p.ends_with("/networkpolicies") => {
                respond(200, &list_of("List", Vec::new(), "1"))
            }
            ("DELETE", _) => status(200, "Success"),
            _ => status(404, "NotFound"),
        }
    }));
    let made = Created {
        namespace: Some(Owned {
            name: "prober-system".into(),
            uid: Some("u0".into()),
        }),
        ..Created::default()
    };
    let deleted = prober::runtime::kube::deploy::cleanup(&client, &crate::apply::run_spec(), &made)
        .await
        .unwrap();
    assert_eq!(
        deleted,
        ["pod/h2", "namespace/prober-system"],
        "{deleted:?}"
    );
    drop(client);
    server.await.unwrap()
}

#[tokio::test]
async fn rbac_allows_every_request_of_every_mode_and_grants_nothing_unused() {
    let rbac = Rbac::load(true);
    let mut seen = Vec::new();
    for flavour in FLAVOURS {
        seen.extend(Box::pin(deploy_mode(flavour)).await);
    }
    // A manifest Calico with Typha in kube-system: its pods are read there.
    seen.extend(typha_in_kube_system().await);
    // Flannel's manifest before its own namespace, and Canal's: their net-conf.json in
    // kube-system.
    seen.extend(flannel_in_kube_system("kube-flannel-cfg").await);
    seen.extend(flannel_in_kube_system("canal-config").await);
    seen.extend(existing_mode("k3s").await);
    seen.extend(cleanup_mode().await);
    seen.extend(cleanup_beside_a_not_ready_node().await);
    seen.extend(plain_cluster_mode().await);
    let used = grants_used(&rbac, &seen, "deploy/base");
    let unused: Vec<String> = rbac
        .grants
        .iter()
        .filter(|g| !used.contains(*g))
        .map(|g| {
            format!(
                "{} {}/{} {:?} in {:?} ({})",
                g.verb, g.group, g.resource, g.name, g.scope, g.from
            )
        })
        .collect();
    assert!(
        unused.is_empty(),
        "granted but never used:\n{}",
        unused.join("\n")
    );
    // What the review asked for, said directly.
    let has = |verb: &str, resource: &str| {
        rbac.grants
            .iter()
            .any(|g| g.verb == verb && g.resource == resource)
    };
    assert!(has("get", "pods/exec") && has("create", "pods/exec"));
    assert!(
        !rbac
            .grants
            .iter()
            .any(|g| g.scope.is_none() && g.resource == "pods"),
        "no cluster-wide pods"
    );
    assert!(
        !rbac
            .grants
            .iter()
            .any(|g| g.scope.is_none()
                && (g.resource == "daemonsets" || g.resource == "deployments")),
        "workloads per namespace only"
    );
}

/// calico-vxlan with a manifest-installed Typha in kube-system.
pub(crate) async fn typha_in_kube_system() -> Vec<Seen> {
    let mut deploys = fixture_json("calico-vxlan", "deploy-kube-system.json");
    let mut typha = fixture_json("calico-bgp-typha", "deploy-calico-system.json")["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["metadata"]["name"] == "calico-typha")
        .unwrap()
        .clone();
    typha["metadata"]["namespace"] = json!("kube-system");
    deploys["items"].as_array_mut().unwrap().push(typha);
    let mut pods = fixture_json("calico-bgp-typha", "pods-calico-typha.json");
    for p in pods["items"].as_array_mut().unwrap() {
        p["metadata"]["namespace"] = json!("kube-system");
    }
    let (client, server) = serve(Box::new(move |s| {
        let (path, _) = split(&s.uri);
        match path.as_str() {
            "/apis/apps/v1/namespaces/kube-system/deployments" => respond(200, &deploys),
            "/api/v1/namespaces/kube-system/pods" => respond(200, &pods),
            _ => discovery_answer("calico-vxlan", s),
        }
    }));
    let raw = read(&client).await.unwrap();
    let inv = build(&raw).unwrap();
    drop(client);
    let seen = server.await.unwrap();
    assert!(seen.iter().any(|s| s.uri
        == list_uri(
            "/api/v1/namespaces/kube-system/pods",
            Some("k8s-app=calico-typha")
        )));
    let typha_nodes: Vec<&str> = inv
        .nodes
        .iter()
        .filter(|n| {
            n.serves
                .as_ref()
                .is_some_and(|s| s.iter().any(|p| p.get() == 5473))
        })
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(typha_nodes, ["cp1", "w2"]);
    seen
}

/// The flannel cluster with flannel's `DaemonSet` in kube-system, its configuration in the
/// `ConfigMap` `cm` there (older flannel manifests: kube-flannel-cfg; Canal's: canal-config).
pub(crate) async fn flannel_in_kube_system(cm: &'static str) -> Vec<Seen> {
    let mut ds = fixture_json("flannel", "ds-kube-system.json");
    let mut flannel = fixture_json("flannel", "ds-kube-flannel.json")["items"][0].clone();
    flannel["metadata"]["namespace"] = json!("kube-system");
    for v in flannel["spec"]["template"]["spec"]["volumes"]
        .as_array_mut()
        .unwrap()
    {
        if v["name"] == "flannel-cfg" {
            v["configMap"]["name"] = json!(cm);
        }
    }
    ds["items"].as_array_mut().unwrap().push(flannel);
    let mut config = fixture_json("flannel", "cm-kube-flannel-cfg.json");
    config["metadata"]["namespace"] = json!("kube-system");
    config["metadata"]["name"] = json!(cm);
    let (client, server) = serve(Box::new(move |s| {
        let (path, _) = split(&s.uri);
        match path.as_str() {
            "/apis/apps/v1/namespaces/kube-system/daemonsets" => respond(200, &ds),
            "/apis/apps/v1/namespaces/kube-flannel/daemonsets" => {
                respond(200, &list_of("DaemonSetList", Vec::new(), "1"))
            }
            p if p == format!("/api/v1/namespaces/kube-system/configmaps/{cm}") => {
                respond(200, &config)
            }
            _ => discovery_answer("flannel", s),
        }
    }));
    let raw = read(&client).await.unwrap();
    build(&raw).unwrap();
    drop(client);
    let seen = server.await.unwrap();
    assert!(
        seen.iter()
            .any(|s| s.uri == format!("/api/v1/namespaces/kube-system/configmaps/{cm}")),
        "{:?}",
        seen.iter().map(|s| &s.uri).collect::<Vec<_>>()
    );
    seen
}

/// Discovery on a plain cluster with deploy/base alone: the optional namespaces are not granted
/// and do not exist, so each refused list is followed by a `get` of its namespace (404).
pub(crate) async fn plain_cluster_mode() -> Vec<Seen> {
    let rules = Rbac::load(false);
    let (client, server) = serve(Box::new(move |s| {
        if rules.allows(s).is_empty() {
            return test_kit::mock::status(403, "Forbidden");
        }
        let (path, _) = split(&s.uri);
        if let Some(ns) = path.strip_prefix("/api/v1/namespaces/")
            && !ns.contains('/')
        {
            return test_kit::mock::status(404, "NotFound");
        }
        test_kit::mock::discovery_answer("flannel", s)
    }));
    let raw = read(&client).await.unwrap();
    assert!(raw.forbidden.is_empty(), "{:?}", raw.forbidden);
    drop(client);
    server.await.unwrap()
}
