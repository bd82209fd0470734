//! `prober preflight` in the lab: the preflight scenarios pass `prober lab run`, and an operator's
//! run — the candidate reached through `ip netns exec`, the cluster from the lab's inventory —
//! exits 0 on a healthy join and 1 with exactly the gap, one way, toward the candidate.
//! Needs root, iproute2, nftables and dnsmasq (installed by scripts/test).
//! And preflight through the Kubernetes API against a `tower_test` mock API server (no root):
//! the exact requests it makes, and that none of them applies anything for the candidate.

mod common;

use common::{StateDir, agent, lab, lab_name, prober, require_root, root, text};

use std::process::Command;

/// `s` with every run of spaces made one space.
fn squash(s: &str) -> String {
    s.split(' ')
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

fn scenario(name: &str) -> String {
    root()
        .join("tests/scenarios/preflight")
        .join(format!("{name}.yaml"))
        .display()
        .to_string()
}

#[test]
fn preflight_scenarios_pass_lab_run() {
    if !require_root() {
        return;
    }
    let state = StateDir::new("run");
    let mut failed = Vec::new();
    for (name, must_say) in [
        (
            "healthy-join",
            "[ok]   nodes -> new udp/8472 (vxlan) ok n1, n2, n3",
        ),
        (
            "overlay-dropped-to-candidate",
            "[FAIL] nodes -> new udp/8472 (vxlan) TIMEOUT n1, n2, n3",
        ),
        (
            "port-in-use",
            "tcp/10250 is already in use on new by probe-pod (pid ",
        ),
        (
            "kubelet-rejected-from-control-plane",
            "tcp/10250 (the kubelet) is blocked from n1 to new",
        ),
        (
            "control-plane-etcd-blocked",
            "[FAIL] nodes -> new tcp/2380 TIMEOUT n1",
        ),
        (
            "loopback-resolver",
            "resolv.conf on new names 127.0.0.53: once it joins",
        ),
        (
            "clock-skew",
            "the clock of new is 120 s ahead of the API server's",
        ),
        (
            "underlay-mtu",
            "the underlay path MTU to and from new is below the 1500 bytes the overlay",
        ),
        (
            "kubelet-localhost",
            "/etc/kubernetes/kubelet.conf on new says server: https://localhost:6443",
        ),
        (
            "stale-cni-kubeconfig",
            "the token in /etc/cni/net.d/calico-kubeconfig on new",
        ),
        ("host-firewall-drop", "where host:new"),
        (
            "ip-forward-off",
            "new does not forward IPv4 (net.ipv4.ip_forward is 0)",
        ),
        ("router-rejects-control-plane", "rejected by 192.168."),
    ] {
        let out = lab(
            &[
                "run",
                "--name",
                &lab_name("pfr"),
                "--scenario",
                &scenario(name),
            ],
            &state,
        );
        let t = text(&out);
        // The checklist pads its columns to the widest row; compare with runs of spaces squashed.
        if out.status.code() != Some(0) || !squash(&t).contains(&squash(must_say)) {
            failed.push(format!(
                "{name}: {:?}, missing {must_say:?}\n{t}",
                out.status
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

/// `prober preflight` as an operator runs it, against a lab that is up; the JSON report.
fn operator_run(state: &StateDir, lab_name: &str) -> (Option<i32>, serde_json::Value, String) {
    let inventory = state
        .0
        .join(format!("plab-{lab_name}"))
        .join("inventory.yaml");
    let out = Command::new(prober())
        .args(["preflight", "--inventory"])
        .arg(&inventory)
        .args([
            "--candidate",
            "new",
            "--candidate-address",
            "192.168.57.249",
            "--candidate-exec",
            &format!("ip netns exec plab-{lab_name}-new"),
            "--candidate-host-root",
        ])
        // The lab's candidate root, never this machine's own `/` (the default).
        .arg(
            state
                .0
                .join(format!("plab-{lab_name}"))
                .join("nodes")
                .join("new"),
        )
        .arg("--agent-bin")
        .arg(agent())
        .args(["-o", "json"])
        .output()
        .unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out.status.code(), json, text(&out))
}

fn up(state: &StateDir, name: &str, file: &str) {
    let out = lab(
        &["up", "--name", name, "--scenario", &scenario(file)],
        state,
    );
    assert!(out.status.success(), "lab up {file}: {}", text(&out));
}

fn down(state: &StateDir, name: &str) {
    let out = lab(&["down", name], state);
    assert!(out.status.success(), "lab down {name}: {}", text(&out));
}

fn findings(report: &serde_json::Value) -> Vec<&serde_json::Value> {
    report["findings"]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

#[test]
fn an_operator_run_names_the_gap_one_way_toward_the_candidate() {
    if !require_root() {
        return;
    }
    let state = StateDir::new("op");
    let name = lab_name("pfo");
    up(&state, &name, "healthy-join");
    let (code, report, t) = operator_run(&state, &name);
    // The stand-ins are gone when the run ends: nothing listens on the candidate any more.
    let ss = Command::new("ip")
        .args(["netns", "exec", &format!("plab-{name}-new"), "ss", "-Hltun"])
        .output()
        .unwrap();
    down(&state, &name);
    let listening = String::from_utf8_lossy(&ss.stdout).to_string();
    assert!(
        ss.status.success() && listening.trim().is_empty(),
        "still listening: {listening}"
    );
    assert_eq!(code, Some(0), "{t}");
    assert_eq!(report["preflight"]["candidate"], "new", "{t}");
    assert!(findings(&report).is_empty(), "{t}");
    // Every required port both ways: the candidate to n1..n3 (kubelet, overlay, the underlay
    // MTU) and the API, and n1..n3 to the candidate (kubelet, overlay); and its files (from and
    // to itself).
    let results = report["results"].as_array().unwrap();
    let to_new = results.iter().filter(|r| r["to"]["node"] == "new").count();
    let from_new = results
        .iter()
        .filter(|r| r["from"]["node"] == "new")
        .count();
    assert_eq!((from_new, to_new), (3 + 3 + 3 + 1 + 1, 3 + 3 + 1), "{t}");

    let name = lab_name("pfo");
    up(&state, &name, "overlay-dropped-to-candidate");
    let (code, report, t) = operator_run(&state, &name);
    down(&state, &name);
    assert_eq!(code, Some(1), "{t}");
    let f = findings(&report);
    assert_eq!(
        f.len(),
        1,
        "one finding and nothing else called broken: {t}"
    );
    assert_eq!(f[0]["kind"], "firewall-gap");
    assert_eq!(f[0]["port"], 8472);
    assert_eq!(f[0]["direction"], "one");
    assert_eq!(f[0]["to"], serde_json::json!(["new"]));
    assert_eq!(f[0]["where"], "network");
}

// ---------------------------------------------------------------------------------------------
// Through the Kubernetes API, against a mock API server

#[allow(clippy::needless_pass_by_value)] // fixtures built inline
mod api {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use http::Response;
    use kube::client::Body;
    use probe_proto::{Plan, ProbeResult};
    use prober::model::AgentRef;
    use prober::plan::preflight::{Candidate, Role};
    use prober::run::RunConfig;
    use prober::run::preflight::{CLEANUP_DEADLINE, RUN_TTL, through_api};
    use prober::runtime::kube::deploy::Session;
    use prober::runtime::kube::discover::{build, read};
    use prober::runtime::{Runtime, RuntimeError};
    use serde_json::{Value, json};
    use test_kit::mock::{Seen, created, discovery_answer, list_of, respond, serve, split, status};
    use tokio::sync::mpsc;

    /// The kubeadm + flannel cluster of the discovery fixtures (cp1, w1, w2).
    fn discovery(s: &Seen) -> Response<Body> {
        discovery_answer("flannel", s)
    }

    fn agent_pod(name: &str, node: &str, component: &str, ready: bool, ip: &str) -> Value {
        json!({
            "metadata": {"name": name, "namespace": "prober-system", "resourceVersion": "11",
                         "labels": {"app.kubernetes.io/name": "prober", "app.kubernetes.io/component": component, "prober.io/run": "r1"}},
            "spec": {"nodeName": node, "containers": [{"name": "probe-pod"}]},
            "status": {
                "phase": if ready { "Running" } else { "Pending" },
                "podIP": if ready { json!(ip) } else { Value::Null },
                "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
            }
        })
    }

    fn agent_pods(ready: bool) -> Vec<Value> {
        let mut v = Vec::new();
        for (i, node) in ["cp1", "w1", "w2"].iter().enumerate() {
            v.push(agent_pod(
                &format!("h-{node}"),
                node,
                "host-agent",
                ready,
                &format!("192.168.56.1{i}"),
            ));
            v.push(agent_pod(
                &format!("p-{node}"),
                node,
                "pod-agent",
                ready,
                &format!("10.244.{i}.5"),
            ));
        }
        v
    }

    fn watch_body(objects: Vec<Value>) -> Response<Body> {
        let text: String = objects
            .into_iter()
            .map(|o| json!({"type": "MODIFIED", "object": o}).to_string() + "\n")
            .collect();
        Response::builder()
            .status(200)
            .body(Body::from(text.into_bytes()))
            .unwrap()
    }

    /// The agents' namespace: no permanent install; what is created is echoed with a uid; the
    /// agent pods are listed pending and then watched ready; `pods/exec` is refused (403: a
    /// mock cannot upgrade), so the existing nodes' probes are unknown, which is enough here.
    fn agents(s: &Seen, path: &str, watch: bool) -> Response<Body> {
        let ns = "/api/v1/namespaces/prober-system";
        match s.method.as_str() {
            "POST" => created(s),
            "DELETE" => status(200, "Success"),
            _ if path.ends_with("/daemonsets") => {
                respond(200, &list_of("DaemonSetList", Vec::new(), "1"))
            }
            _ if path == format!("{ns}/pods") && watch => watch_body(agent_pods(true)),
            _ if path == format!("{ns}/pods") => {
                respond(200, &list_of("PodList", agent_pods(false), "10"))
            }
            _ if path == format!("{ns}/events") && watch => watch_body(Vec::new()),
            _ if path == format!("{ns}/events") => {
                respond(200, &list_of("EventList", Vec::new(), "5"))
            }
            _ => status(403, "Forbidden"),
        }
    }

    /// The agents' namespace as `agents` answers it, the rest as discovery does.
    fn cluster() -> (kube::Client, tokio::task::JoinHandle<Vec<Seen>>) {
        serve(Box::new(|s| {
            let (path, query) = split(&s.uri);
            let watch = query.get("watch").is_some_and(|w| w == "true");
            if path.starts_with("/api/v1/namespaces/prober-system")
                || path.starts_with("/apis/apps/v1/namespaces/prober-system")
                || (path == "/api/v1/namespaces" && s.method == "POST")
                || (path.contains("/networkpolicies") && s.method != "GET")
            {
                agents(s, &path, watch)
            } else {
                discovery(s)
            }
        }))
    }

    /// One plan the candidate's side was given: the node, the probe ids.
    type Call = (String, Vec<String>);

    /// The candidate's side: records the plans it was given, answers nothing.
    #[derive(Default, Clone)]
    struct OnCandidate(Arc<Mutex<Vec<Call>>>);

    impl Runtime for OnCandidate {
        async fn run(
            &self,
            agent: &AgentRef,
            plan: Plan,
            _results: mpsc::Sender<ProbeResult>,
        ) -> Result<(), RuntimeError> {
            let ids = plan.probes.iter().map(|p| p.id.clone()).collect();
            self.0.lock().unwrap().push((agent.node.clone(), ids));
            Ok(())
        }
    }

    #[tokio::test]
    #[allow(clippy::too_many_lines)] // one run, then every request it made
    async fn through_the_api_it_deploys_as_matrix_does_and_applies_nothing_for_the_candidate() {
        let (client, server) = cluster();
        let raw = read(&client).await.unwrap();
        let inv = build(&raw).unwrap();
        let candidate = Candidate {
            name: "joiner".into(),
            address: "192.168.56.77".parse().unwrap(),
            exec: vec!["ssh".into(), "root@192.168.56.77".into()],
            role: Role::Worker,
            agent_port: probe_proto::Port::new(9917).unwrap(),
            host_root: None,
        };
        let on_candidate = OnCandidate::default();
        let session = Session {
            namespace: "prober-system".into(),
            image: "example/prober:test".into(),
            use_existing: false,
            keep_agents: false,
            wait: Duration::from_secs(30),
            run_id: "r1".into(),
            ttl: RUN_TTL.into(),
            cleanup_deadline: CLEANUP_DEADLINE,
            image_pull_secrets: Vec::new(),
            host_port: None,
        };
        let cfg = RunConfig {
            probe_timeout: Duration::from_millis(200),
            retries: 0,
            ..RunConfig::default()
        };
        let ran = through_api(
            &client,
            inv,
            &candidate,
            on_candidate.clone(),
            &session,
            &cfg,
            std::future::pending::<()>,
        )
        .await
        .unwrap();
        drop(client);
        let seen = server.await.unwrap();
        // Discovery is `read`'s (tests/kube/discover.rs pins it); from the permanent-install check on,
        // every request preflight makes, in order (the exec sessions run at once: sorted).
        let first = seen
            .iter()
            .position(|s| s.uri.contains("/namespaces/prober-system/daemonsets?"))
            .unwrap();
        let mut reqs: Vec<String> = seen[first..]
            .iter()
            .map(|s| format!("{} {}", s.method, s.uri))
            .collect();
        let exec_at = reqs.iter().position(|r| r.contains("/exec?")).unwrap();
        let exec_end = reqs.iter().rposition(|r| r.contains("/exec?")).unwrap() + 1;
        reqs[exec_at..exec_end].sort();
        let pf = "?&fieldManager=prober";
        let exec = |pod: &str| {
            format!(
                "GET /api/v1/namespaces/prober-system/pods/{pod}/exec?&stdin=true&stdout=true&stderr=true&container=probe-pod&command=probe-pod&command=probe&command=--plan&command=-"
            )
        };
        let runs =
            "GET /apis/apps/v1/namespaces/prober-system/daemonsets?&labelSelector=prober.io%2Frun";
        let want = [
            "GET /apis/apps/v1/namespaces/prober-system/daemonsets?&labelSelector=app.kubernetes.io%2Fname%3Dprober%2C%21prober.io%2Frun".to_string(),
            // The other prober host agents' ports, in the namespace deploy/base grants.
            "GET /apis/apps/v1/namespaces/prober-system/daemonsets?&labelSelector=app.kubernetes.io%2Fname%3Dprober".to_string(),
            "GET /api/v1/namespaces/prober-system".to_string(),
            format!("POST /api/v1/namespaces{pf}"),
            format!("POST /api/v1/namespaces/prober-system/serviceaccounts{pf}"),
            format!("POST /apis/networking.k8s.io/v1/namespaces/prober-system/networkpolicies{pf}"),
            format!("POST /apis/apps/v1/namespaces/prober-system/daemonsets{pf}"),
            format!("POST /apis/apps/v1/namespaces/prober-system/daemonsets{pf}"),
            runs.to_string(),
            "GET /api/v1/namespaces/prober-system/pods?&labelSelector=app.kubernetes.io%2Fname%3Dprober%2Cprober.io%2Frun%3Dr1&limit=500".to_string(),
            "GET /api/v1/namespaces/prober-system/events?&fieldSelector=type%3DWarning&limit=500".to_string(),
            reqs[11].clone(),
            reqs[12].clone(),
            exec("h-cp1"),
            exec("h-w1"),
            exec("h-w2"),
            format!("{runs}%3Dr1"),
            "GET /apis/networking.k8s.io/v1/namespaces/prober-system/networkpolicies?&labelSelector=prober.io%2Frun%3Dr1".to_string(),
            "GET /api/v1/namespaces/prober-system/serviceaccounts?&labelSelector=prober.io%2Frun%3Dr1".to_string(),
            "DELETE /apis/apps/v1/namespaces/prober-system/daemonsets/probe-pod-r1?".to_string(),
            "DELETE /apis/apps/v1/namespaces/prober-system/daemonsets/probe-host-r1?".to_string(),
            "DELETE /apis/networking.k8s.io/v1/namespaces/prober-system/networkpolicies/prober-agents-r1?".to_string(),
            "DELETE /api/v1/namespaces/prober-system/serviceaccounts/prober-agent-r1?".to_string(),
            // The run's own pods and whether their nodes are Ready: on a NotReady node no kubelet
            // confirms a graceful delete, so those would be ended with grace 0.
            "GET /api/v1/namespaces/prober-system/pods?&labelSelector=app.kubernetes.io%2Fname%3Dprober%2Cprober.io%2Frun%3Dr1".to_string(),
            "GET /api/v1/nodes?&limit=500".to_string(),
            runs.to_string(),
            "DELETE /api/v1/namespaces/prober-system?".to_string(),
            // The namespace it deleted, until it is gone, so the next run does not meet it.
            "GET /api/v1/namespaces/prober-system".to_string(),
        ];
        assert_eq!(reqs, want, "{reqs:#?}");
        // The watches, from the lists' versions (their timeouts follow the clock).
        assert!(
            reqs[11].starts_with("GET /api/v1/namespaces/prober-system/pods?&watch=true&")
                && reqs[11]
                    .ends_with("prober.io%2Frun%3Dr1&allowWatchBookmarks=true&resourceVersion=10"),
            "{}",
            reqs[11]
        );
        assert!(
            reqs[12].starts_with("GET /api/v1/namespaces/prober-system/events?&watch=true&")
                && reqs[12].ends_with("type%3DWarning&allowWatchBookmarks=true&resourceVersion=5"),
            "{}",
            reqs[12]
        );
        // Only what matrix creates (its allow policy and two DaemonSets); nothing that names or
        // selects the candidate.
        let names: Vec<&Value> = seen
            .iter()
            .filter(|s| s.method == "POST")
            .map(|s| &s.body["metadata"]["name"])
            .collect();
        assert_eq!(
            names,
            [
                &json!("prober-system"),
                &json!("prober-agent-r1"),
                &json!("prober-agents-r1"),
                &json!("probe-host-r1"),
                &json!("probe-pod-r1")
            ]
        );
        for s in &seen {
            let text = format!("{} {}", s.uri, s.body);
            assert!(
                !text.contains("joiner") && !text.contains("192.168.56.77"),
                "a request names the candidate: {} {text}",
                s.method
            );
        }
        // The candidate's probes went through its own runtime only, all of them at once.
        let calls = on_candidate.0.lock().unwrap().clone();
        assert_eq!(calls.len(), 1, "{calls:?}");
        let (node, ids) = &calls[0];
        assert_eq!(node, "joiner");
        let to = |what: &str| ids.iter().filter(|i| i.ends_with(what)).count();
        assert_eq!(
            (to("tls/6443"), to("tcp/10250"), to("vxlan/8472")),
            (1, 3, 3),
            "{ids:?}"
        );
        // The existing nodes' probes toward the candidate ran on their host agents (and are
        // unknown here, since the mock cannot exec): none went to the candidate's runtime.
        let toward: Vec<_> = ran
            .out
            .results
            .iter()
            .filter(|r| r.to.node.as_deref() == Some("joiner"))
            .collect();
        assert_eq!(
            toward.len(),
            6,
            "3 x kubelet + 3 x overlay toward the candidate"
        );
        assert!(toward.iter().all(|r| r.from.node != "joiner"));
        let joiner = ran
            .inventory
            .nodes
            .iter()
            .find(|n| n.name == "joiner")
            .unwrap();
        assert_eq!(joiner.agents.host.as_ref().unwrap().exec, candidate.exec);
    }
}
