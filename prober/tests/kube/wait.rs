//! The agents' pods: waited for (list once, then watch), failing fast with the reason, and
//! reached through the API server's exec.

use std::collections::BTreeMap;

use crate::apply::*;
use crate::discover::*;
use http::Response;
use kube::client::Body;
use prober::model::{AgentKind, AgentRef};
use prober::runtime::kube::deploy::{self, AgentPod, DeployError, Owned, agents_from_pods};
use prober::runtime::kube::manifests::AgentSpec;
use serde_json::{Value, json};
use test_kit::mock::{Seen, list_of, respond, serve, split, status};

/// An agent pod on `node`; `state` is "ready", "pending", or a kubelet waiting reason.
pub(crate) fn pod(
    name: &str,
    node: &str,
    component: &str,
    run: &str,
    state: &str,
    ip: &str,
) -> Value {
    let ready = state == "ready";
    let waiting = (!ready && state != "pending").then(|| {
        json!([{"name": "probe-pod", "ready": false, "restartCount": 0, "image": "x", "imageID": "",
        "state": {"waiting": {"reason": state, "message": if state == "ErrImagePull" {
            "failed to pull and unpack image \"ghcr.io/prober-dev/prober:0.1.0\": not found"
        } else { "Back-off pulling image \"ghcr.io/prober-dev/prober:0.1.0\"" }}}}])
    });
    json!({
        "metadata": {"name": name, "namespace": "prober-system", "resourceVersion": "11",
                     "labels": {"app.kubernetes.io/name": "prober", "app.kubernetes.io/component": component, "prober.io/run": run}},
        "spec": {"nodeName": node, "containers": [{"name": "probe-pod"}]},
        "status": {
            "phase": if ready { "Running" } else { "Pending" },
            "podIP": if ready { json!(ip) } else { Value::Null },
            "podIPs": if ready { json!([{"ip": "fd00::1"}, {"ip": ip}]) } else { Value::Null },
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
            "containerStatuses": waiting.unwrap_or(json!([]))
        }
    })
}

pub(crate) fn watch_body(events: &[(&str, Value)]) -> Response<Body> {
    let mut text = String::new();
    for (kind, obj) in events {
        text.push_str(&json!({"type": kind, "object": obj}).to_string());
        text.push('\n');
    }
    Response::builder()
        .status(200)
        .body(Body::from(text.into_bytes()))
        .unwrap()
}

pub(crate) fn nodes() -> Vec<String> {
    vec!["cp1".into(), "w1".into()]
}

/// Agent pods listed pending, then made ready by the watch.
pub(crate) fn agents_router(s: &Seen, run: &str) -> Option<Response<Body>> {
    let (path, q) = split(&s.uri);
    let watch = q.contains_key("watch");
    let all = |state: &str| {
        vec![
            pod("h1", "cp1", "host-agent", run, state, "192.168.56.10"),
            pod("p1", "cp1", "pod-agent", run, state, "10.244.0.5"),
            pod("h2", "w1", "host-agent", run, state, "192.168.56.11"),
            pod("p2", "w1", "pod-agent", run, state, "10.244.1.5"),
        ]
    };
    match path.as_str() {
        "/api/v1/namespaces/prober-system/pods" if watch => Some(watch_body(
            &all("ready")
                .into_iter()
                .map(|p| ("MODIFIED", p))
                .collect::<Vec<_>>(),
        )),
        "/api/v1/namespaces/prober-system/pods" => {
            Some(respond(200, &list_of("PodList", all("pending"), "10")))
        }
        "/api/v1/namespaces/prober-system/events" if watch => Some(watch_body(&[])),
        "/api/v1/namespaces/prober-system/events" => {
            Some(respond(200, &list_of("EventList", Vec::new(), "5")))
        }
        _ => None,
    }
}

