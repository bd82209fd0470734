//! The agents' objects: create exactly this run's, clean up exactly what it created, never
//! another run's or a permanent install.

use crate::discover::*;
use prober::inventory::Inventory;
use prober::runtime::kube::deploy::{self, Created, DeployError, Owned};
use prober::runtime::kube::manifests::AgentSpec;
use serde_json::{Value, json};
use test_kit::mock::{created, list_of, respond, serve, split, status};

pub(crate) fn run_spec() -> AgentSpec {
    AgentSpec {
        run: Some("r1".into()),
        ttl: Some("2h".into()),
        expires: Some("2026-12-01T14:00:00Z".into()),
        ..AgentSpec::default()
    }
}

#[tokio::test]
async fn apply_creates_this_runs_objects_and_records_them() {
    let (client, server) = serve(Box::new(|s| match (s.method.as_str(), s.uri.as_str()) {
        ("POST", _) => created(s),
        ("GET", u) if u.contains("/daemonsets?") => {
            respond(200, &list_of("DaemonSetList", Vec::new(), "1"))
        }
        _ => status(404, "NotFound"),
    }));
    let mut made = Created::default();
    deploy::apply(&client, &run_spec(), &mut made, &mut |_| {})
        .await
        .unwrap();
    drop(client);
    let seen = server.await.unwrap();
    let reqs: Vec<(String, String)> = seen
        .iter()
        .map(|s| (s.method.clone(), s.uri.clone()))
        .collect();
    let q = "?&fieldManager=prober";
    assert_eq!(
        reqs,
        [
            (
                "GET".to_string(),
                "/api/v1/namespaces/prober-system".to_string()
            ),
            ("POST".to_string(), format!("/api/v1/namespaces{q}")),
            (
                "POST".to_string(),
                format!("/api/v1/namespaces/prober-system/serviceaccounts{q}")
            ),
            (
                "POST".to_string(),
                format!("/apis/networking.k8s.io/v1/namespaces/prober-system/networkpolicies{q}")
            ),
            (
                "POST".to_string(),
                format!("/apis/apps/v1/namespaces/prober-system/daemonsets{q}")
            ),
            (
                "POST".to_string(),
                format!("/apis/apps/v1/namespaces/prober-system/daemonsets{q}")
            ),
            (
                "GET".to_string(),
                "/apis/apps/v1/namespaces/prober-system/daemonsets?&labelSelector=prober.io%2Frun"
                    .to_string()
            ),
        ]
    );
    let seen = &seen[1..];
    let ns = &seen[0].body;
    assert_eq!(
        ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "privileged"
    );
    assert_eq!(ns["metadata"]["labels"]["prober.io/run"], "r1");
    assert_eq!(seen[1].body["metadata"]["name"], "prober-agent-r1");
    assert_eq!(seen[1].body["automountServiceAccountToken"], false);
    // The agents' allow policy, before the agents: this run's pod agents, all ways.
    let np = &seen[2].body;
    assert_eq!(np["metadata"]["name"], "prober-agents-r1");
    assert_eq!(np["metadata"]["labels"]["prober.io/run"], "r1");
    // Every pod agent of the namespace: diagnosis knows them by name and component.
    assert_eq!(
        np["spec"]["podSelector"]["matchLabels"],
        json!({"app.kubernetes.io/name": "prober", "app.kubernetes.io/component": "pod-agent"})
    );
    assert_eq!(np["spec"]["ingress"], json!([{}]));
    assert_eq!(np["spec"]["egress"], json!([{}]));
    assert_eq!(
        made.network_policy.as_ref().unwrap().uid.as_deref(),
        Some("uid-prober-agents-r1")
    );
    let seen = &seen[1..];
    let host = &seen[2].body;
    assert_eq!(host["metadata"]["name"], "probe-host-r1");
    assert_eq!(host["metadata"]["labels"]["prober.io/run"], "r1");
    assert_eq!(
        host["spec"]["selector"]["matchLabels"]["prober.io/run"],
        "r1"
    );
    let pod = &host["spec"]["template"]["spec"];
    assert_eq!(pod["hostNetwork"], true);
    assert_eq!(pod["serviceAccountName"], "prober-agent-r1");
    assert_eq!(pod["nodeSelector"]["kubernetes.io/os"], "linux");
    assert_eq!(pod["tolerations"][0]["operator"], "Exists");
    assert!(
        pod.get("priorityClassName").is_none(),
        "not outside kube-system"
    );
    let c = &pod["containers"][0];
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["port"], 9917);
    assert_eq!(
        c["securityContext"]["capabilities"]["add"],
        json!(["NET_RAW"])
    );
    // Idle at its TTL: a DaemonSet restarts an agent that exits.
    assert_eq!(
        c["args"],
        json!(["serve", "--ttl", "2h", "--on-ttl", "idle"])
    );
    // No container port on the host network: it would become a host port, and a leftover
    // or concurrent run's host agents would keep this run's Pending on every node.
    assert!(c.get("ports").is_none(), "{c}");
    assert_eq!(c["terminationMessagePolicy"], "FallbackToLogsOnError");
    assert_eq!(
        host["metadata"]["annotations"]["prober.io/expires"],
        "2026-12-01T14:00:00Z"
    );
    assert_eq!(seen[3].body["metadata"]["name"], "probe-pod-r1");
    assert!(
        seen[3].body["spec"]["template"]["spec"]
            .get("hostNetwork")
            .is_none()
    );
    let names: Vec<&str> = made.daemonsets.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["probe-host-r1", "probe-pod-r1"]);
    assert_eq!(
        made.namespace.unwrap().uid.as_deref(),
        Some("uid-prober-system")
    );
}