/// A permanent install whose agents were moved off 9917, each container saying so its own
/// way: the inventory's agents get the port their pod says, never the default.
#[tokio::test]
async fn an_existing_install_on_another_port_is_reached_on_that_port() {
    let with = |mut p: Value, container: Value| {
        p["spec"]["containers"] = json!([container]);
        p
    };
    let all = move |state: &str| {
        vec![
            with(
                pod("h1", "cp1", "host-agent", "", state, "192.168.56.10"),
                json!({"name": "probe-pod", "args": ["serve", "--port", "9920"],
                       "ports": [{"containerPort": 9920, "name": "probe"}]}),
            ),
            with(
                pod("p1", "cp1", "pod-agent", "", state, "10.244.0.5"),
                json!({"name": "probe-pod", "args": ["serve", "--port=9921"]}),
            ),
            with(
                pod("h2", "w1", "host-agent", "", state, "192.168.56.11"),
                json!({"name": "probe-pod", "args": ["serve"],
                       "env": [{"name": "PROBE_POD_PORT", "value": "9922"}]}),
            ),
            with(
                pod("p2", "w1", "pod-agent", "", state, "10.244.1.5"),
                json!({"name": "probe-pod", "args": ["serve"],
                       "ports": [{"containerPort": 9923, "name": "probe"}]}),
            ),
        ]
    };
    let (client, server) = serve(Box::new(move |s| {
        let (path, q) = split(&s.uri);
        match path.as_str() {
            "/api/v1/namespaces/prober-system/pods" if q.contains_key("watch") => watch_body(
                &all("ready")
                    .into_iter()
                    .map(|p| ("MODIFIED", p))
                    .collect::<Vec<_>>(),
            ),
            "/api/v1/namespaces/prober-system/pods" => {
                respond(200, &list_of("PodList", all("pending"), "10"))
            }
            _ => agents_router(s, "").unwrap_or_else(|| status(404, "NotFound")),
        }
    }));
    let (ready, missing) = deploy::wait(
        &client,
        &AgentSpec::default(),
        &nodes(),
        std::time::Duration::from_secs(30),
        &|_, _| {},
    )
    .await
    .unwrap();
    drop(client);
    server.await.unwrap();
    assert!(missing.is_empty(), "{missing:?}");
    let mut inv = discover("flannel").await;
    deploy::attach_agents(&mut inv, &ready, "prober-system");
    let ports: Vec<(String, Option<u16>, Option<u16>)> = inv
        .nodes
        .iter()
        .map(|n| {
            (
                n.name.clone(),
                n.agents.host.as_ref().map(|a| a.port.get()),
                n.agents.pod.as_ref().map(|a| a.port.get()),
            )
        })
        .collect();
    assert_eq!(
        ports,
        [
            ("cp1".to_string(), Some(9920), Some(9921)),
            ("w1".to_string(), Some(9922), Some(9923)),
            ("w2".to_string(), None, None),
        ],
        "w2 has no agent pod: no agent, not one on 9917"
    );
}

#[tokio::test]
async fn the_wait_lists_once_then_watches() {
    let (client, server) = serve(Box::new(|s| {
        agents_router(s, "r1").unwrap_or_else(|| status(404, "NotFound"))
    }));
    let (ready, missing) = deploy::wait(
        &client,
        &run_spec(),
        &nodes(),
        std::time::Duration::from_secs(30),
        &|_, _| {},
    )
    .await
    .unwrap();
    drop(client);
    let seen = server.await.unwrap();
    assert!(missing.is_empty(), "{missing:?}");
    assert_eq!(
        ready[&AgentRef {
            node: "w1".into(),
            agent: AgentKind::Pod
        }],
        AgentPod {
            pod: "p2".into(),
            address: "10.244.1.5".parse().unwrap(),
            address6: Some("fd00::1".parse().unwrap()),
            port: 9917,
        },
        "the IPv4 pod IP wherever podIPs lists it, and the IPv6 one"
    );
    let sel = "labelSelector=app.kubernetes.io%2Fname%3Dprober%2Cprober.io%2Frun%3Dr1";
    let fs = "fieldSelector=type%3DWarning";
    let uris: Vec<&str> = seen.iter().map(|s| s.uri.as_str()).collect();
    assert_eq!(
        uris,
        [
            format!("/api/v1/namespaces/prober-system/pods?&{sel}&limit=500"),
            format!("/api/v1/namespaces/prober-system/events?&{fs}&limit=500"),
            format!(
                "/api/v1/namespaces/prober-system/pods?&watch=true&timeoutSeconds=31&{sel}&allowWatchBookmarks=true&resourceVersion=10"
            ),
            format!(
                "/api/v1/namespaces/prober-system/events?&watch=true&timeoutSeconds=31&{fs}&allowWatchBookmarks=true&resourceVersion=5"
            ),
        ],
        "no list every second"
    );
}

#[tokio::test]
async fn every_agent_stuck_pulling_fails_within_seconds_naming_the_image() {
    let (client, server) = serve(Box::new(|s| {
        let (path, q) = split(&s.uri);
        let stuck = |p: &str, n: &str, c: &str, st: &str| pod(p, n, c, "r1", st, "");
        match path.as_str() {
            "/api/v1/namespaces/prober-system/pods" if q.contains_key("watch") => watch_body(&[
                ("MODIFIED", stuck("h1", "cp1", "host-agent", "ErrImagePull")),
                (
                    "MODIFIED",
                    stuck("p1", "cp1", "pod-agent", "ImagePullBackOff"),
                ),
                (
                    "MODIFIED",
                    stuck("h2", "w1", "host-agent", "ImagePullBackOff"),
                ),
                (
                    "MODIFIED",
                    stuck("p2", "w1", "pod-agent", "ImagePullBackOff"),
                ),
            ]),
            "/api/v1/namespaces/prober-system/pods" => respond(
                200,
                &list_of(
                    "PodList",
                    vec![stuck("h1", "cp1", "host-agent", "pending")],
                    "10",
                ),
            ),
            _ => agents_router(s, "r1").unwrap_or_else(|| status(404, "NotFound")),
        }
    }));
    let started = std::time::Instant::now();
    let err = deploy::wait(
        &client,
        &run_spec(),
        &nodes(),
        std::time::Duration::from_secs(90),
        &|_, _| {},
    )
    .await
    .unwrap_err();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "not the whole 90 s"
    );
    drop(client);
    server.await.unwrap();
    assert!(matches!(err, DeployError::ImagePull { .. }));
    let text = err.to_string();
    assert!(
        text.contains("ghcr.io/prober-dev/prober:0.1.0")
            && text.contains("ErrImagePull: failed to pull and unpack image")
            && text.contains("--image"),
        "one error naming the image and the kubelet's message: {text}"
    );
}

#[tokio::test]
async fn a_refused_daemonset_says_why_from_its_failed_create_event() {
    let message = "pods \"probe-host-r1-x\" is forbidden: violates PodSecurity \"baseline:latest\": host namespaces (hostNetwork=true)";
    let (client, server) = serve(Box::new(move |s| {
        let (path, q) = split(&s.uri);
        match path.as_str() {
            // The pod agents run; the host DaemonSet could create no pod at all.
            "/api/v1/namespaces/prober-system/pods" if !q.contains_key("watch") => respond(
                200,
                &list_of(
                    "PodList",
                    vec![
                        pod("p1", "cp1", "pod-agent", "r1", "ready", "10.244.0.5"),
                        pod("p2", "w1", "pod-agent", "r1", "ready", "10.244.1.5"),
                    ],
                    "10",
                ),
            ),
            "/api/v1/namespaces/prober-system/events" if !q.contains_key("watch") => respond(
                200,
                &list_of(
                    "EventList",
                    vec![json!({
                        "metadata": {"name": "probe-host-r1.17a", "namespace": "prober-system"},
                        "involvedObject": {"kind": "DaemonSet", "name": "probe-host-r1", "namespace": "prober-system"},
                        "reason": "FailedCreate", "type": "Warning", "message": message
                    })],
                    "5",
                ),
            ),
            _ => status(404, "NotFound"),
        }
    }));
    let started = std::time::Instant::now();
    let (ready, missing) = deploy::wait(
        &client,
        &run_spec(),
        &nodes(),
        std::time::Duration::from_secs(90),
        &|_, _| {},
    )
    .await
    .unwrap();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "a refusal does not lift by waiting"
    );
    drop(client);
    let seen = server.await.unwrap();
    assert_eq!(seen.len(), 2, "decided from the lists, no watch needed");
    assert_eq!(ready.len(), 2);
    assert_eq!(missing.len(), 2);
    assert!(
        missing.iter().all(|m| m.agent == AgentKind::Host
            && m.detail
                == format!("the DaemonSet probe-host-r1 could not create its pod: {message}")),
        "{missing:?}"
    );
}