#[tokio::test]
async fn a_failed_apply_is_cleaned_up_exactly_and_an_existing_namespace_is_kept() {
    // The namespace exists (someone else's), the pod DaemonSet is refused.
    let (client, server) = serve(Box::new(|s| match (s.method.as_str(), s.uri.as_str()) {
        ("GET", "/api/v1/namespaces/prober-system") => respond(
            200,
            &json!({"metadata": {"name": "prober-system", "uid": "someone-elses"}}),
        ),
        ("GET", u) if u.contains("/daemonsets?") => {
            respond(200, &list_of("DaemonSetList", Vec::new(), "1"))
        }
        ("GET", u) if u.contains("/serviceaccounts?") => {
            respond(200, &list_of("ServiceAccountList", Vec::new(), "1"))
        }
        ("POST", "/api/v1/namespaces?&fieldManager=prober") => {
            panic!("an existing namespace is used, never created (no cluster-wide create)")
        }
        ("POST", _) if s.body["metadata"]["name"] == "probe-pod-r1" => status(422, "Invalid"),
        ("POST", _) => created(s),
        ("DELETE", _) => status(200, "Success"),
        _ => status(404, "NotFound"),
    }));
    let spec = run_spec();
    let mut made = Created::default();
    let err = deploy::apply(&client, &spec, &mut made, &mut |_| {})
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("create daemonset prober-system/probe-pod-r1"),
        "{err}"
    );
    let deleted = deploy::cleanup(&client, &spec, &made).await.unwrap();
    drop(client);
    let seen = server.await.unwrap();
    assert_eq!(
        deleted,
        [
            "daemonset/probe-host-r1",
            "networkpolicy/prober-agents-r1",
            "serviceaccount/prober-agent-r1"
        ]
    );
    let removals: Vec<(&str, &Value)> = seen
        .iter()
        .filter(|s| s.method == "DELETE")
        .map(|s| (s.uri.as_str(), &s.body["preconditions"]["uid"]))
        .collect();
    assert_eq!(
        removals,
        [
            (
                "/apis/apps/v1/namespaces/prober-system/daemonsets/probe-host-r1?",
                &json!("uid-probe-host-r1")
            ),
            (
                "/apis/networking.k8s.io/v1/namespaces/prober-system/networkpolicies/prober-agents-r1?",
                &json!("uid-prober-agents-r1")
            ),
            (
                "/api/v1/namespaces/prober-system/serviceaccounts/prober-agent-r1?",
                &json!("uid-prober-agent-r1")
            ),
        ],
        "only what the run created, and only while it is the same object; never the namespace it did not create"
    );
}

#[tokio::test]
async fn a_rerun_waits_for_the_namespace_still_being_deleted() {
    // The last run's cleanup deleted the namespace a moment ago: it is Terminating (and
    // the NamespaceLifecycle admission plugin refuses new objects in it) for a few seconds.
    let gets = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen_gets = gets.clone();
    let (client, server) = serve(Box::new(move |s| {
        let (path, _) = split(&s.uri);
        match (s.method.as_str(), path.as_str()) {
            ("GET", "/api/v1/namespaces/prober-system") => {
                if seen_gets.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < 2 {
                    respond(
                        200,
                        &json!({"metadata": {"name": "prober-system", "uid": "old",
                        "deletionTimestamp": "2026-12-01T12:00:00Z"}, "status": {"phase": "Terminating"}}),
                    )
                } else {
                    status(404, "NotFound")
                }
            }
            ("GET", p) if p.ends_with("/daemonsets") => {
                respond(200, &list_of("DaemonSetList", Vec::new(), "1"))
            }
            ("POST", _) => created(s),
            _ => status(404, "NotFound"),
        }
    }));
    let mut made = Created::default();
    let mut notes = Vec::new();
    deploy::apply(&client, &run_spec(), &mut made, &mut |n| notes.push(n))
        .await
        .unwrap();
    drop(client);
    server.await.unwrap();
    assert_eq!(gets.load(std::sync::atomic::Ordering::SeqCst), 3);
    assert!(
        made.namespace.is_some(),
        "created anew once the old one was gone"
    );
    assert!(
        notes.iter().any(|n| n.contains("still being deleted")),
        "{notes:?}"
    );
}

#[tokio::test]
async fn a_create_refused_in_a_terminating_namespace_is_said_in_words() {
    // `NamespaceLifecycle` (kubernetes/kubernetes
    // staging/src/k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle/admission.go).
    let (client, server) = serve(Box::new(|s| {
        let (path, _) = split(&s.uri);
        match (s.method.as_str(), path.as_str()) {
            ("GET", "/api/v1/namespaces/prober-system") => status(403, "Forbidden"),
            ("POST", "/api/v1/namespaces") => status(409, "AlreadyExists"),
            ("GET", p) if p.ends_with("/daemonsets") => {
                respond(200, &list_of("DaemonSetList", Vec::new(), "1"))
            }
            ("POST", _) => respond(
                403,
                &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "message": "serviceaccounts \"prober-agent-r1\" is forbidden: unable to create new content in namespace prober-system because it is being terminated",
                "reason": "Forbidden", "code": 403}),
            ),
            _ => status(404, "NotFound"),
        }
    }));
    let mut made = Created::default();
    let err = deploy::apply(&client, &run_spec(), &mut made, &mut |_| {})
        .await
        .unwrap_err();
    drop(client);
    server.await.unwrap();
    let e = err.to_string();
    assert!(
        matches!(err, DeployError::Terminating { .. }) && e.contains("run again in a minute"),
        "{e}"
    );
}

#[tokio::test]
async fn a_run_never_takes_over_or_wipes_another_runs_live_agents() {
    // Run r0 is going in prober-system (its namespace, its agents, expiring in the future).
    let live = expiring(
        ds("probe-host-r0", "host-agent", Some("r0")),
        "2999-01-01T00:00:00Z",
    );
    let list = list_of("DaemonSetList", vec![live], "3");
    let (client, server) = serve(Box::new(move |s| {
        let (path, _) = split(&s.uri);
        match (s.method.as_str(), path.as_str()) {
            ("GET", "/api/v1/namespaces/prober-system") => respond(
                200,
                &json!({"metadata": {"name": "prober-system", "uid": "ns-r0", "labels": {"prober.io/run": "r0"}}}),
            ),
            ("GET", p) if p.ends_with("/daemonsets") => respond(200, &list),
            ("GET", p) if p.ends_with("/serviceaccounts") => {
                respond(200, &list_of("ServiceAccountList", Vec::new(), "1"))
            }
            ("GET", p) if p.ends_with("/networkpolicies") => {
                respond(200, &list_of("NetworkPolicyList", Vec::new(), "1"))
            }
            // Its own pods on nodes that are not Ready: none.
            ("GET", p) if p.ends_with("/pods") => {
                respond(200, &list_of("PodList", Vec::new(), "1"))
            }
            ("DELETE", _) => status(200, "Success"),
            (m, p) => panic!("run r1 must not {m} {p}"),
        }
    }));
    let spec = run_spec();
    let mut made = Created::default();
    let err = deploy::apply(&client, &spec, &mut made, &mut |_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(&err, DeployError::OtherRun { run, .. } if run == "r0"),
        "{err}"
    );
    assert_eq!(made, Created::default(), "nothing created");
    // A run that did create the namespace leaves it while another run's agents are in it.
    let mine = Created {
        namespace: Some(Owned {
            name: "prober-system".into(),
            uid: Some("ns-r1".into()),
        }),
        ..Created::default()
    };
    let deleted = deploy::cleanup(&client, &spec, &mine).await.unwrap();
    drop(client);
    let seen = server.await.unwrap();
    assert!(deleted.is_empty(), "{deleted:?}");
    assert!(!seen.iter().any(|s| s.method == "DELETE"));
}