#[test]
fn agents_that_never_became_ready_are_reported_with_the_reason() {
    let p = |n: &str, node: &str, c: &str, st: &str, ip: &str| -> k8s_openapi::api::core::v1::Pod {
        serde_json::from_value(pod(n, node, c, "r1", st, ip)).unwrap()
    };
    let mut crashing = pod("h3", "w3", "host-agent", "r1", "CrashLoopBackOff", "");
    crashing["status"]["containerStatuses"][0]["lastState"] = json!({"terminated": {
        "exitCode": 2, "reason": "Error",
        "message": "probe-pod serve: cannot listen on tcp 0.0.0.0:9917: Address in use (os error 98)"}});
    let pods = [
        p("h1", "cp1", "host-agent", "ready", "192.168.56.10"),
        p("p1", "cp1", "pod-agent", "ready", "10.244.0.5"),
        p("h2", "w1", "host-agent", "ready", "192.168.56.11"),
        p("p2", "w1", "pod-agent", "ImagePullBackOff", ""),
        // Pending with no container status yet: only its events say why.
        p("p3", "w3", "pod-agent", "ContainerCreating", ""),
        serde_json::from_value(crashing).unwrap(),
    ];
    let nodes = ["cp1", "w1", "w2", "w3"].map(String::from);
    let w2: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
        "metadata": {"name": "w2"},
        "status": {"conditions": [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                                   "message": "Kubelet stopped posting node status."}]}}))
    .unwrap();
    let why = deploy::agents::Why {
        pod_events: BTreeMap::from([(
            "p3".to_string(),
            "FailedCreatePodSandBox: failed to setup network for sandbox: plugin type=\"flannel\" failed (add): open /run/flannel/subnet.env: no such file or directory".to_string(),
        )]),
        nodes: BTreeMap::from([("w2".to_string(), deploy::agents::node_down(&w2).unwrap())]),
        ..deploy::agents::Why::default()
    };
    let (ready, missing) = agents_from_pods(&pods, &nodes, &why);
    assert_eq!(ready.len(), 3);
    let why: Vec<(String, AgentKind, String)> = missing
        .iter()
        .map(|m| (m.node.clone(), m.agent, m.detail.clone()))
        .collect();
    assert_eq!(why.len(), 5, "{why:?}");
    assert!(
        why[0].0 == "w1" && why[0].1 == AgentKind::Pod && why[0].2.starts_with("ImagePullBackOff"),
        "{why:?}"
    );
    // The node's own condition, never "a taint" (the agents tolerate every taint).
    assert!(
        why[1..3].iter().all(|(n, _, d)| n == "w2"
            && d.contains("NotReady")
            && d.contains("Kubelet stopped posting")
            && !d.contains("taint")),
        "{why:?}"
    );
    // The crash's own words (FallbackToLogsOnError), and the sandbox failure by name.
    assert_eq!(why[3].0, "w3");
    assert!(
        why[3].2.starts_with("CrashLoopBackOff: it exited with 2")
            && why[3].2.contains("Address in use"),
        "{why:?}"
    );
    assert!(why[4].2.starts_with("FailedCreatePodSandBox: "), "{why:?}");
    // One node's pull failure is not "every agent": the others run.
    assert!(deploy::agents::all_stuck_pulling(&pods, 6).is_none());
}