#[tokio::test]
async fn an_interruption_while_creating_removes_what_was_created_in_flight_too() {
    // Ctrl-C arrives while the host DaemonSet's create is on its way: the run stops at once
    // and cleans up, the object whose answer it never read included (found by run label).
    let inv = discover("flannel").await;
    let made: std::sync::Arc<std::sync::Mutex<Vec<Value>>> = std::sync::Arc::default();
    let interrupt = std::sync::Arc::new(tokio::sync::Notify::new());
    let (log, fire) = (made.clone(), interrupt.clone());
    let (client, server) = serve(Box::new(move |s| {
        let (path, _) = split(&s.uri);
        let listed = |kind: &str| {
            let items: Vec<Value> = log
                .lock()
                .unwrap()
                .iter()
                .filter(|o| o["kind"] == kind)
                .cloned()
                .collect();
            respond(200, &list_of("List", items, "1"))
        };
        match (s.method.as_str(), path.as_str()) {
            ("GET", p) if p.ends_with("/daemonsets") && s.uri.contains("%21prober.io") => {
                respond(200, &list_of("DaemonSetList", Vec::new(), "1"))
            }
            ("GET", p) if p.ends_with("/daemonsets") => listed("DaemonSet"),
            ("GET", p) if p.ends_with("/serviceaccounts") => listed("ServiceAccount"),
            ("GET", p) if p.ends_with("/networkpolicies") => listed("NetworkPolicy"),
            // No namespace yet (GET it: 404, the fall-through): the run creates it.
            ("POST", p) => {
                let mut o = s.body.clone();
                o["kind"] = json!(if p.ends_with("/daemonsets") {
                    "DaemonSet"
                } else if p.ends_with("/serviceaccounts") {
                    "ServiceAccount"
                } else if p.ends_with("/networkpolicies") {
                    "NetworkPolicy"
                } else {
                    "Namespace"
                });
                log.lock().unwrap().push(o);
                if p.ends_with("/daemonsets") {
                    fire.notify_one();
                }
                created(s)
            }
            ("DELETE", _) => status(200, "Success"),
            _ => status(404, "NotFound"),
        }
    }));
    let session = run_session();
    let mut inv = inv;
    let mut notes = Vec::new();
    let out: Result<(), deploy::SessionError<()>> = deploy::with_agents(
        &client,
        &session,
        &mut inv,
        &mut |n| notes.push(n),
        &|_, _| {},
        || {
            let i = interrupt.clone();
            async move { i.notified().await }
        },
        async |_: &Inventory, _| panic!("no probing after an interruption"),
    )
    .await;
    drop(client);
    let seen = server.await.unwrap();
    assert!(matches!(out, Err(deploy::SessionError::Interrupted)));
    // It stopped creating at once: the pod agents' DaemonSet was never asked for.
    assert!(
        !seen
            .iter()
            .any(|s| s.method == "POST" && s.body["metadata"]["name"] == "probe-pod-r1"),
        "created after the interruption"
    );
    let deleted: Vec<&str> = seen
        .iter()
        .filter(|s| s.method == "DELETE")
        .map(|s| s.uri.as_str())
        .collect();
    assert!(
        deleted.contains(&"/apis/apps/v1/namespaces/prober-system/daemonsets/probe-host-r1?")
            && deleted
                .contains(&"/api/v1/namespaces/prober-system/serviceaccounts/prober-agent-r1?")
            && deleted.contains(
                &"/apis/networking.k8s.io/v1/namespaces/prober-system/networkpolicies/prober-agents-r1?"
            )
            && deleted.contains(&"/api/v1/namespaces/prober-system?"),
        "{deleted:?} {notes:?}"
    );
}

pub(crate) fn expiring(mut v: Value, at: &str) -> Value {
    v["metadata"]["annotations"] = json!({"prober.io/expires": at});
    v
}

pub(crate) fn ds(name: &str, component: &str, run: Option<&str>) -> Value {
    let mut labels =
        json!({"app.kubernetes.io/name": "prober", "app.kubernetes.io/component": component});
    if let Some(r) = run {
        labels["prober.io/run"] = json!(r);
    }
    json!({"metadata": {"name": name, "namespace": "prober-system", "uid": format!("uid-{name}"), "labels": labels},
           "spec": {"selector": {}, "template": {}}})
}

#[tokio::test]
async fn a_permanent_install_is_found_by_label() {
    let (client, server) = serve(Box::new(|_| {
        respond(
            200,
            &list_of(
                "DaemonSetList",
                vec![
                    ds("probe-host", "host-agent", None),
                    ds("probe-pod", "pod-agent", None),
                ],
                "7",
            ),
        )
    }));
    assert!(deploy::permanent(&client, "prober-system").await.unwrap());
    drop(client);
    let seen = server.await.unwrap();
    assert_eq!(
        seen[0].uri,
        "/apis/apps/v1/namespaces/prober-system/daemonsets?&labelSelector=app.kubernetes.io%2Fname%3Dprober%2C%21prober.io%2Frun"
    );
}

#[tokio::test]
async fn prober_cleanup_removes_run_leftovers_and_never_a_permanent_install() {
    let (client, server) = serve(Box::new(|s| {
        let (path, _) = split(&s.uri);
        match (s.method.as_str(), path.as_str()) {
            // r9 expired (its coordinator crashed); r8 is a run still going elsewhere.
            ("GET", "/apis/apps/v1/namespaces/prober-system/daemonsets") => respond(
                200,
                &list_of(
                    "DaemonSetList",
                    vec![
                        expiring(
                            ds("probe-host-r9", "host-agent", Some("r9")),
                            "2020-01-01T00:00:00Z",
                        ),
                        expiring(
                            ds("probe-host-r8", "host-agent", Some("r8")),
                            "2999-01-01T00:00:00Z",
                        ),
                    ],
                    "3",
                ),
            ),
            ("GET", "/api/v1/namespaces/prober-system/serviceaccounts") => {
                respond(200, &list_of("ServiceAccountList", Vec::new(), "3"))
            }
            // r9's allow policy goes with its agents; r8's stays.
            ("GET", "/apis/networking.k8s.io/v1/namespaces/prober-system/networkpolicies") => {
                let np = |name: &str, run: &str, at: &str| {
                    expiring(
                        json!({"metadata": {"name": name, "namespace": "prober-system",
                            "uid": format!("uid-{name}"), "labels": {"prober.io/run": run}}}),
                        at,
                    )
                };
                respond(
                    200,
                    &list_of(
                        "NetworkPolicyList",
                        vec![
                            np("prober-agents-r9", "r9", "2020-01-01T00:00:00Z"),
                            np("prober-agents-r8", "r8", "2999-01-01T00:00:00Z"),
                        ],
                        "3",
                    ),
                )
            }
            // The namespace of a permanent install: no run label.
            ("GET", "/api/v1/namespaces/prober-system") => respond(
                200,
                &json!({"metadata": {"name": "prober-system", "uid": "u-ns", "labels": {"app.kubernetes.io/name": "prober"}}}),
            ),
            ("DELETE", _) => status(200, "Success"),
            _ => status(404, "NotFound"),
        }
    }));
    let (deleted, kept) = deploy::cleanup_leftovers(&client, "prober-system", false)
        .await
        .unwrap();
    drop(client);
    let seen = server.await.unwrap();
    assert_eq!(
        deleted,
        ["daemonset/probe-host-r9", "networkpolicy/prober-agents-r9"],
        "never a live run's agents"
    );
    assert_eq!(kept, ["r8"]);
    assert_eq!(
        seen[0].uri,
        "/apis/apps/v1/namespaces/prober-system/daemonsets?&labelSelector=prober.io%2Frun"
    );
    assert!(
        !seen
            .iter()
            .any(|s| s.method == "DELETE" && s.uri.contains("/namespaces/prober-system?"))
    );
}