/// A `DaemonSet`'s pod the scheduler cannot place has no `nodeName`, only the required node
/// affinity the `DaemonSet` controller gave it: it is that node's agent, missing in the
/// scheduler's words (its `PodScheduled` condition's, else its `FailedScheduling` event's).
#[test]
fn an_unschedulable_agent_is_found_by_its_node_affinity() {
    let fit = "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling.";
    let unplaced = |name: &str, component: &str, message: Option<&str>| {
        let mut p = pod(name, "", component, "r1", "pending", "");
        p["spec"].as_object_mut().unwrap().remove("nodeName");
        p["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["w3"]}]}]}}});
        p["status"]["conditions"] = json!([{"type": "PodScheduled", "status": "False",
            "reason": "Unschedulable", "message": message}]);
        serde_json::from_value::<k8s_openapi::api::core::v1::Pod>(p).unwrap()
    };
    let pods = [
        unplaced("h3", "host-agent", Some(fit)),
        unplaced("p3", "pod-agent", None),
    ];
    let why = deploy::agents::Why {
        pod_events: BTreeMap::from([("p3".to_string(), format!("FailedScheduling: {fit}"))]),
        ..deploy::agents::Why::default()
    };
    let (_, missing) = agents_from_pods(&pods, &["w3".to_string()], &why);
    assert_eq!(missing.len(), 2, "{missing:?}");
    for m in &missing {
        assert_eq!(
            m.detail,
            format!("Unschedulable: the scheduler cannot place it: {fit}"),
            "{m:?}"
        );
    }
}

/// A host agent that crashed because its port was taken says so in plain words, from the
/// agent's own typed line in its last log lines (`FallbackToLogsOnError`).
#[test]
fn a_crash_on_a_taken_port_says_the_port_is_in_use() {
    let mut crashing = pod("h1", "w1", "host-agent", "r1", "CrashLoopBackOff", "");
    crashing["status"]["containerStatuses"][0]["lastState"] = json!({"terminated": {
        "exitCode": 2, "reason": "Error",
        "message": "INFO serving\n{\"event\":\"portInUse\",\"protocol\":\"tcp\",\"port\":9917}\nprobe-pod serve: cannot listen on tcp [::]:9917: Address in use (os error 98)"}});
    let pods: [k8s_openapi::api::core::v1::Pod; 1] = [serde_json::from_value(crashing).unwrap()];
    let (_, missing) =
        agents_from_pods(&pods, &["w1".to_string()], &deploy::agents::Why::default());
    let host = missing.iter().find(|m| m.agent == AgentKind::Host).unwrap();
    assert!(
        host.detail
            .starts_with("CrashLoopBackOff: port 9917/tcp is in use on this node")
            && host.detail.contains("another prober run's host agents")
            && host.detail.contains("--host-agent-port"),
        "{}",
        host.detail
    );
}

#[tokio::test]
async fn exec_goes_through_the_api_server_with_the_plan_command() {
    use probe_proto::Plan;
    use prober::runtime::Runtime;
    use prober::runtime::kube::exec::KubeExec;
    let (client, server) = serve(Box::new(|_| status(403, "Forbidden")));
    let agent = AgentRef {
        node: "w1".into(),
        agent: AgentKind::Pod,
    };
    let agents = BTreeMap::from([(
        agent.clone(),
        AgentPod {
            pod: "probe-pod-x7k2p".into(),
            address: "10.244.1.5".parse().unwrap(),
            address6: None,
            port: 9917,
        },
    )]);
    let exec = KubeExec::new(client, "prober-system", agents);
    let plan: Plan = probe_proto::parse_plan(
        r#"{"deadlineMs":1000,"probes":[{"id":"a","kind":"icmp","address":"10.244.2.5"}]}"#,
    )
    .unwrap();
    let (tx, _rx) = tokio::sync::mpsc::channel(4);
    let err = exec
        .run(&agent, plan.clone(), tx)
        .await
        .expect_err("the mock refuses the upgrade");
    assert!(err.to_string().contains("probe-pod-x7k2p"), "{err}");
    let missing = exec
        .run(
            &AgentRef {
                node: "w9".into(),
                agent: AgentKind::Host,
            },
            plan,
            tokio::sync::mpsc::channel(1).0,
        )
        .await
        .unwrap_err();
    assert!(missing.to_string().contains("w9/host"), "{missing}");
    drop(exec);
    let seen = server.await.unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, "GET", "a WebSocket upgrade");
    assert_eq!(
        seen[0].uri,
        "/api/v1/namespaces/prober-system/pods/probe-pod-x7k2p/exec?&stdin=true&stdout=true&stderr=true&container=probe-pod&command=probe-pod&command=probe&command=--plan&command=-"
    );
}

#[test]
fn owned_objects_are_named_with_their_uid() {
    let o = Owned {
        name: "x".into(),
        uid: Some("u".into()),
    };
    assert_eq!(o.clone(), o);
}