#[tokio::test]
async fn a_run_not_allowed_to_create_its_allow_policy_goes_on_and_says_so() {
    // An RBAC bound before the policy shipped: the policy's create is refused, the run goes on.
    let (client, server) = serve(Box::new(|s| match (s.method.as_str(), s.uri.as_str()) {
        ("POST", u) if u.contains("/networkpolicies") => status(403, "Forbidden"),
        ("POST", _) => created(s),
        ("GET", u) if u.contains("/daemonsets?") => {
            respond(200, &list_of("DaemonSetList", Vec::new(), "1"))
        }
        _ => status(404, "NotFound"),
    }));
    let mut made = Created::default();
    let mut notes = Vec::new();
    deploy::apply(&client, &run_spec(), &mut made, &mut |n| notes.push(n))
        .await
        .unwrap();
    drop(client);
    server.await.unwrap();
    assert_eq!(made.network_policy, None);
    assert_eq!(made.daemonsets.len(), 2, "the agents are still created");
    assert!(
        notes.iter().any(
            |n| n.contains("NetworkPolicy prober-system/prober-agents-r1")
                && n.contains("deploy/base/rbac.yaml")
        ),
        "{notes:?}"
    );
    // One sentence, as an operator reads it: no run of spaces from a wrapped literal.
    assert!(!notes.iter().any(|n| n.contains("  ")), "{notes:?}");
}

#[tokio::test]
async fn diagnosis_sees_the_allow_policy_a_run_created() {
    // Discovery read a namespace default-deny before the run created its allow policy: the
    // inventory the probes are diagnosed with carries both, and the allow policy selects the
    // pod agents as diagnosis knows them.
    let mut inv = discover("calico-vxlan").await;
    inv.nodes.retain(|n| n.name == "cp1" || n.name == "w1");
    let (client, server) = serve(Box::new(|s| {
        if let Some(r) = crate::wait::agents_router(s, "r1") {
            return r;
        }
        match (s.method.as_str(), s.uri.as_str()) {
            ("POST", _) => created(s),
            ("DELETE", _) => status(200, "Success"),
            ("GET", u) if u.contains("/daemonsets?") => {
                respond(200, &list_of("DaemonSetList", Vec::new(), "1"))
            }
            _ => status(404, "NotFound"),
        }
    }));
    let session = run_session();
    let selecting: Result<Vec<String>, deploy::SessionError<()>> = deploy::with_agents(
        &client,
        &session,
        &mut inv,
        &mut |_| {},
        &|_, _| {},
        std::future::pending,
        async |inv: &Inventory, _| {
            use prober::diagnose::policy::{Agents, Policies};
            let p = Policies::new(&inv.cluster.policies, Agents::deployed());
            Ok(p.selecting()
                .into_iter()
                .map(|(r, _)| format!("{}/{}", r.kind, r.name))
                .collect())
        },
    )
    .await;
    drop(client);
    server.await.unwrap();
    let selecting = selecting.unwrap_or_else(|e| panic!("{e:?}"));
    assert!(
        selecting.contains(&"NetworkPolicy/default-deny-all".to_string())
            && selecting.contains(&"NetworkPolicy/prober-agents-r1".to_string()),
        "{selecting:?}"
    );
}

#[tokio::test]
async fn image_pull_secrets_land_in_both_daemonsets() {
    let (client, server) = serve(Box::new(|s| match (s.method.as_str(), s.uri.as_str()) {
        ("POST", _) => created(s),
        ("GET", u) if u.contains("/daemonsets?") => {
            respond(200, &list_of("DaemonSetList", Vec::new(), "1"))
        }
        _ => status(404, "NotFound"),
    }));
    let spec = AgentSpec {
        image_pull_secrets: vec!["regcred".into(), "mirror".into()],
        ..run_spec()
    };
    let mut made = Created::default();
    deploy::apply(&client, &spec, &mut made, &mut |_| {})
        .await
        .unwrap();
    drop(client);
    let seen = server.await.unwrap();
    let daemonsets: Vec<&Value> = seen
        .iter()
        .filter(|s| s.method == "POST" && s.uri.contains("/daemonsets"))
        .map(|s| &s.body)
        .collect();
    assert_eq!(daemonsets.len(), 2);
    for ds in daemonsets {
        assert_eq!(
            ds["spec"]["template"]["spec"]["imagePullSecrets"],
            json!([{"name": "regcred"}, {"name": "mirror"}]),
            "{}",
            ds["metadata"]["name"]
        );
    }
}

/// A run's own agents session (run r1, in prober-system), as `matrix` starts one.
fn run_session() -> deploy::Session {
    deploy::Session {
        namespace: "prober-system".into(),
        image: "example/prober:test".into(),
        use_existing: false,
        keep_agents: false,
        wait: std::time::Duration::from_secs(30),
        run_id: "r1".into(),
        ttl: "2h".into(),
        cleanup_deadline: std::time::Duration::from_secs(10),
        image_pull_secrets: Vec::new(),
        host_port: None,
    }
}
