//! The kube flow end to end: the real `prober` binary, with a kubeconfig, against the API
//! stand-in of the test kit (real HTTPS, watches, server-side apply, WebSocket exec, the API
//! server's own rules and the project's own `deploy/` RBAC), whose kubelet runs the agents'
//! `DaemonSet` pods inside a lab's namespaces. Tests without a lab check the stand-in's rules
//! through the real kube client; lab tests skip in one line without root.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{agent, netns_available, prober, root, text};
use prober::lab::scenario::Scenario;
use prober::lab::{Lab, Options};
use serde_json::{Value, json};
use test_kit::standin::{Config, NodeSpec, StandIn, seed};

/// The image the runs name: the stand-in's kubelet runs the agent cargo built for any image.
const IMAGE: &str = "registry.example/prober:e2e";

/// A cluster description for the stand-in from a lab's own inventory.
fn cluster_of(inv: &prober::inventory::Inventory) -> seed::Cluster {
    let dns = inv.cluster.dns.as_ref().expect("the lab has cluster DNS");
    let overlay = inv
        .cluster
        .overlay
        .as_ref()
        .expect("the lab has an overlay");
    let v4 = |a: &std::net::SocketAddr| match a.ip() {
        std::net::IpAddr::V4(v) => v,
        std::net::IpAddr::V6(_) => panic!("the lab is IPv4"),
    };
    seed::Cluster {
        nodes: inv
            .nodes
            .iter()
            .map(|n| seed::Node {
                name: n.name.clone(),
                address: n.address,
                pod_cidr: n.pod_cidr.expect("lab nodes have a pod range").to_string(),
                vtep_mac: n
                    .vtep
                    .as_ref()
                    .and_then(|v| v.mac)
                    .map(|m| m.to_string())
                    .unwrap_or_default(),
                control_plane: n.roles.iter().any(|r| r == "control-plane"),
                zone: n.zone.clone(),
            })
            .collect(),
        pod_cidr: inv.cluster.pod_cidr.to_string(),
        service_cidr: inv.cluster.service_cidr.to_string(),
        api_service: v4(&inv.cluster.api.service),
        api_endpoints: inv
            .cluster
            .api
            .endpoints
            .iter()
            .map(|e| (v4(e), e.port()))
            .collect(),
        dns_service: v4(&dns.service),
        dns_endpoints: dns
            .endpoints
            .iter()
            .map(|e| {
                let node = inv
                    .nodes
                    .iter()
                    .find(|n| n.pod_cidr.is_some_and(|c| c.contains(v4(e))))
                    .map(|n| n.name.clone())
                    .unwrap_or_default();
                (v4(e), node)
            })
            .collect(),
        corefile: dns.corefile.clone().unwrap_or_default(),
        vni: overlay.vni().map_or(0, probe_proto::Vni::get),
        vxlan_port: overlay.port().map_or(0, probe_proto::Port::get),
        flannel_namespace: "kube-flannel".into(),
    }
}

/// A lab without agents and a stand-in seeded from it, torn down on drop (pass, fail, panic).
struct KubeLab {
    standin: StandIn,
    lab: Lab,
    scenario: Scenario,
    _dir: tempfile::TempDir,
}

impl KubeLab {
    /// `rbac_as`: the service account in prober-system the coordinator's token is, every
    /// request authorised against the RBAC stored (None: no RBAC).
    fn up(name: &str, scenario: &str, rbac_as: Option<&str>) -> Option<Self> {
        Self::up_with(name, scenario, rbac_as, |_, _| {})
    }

    /// `up`, with the scenario and the stand-in's configuration changed by `change` first.
    fn up_with(
        name: &str,
        scenario: &str,
        rbac_as: Option<&str>,
        change: impl FnOnce(&mut Scenario, &mut Config),
    ) -> Option<Self> {
        if !netns_available() {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let mut s = Scenario::load(&root().join(scenario)).unwrap();
        let mut tuned = Config::new(&dir.path().join("standin"), Vec::new(), &agent());
        change(&mut s, &mut tuned);
        // A lab name of this process's own: another checkout may run the same test at once.
        let name = format!("{name}{}", std::process::id() % 100_000);
        let opts = Options {
            name: Some(name),
            state_root: dir.path().join("lab"),
            agent_bin: agent(),
            prober_bin: PathBuf::from(prober()),
            verbose: false,
        };
        let lab = Lab::up_without_agents(&s, &opts).unwrap();
        let nodes = lab
            .layout
            .nodes
            .iter()
            .map(|n| NodeSpec {
                name: n.name.clone(),
                netns: n.ns.clone(),
                address: n.address,
                pod_sandboxes: n.pods.iter().map(|p| (p.ns.clone(), p.address)).collect(),
                root: n.root.clone(),
            })
            .collect();
        let mut config = Config { nodes, ..tuned };
        if let Some(sa) = rbac_as {
            config.rbac = true;
            config.coordinator = ("prober-system".into(), sa.into());
        }
        let standin = StandIn::start(config).unwrap();
        let inv = prober::lab::build::inventory(&s, &lab.layout);
        standin.seed(seed::objects(&cluster_of(&inv)));
        Some(Self {
            standin,
            lab,
            scenario: s,
            _dir: dir,
        })
    }

    fn kubeconfig(&self) -> &Path {
        &self.standin.kubeconfig
    }
}

/// The project's own `deploy/base` (what `kubectl kustomize deploy/base` renders: its
/// kustomization only lists these files), keeping the documents `keep` accepts.
fn deploy_base(keep: impl Fn(&Value) -> bool) -> Vec<Value> {
    let mut out = Vec::new();
    for f in ["agents.yaml", "rbac.yaml"] {
        let text = std::fs::read_to_string(root().join("deploy/base").join(f)).unwrap();
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
        out.extend(docs.into_iter().filter(|d| !d.is_null() && keep(d)));
    }
    out
}

/// One of the repository's manifests, by its path.
fn deploy_file(path: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(root().join(path)).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// The requests since the `since`th that were refused (4xx but 404), except those into
/// namespaces the cluster does not have (discovery reads those knowing it may not).
fn refused(s: &StandIn, since: usize) -> Vec<test_kit::standin::Seen> {
    let namespaces: Vec<String> = s
        .list("namespaces")
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    s.seen()[since..]
        .iter()
        .filter(|r| r.code >= 400 && r.code != 404)
        .filter(|r| {
            !r.path.contains("/namespaces/")
                || namespaces
                    .iter()
                    .any(|n| r.path.contains(&format!("/namespaces/{n}/")))
        })
        .cloned()
        .collect()
}

fn is_agent_daemonset(d: &Value) -> bool {
    d["kind"] == "DaemonSet"
}

fn prober_cmd(args: &[&str], kubeconfig: &Path) -> Command {
    let mut c = Command::new(prober());
    c.args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env("NO_COLOR", "1")
        .env_remove("KUBECONFIG")
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy");
    c
}

fn run(args: &[&str], kubeconfig: &Path) -> Output {
    prober_cmd(args, kubeconfig).output().unwrap()
}

/// `prober matrix -o json` through the stand-in, creating its own agents, waiting `wait`.
fn matrix_through(k: &KubeLab, wait: &str) -> Output {
    run(
        &[
            "matrix",
            "-o",
            "json",
            "--image",
            IMAGE,
            "--agent-wait",
            wait,
        ],
        k.kubeconfig(),
    )
}

fn report(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON report ({e}):\n{}", text(out)))
}

/// The findings in a comparable form: kind and the fields that say what and where. Those only
/// about the host agents' node files are left out: the stand-in's kubelet mounts no hostPath
/// volumes (the agent finds no `/host`), while the lab's own agents read the host roots.
fn findings(r: &Value) -> Vec<String> {
    let node_files_only = |f: &Value| {
        f["evidence"].as_array().is_some_and(|e| {
            !e.is_empty()
                && e.iter()
                    .all(|id| id.as_str().is_some_and(|id| id.starts_with("node-config:")))
        })
    };
    let mut v: Vec<String> = r["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| !node_files_only(f))
        .map(|f| {
            json!({"kind": f["kind"], "protocol": f["protocol"], "port": f["port"],
                   "from": f["from"], "to": f["to"], "direction": f["direction"],
                   "nodes": f["nodes"], "state": f["state"]})
            .to_string()
        })
        .collect();
    v.sort();
    v
}

/// The failed results of a report.
fn failed(r: &Value) -> Value {
    let failed: Vec<&Value> = r["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|x| x["outcome"] != "ok")
        .collect();
    json!(failed)
}

/// Waits until `done` holds, or panics with `what` after `secs`.
fn eventually(secs: u64, what: &str, mut done: impl FnMut() -> Option<String>) {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        match done() {
            None => return,
            Some(why) if Instant::now() > until => panic!("{what}: {why}"),
            Some(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// What a run left in the cluster and on the nodes: objects labelled with a run, and processes.
fn leftovers(k: &KubeLab) -> Option<String> {
    let run_label = "prober.io/run";
    let mut left: Vec<String> = Vec::new();
    for plural in ["daemonsets", "serviceaccounts", "pods", "namespaces"] {
        for o in k.standin.list(plural) {
            let labels = &o["metadata"]["labels"];
            let of_run = labels
                .as_object()
                .is_some_and(|l| l.keys().any(|k| k.ends_with("/run") || k == run_label));
            if of_run {
                left.push(format!("{plural}/{}", o["metadata"]["name"]));
            }
        }
    }
    left.extend(
        k.standin
            .running()
            .iter()
            .map(|r| format!("process {} ({}) of pod {}", r.pid, r.what, r.pod)),
    );
    (!left.is_empty()).then(|| left.join(", "))
}

/// Waits until every agent pod of deploy/base is Ready.
fn agents_ready(k: &KubeLab, want: usize) {
    eventually(60, "the deploy/base agents never became ready", || {
        let ready = k
            .standin
            .list("pods")
            .iter()
            .filter(|p| p["metadata"]["namespace"] == "prober-system")
            .filter(|p| {
                p["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
            .count();
        (ready < want).then(|| format!("{ready} of {want} ready"))
    });
}

/// The lab's own inventory as discovery can know it: discovery cannot see the lab's exec
/// prefixes, agent binary and host roots (agents are found at run time), nor the lab's extra
/// DNS test name and the overlay MTU it does not read; the lab does not state the node files'
/// layout (discovery finds kubeadm's, which the lab's host roots follow), and its scenario lists
/// only the components it is about (discovery also finds the seeded `CoreDNS`). A node serving no
/// CNI port says so (`serves: []`) where the lab leaves it out.
fn comparable_inventory(v: &mut Value) {
    let top = v.as_object_mut().unwrap();
    for f in ["agentBin", "components"] {
        top.remove(f);
    }
    v["cluster"].as_object_mut().unwrap().remove("nodeFiles");
    for n in v["nodes"].as_array_mut().unwrap() {
        let n = n.as_object_mut().unwrap();
        for f in ["agents", "hostRoot"] {
            n.remove(f);
        }
        if n.get("serves")
            .is_some_and(|s| s.as_array().is_some_and(Vec::is_empty))
        {
            n.remove("serves");
        }
    }
    v["cluster"]["dns"].as_object_mut().unwrap().remove("names");
    v["cluster"]["overlay"]
        .as_object_mut()
        .unwrap()
        .remove("mtu");
}

#[test]
fn discover_and_matrix_through_the_standin_match_the_labs_inventory_and_leave_nothing() {
    let Some(k) = KubeLab::up("ke2m", "tests/scenarios/flannel-8472.yaml", Some("prober")) else {
        return;
    };
    // Every request is authorised against deploy/base's RBAC, as a cluster admin applied it
    // (the namespace, the coordinator's service account and roles; not the agents yet).
    k.standin
        .create_all(deploy_base(|d| !is_agent_daemonset(d)))
        .unwrap();

    // discover -o yaml: the lab's own inventory, as far as discovery can know it.
    let out = run(&["discover", "-o", "json"], k.kubeconfig());
    assert!(out.status.success(), "{}", text(&out));
    let mut found: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut lab: Value =
        serde_json::to_value(prober::lab::build::inventory(&k.scenario, &k.lab.layout)).unwrap();
    comparable_inventory(&mut found);
    comparable_inventory(&mut lab);
    assert_eq!(
        serde_json::to_string_pretty(&found).unwrap(),
        serde_json::to_string_pretty(&lab).unwrap(),
        "discovery through the stand-in differs from the lab's inventory"
    );

    // matrix --kubeconfig, no inventory: this run's own agents, created and removed.
    let out = matrix_through(&k, "60s");
    let kube = report(&out);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let expected = k.scenario.expanded_expect().findings;
    for want in &expected {
        assert!(
            kube["findings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| want.matches(&serde_json::from_value(f.clone()).unwrap())),
            "the kube run misses {want:?}:\n{}",
            text(&out)
        );
    }
    eventually(60, "the run left objects or processes behind", || {
        leftovers(&k)
    });
    assert!(
        !text(&out).contains(k.standin.token()),
        "the token was printed"
    );

    // The same lab probed from its inventory (agents now deploy/base's, serving every node):
    // exactly the same findings.
    k.standin
        .create_all(deploy_base(is_agent_daemonset))
        .unwrap();
    agents_ready(&k, k.lab.layout.nodes.len() * 2);
    let out = Command::new(prober())
        .args(["matrix", "-o", "json", "--inventory"])
        .arg(&k.lab.inventory_path)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let inventory = report(&out);
    assert_eq!(
        findings(&kube),
        findings(&inventory),
        "the kube run's findings:\n{:#}\nits failed results:\n{:#}",
        kube["findings"],
        failed(&kube)
    );
}

/// A stand-in without a lab: its rules, through the real kube client (no root needed).
fn bare_standin(rbac: bool) -> (StandIn, tempfile::TempDir) {
    bare_standin_with(rbac, "kube-flannel")
}

/// A stand-in without a lab whose cluster runs flannel in `flannel_namespace`.
fn bare_standin_with(rbac: bool, flannel_namespace: &str) -> (StandIn, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::new(dir.path(), Vec::new(), Path::new("/nonexistent/probe-pod"));
    config.rbac = rbac;
    config.terminating = Duration::from_secs(2);
    let s = StandIn::start(config).unwrap();
    let node = |name: &str, last: u8| seed::Node {
        name: name.into(),
        address: std::net::Ipv4Addr::new(192, 168, 56, last),
        pod_cidr: format!("10.244.{last}.0/24"),
        vtep_mac: format!("02:00:00:00:00:{last:02x}"),
        control_plane: last == 10,
        zone: None,
    };
    s.seed(seed::objects(&seed::Cluster {
        nodes: vec![node("n1", 10), node("n2", 11)],
        pod_cidr: "10.244.0.0/16".into(),
        service_cidr: "10.96.0.0/12".into(),
        api_service: std::net::Ipv4Addr::new(10, 96, 0, 1),
        api_endpoints: vec![(std::net::Ipv4Addr::new(192, 168, 56, 10), 6443)],
        dns_service: std::net::Ipv4Addr::new(10, 96, 0, 10),
        dns_endpoints: vec![(std::net::Ipv4Addr::new(10, 244, 10, 53), "n1".into())],
        corefile: ".:53 {\n    forward . /etc/resolv.conf\n}\n".into(),
        vni: 1,
        vxlan_port: 8472,
        flannel_namespace: flannel_namespace.into(),
    }));
    (s, dir)
}

fn client(s: &StandIn, kubeconfig: &Path) -> kube::Client {
    s.block_on(async {
        let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
        let cfg =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .unwrap();
        kube::Client::try_from(cfg).unwrap()
    })
}

fn api_code<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> (u16, String) {
    match r {
        Err(kube::Error::Api(s)) => (s.code, s.message),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[test]
#[allow(clippy::many_single_char_names, clippy::too_many_lines)] // one stand-in, rule after rule
fn the_standin_keeps_the_api_servers_rules() {
    use futures_util::StreamExt;
    use k8s_openapi::api::apps::v1::DaemonSet;
    use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace};
    use kube::api::{
        Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions, WatchEvent, WatchParams,
    };
    let (s, _dir) = bare_standin(false);
    let c = client(&s, &s.admin_kubeconfig);
    let pp = PostParams::default();
    s.block_on(async {
        let namespaces: Api<Namespace> = Api::all(c.clone());
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "t1"}})).unwrap();
        let made = namespaces.create(&pp, &ns).await.unwrap();
        // 409 AlreadyExists.
        assert_eq!(api_code(namespaces.create(&pp, &ns).await).0, 409);

        // pkg/apis/core/validation/events.go: an Event about a cluster-scoped object only in
        // "" or "default"; about a namespaced one, in its namespace.
        let event = |ns: &str, involved_ns: Option<&str>| -> Event {
            serde_json::from_value(json!({"metadata": {"name": format!("e-{ns}"), "namespace": ns},
                "involvedObject": {"kind": "Namespace", "name": "t1", "namespace": involved_ns},
                "reason": "Test", "message": "m", "type": "Normal"}))
            .unwrap()
        };
        let (code, msg) = api_code(Api::<Event>::namespaced(c.clone(), "t1").create(&pp, &event("t1", None)).await);
        assert_eq!(code, 422, "{msg}");
        assert!(msg.contains("does not match event.namespace"), "{msg}");
        Api::<Event>::namespaced(c.clone(), "default").create(&pp, &event("default", None)).await.unwrap();
        Api::<Event>::namespaced(c.clone(), "t1").create(&pp, &event("t1", Some("t1"))).await.unwrap();

        // pkg/apis/apps/validation/validation.go: a DaemonSet restarts always.
        let ds = |policy: Option<&str>| -> DaemonSet {
            serde_json::from_value(json!({"metadata": {"name": format!("d{}", policy.unwrap_or("x").to_lowercase())},
                "spec": {"selector": {"matchLabels": {"a": "b"}},
                  "template": {"metadata": {"labels": {"a": "b"}},
                    "spec": {"restartPolicy": policy, "nodeSelector": {"none": "none"},
                             "containers": [{"name": "c", "image": "i"}]}}}}))
            .unwrap()
        };
        let dss: Api<DaemonSet> = Api::namespaced(c.clone(), "t1");
        let (code, msg) = api_code(dss.create(&pp, &ds(Some("Never"))).await);
        assert_eq!(code, 422, "{msg}");
        assert!(msg.contains("spec.template.spec.restartPolicy"), "{msg}");
        let d = dss.create(&pp, &ds(None)).await.unwrap();
        assert_eq!(d.spec.unwrap().template.spec.unwrap().restart_policy.as_deref(), Some("Always"));

        // Delete preconditions: another uid is a 409; a missing object a 404.
        let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "t1");
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "m"}, "data": {"k": "v"}})).unwrap();
        cms.create(&pp, &cm).await.unwrap();
        let wrong = DeleteParams { preconditions: Some(Preconditions { uid: Some("other".into()), resource_version: None }), ..DeleteParams::default() };
        let (code, msg) = api_code(cms.delete("m", &wrong).await);
        assert_eq!(code, 409, "{msg}");
        assert!(msg.contains("Precondition failed"), "{msg}");
        assert_eq!(api_code(cms.delete("nothing", &DeleteParams::default()).await).0, 404);

        // Server-side apply: another manager's field is a conflict unless forced.
        let patch = |v: &str| Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": v}}));
        cms.patch("a", &PatchParams::apply("one"), &patch("1")).await.unwrap();
        let (code, msg) = api_code(cms.patch("a", &PatchParams::apply("two"), &patch("2")).await);
        assert_eq!(code, 409, "{msg}");
        let forced = cms.patch("a", &PatchParams::apply("two").force(), &patch("2")).await.unwrap();
        assert_eq!(forced.data.unwrap()["k"], "2");

        // Selectors.
        let labelled: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "l", "labels": {"x": "y"}}})).unwrap();
        cms.create(&pp, &labelled).await.unwrap();
        let list = cms.list(&kube::api::ListParams::default().labels("x=y")).await.unwrap();
        assert_eq!(list.items.len(), 1);
        let list = cms.list(&kube::api::ListParams::default().fields("metadata.name=m")).await.unwrap();
        assert_eq!(list.items.len(), 1);

        // A watch from a compacted version: 410 Gone in the stream.
        let version = list.metadata.resource_version.unwrap();
        let later: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "later"}})).unwrap();
        cms.create(&pp, &later).await.unwrap();
        s.compact();
        let mut w = Box::pin(cms.watch(&WatchParams::default().timeout(5), &version).await.unwrap());
        match w.next().await {
            Some(Ok(WatchEvent::Error(e))) => assert_eq!(e.code, 410),
            other => panic!("expected 410 Gone, got {other:?}"),
        }
        // From now: sees a new object.
        let now = cms.list(&kube::api::ListParams::default()).await.unwrap().metadata.resource_version.unwrap();
        let mut w = Box::pin(cms.watch(&WatchParams::default().timeout(5), &now).await.unwrap());
        let n: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "new"}})).unwrap();
        cms.create(&pp, &n).await.unwrap();
        match w.next().await {
            Some(Ok(WatchEvent::Added(o))) => assert_eq!(o.metadata.name.as_deref(), Some("new")),
            other => panic!("expected the new object, got {other:?}"),
        }

        // 429 with Retry-After: kube's client waits and asks again.
        s.faults(|f| f.throttle = 1);
        cms.get("m").await.unwrap();
        let codes: Vec<u16> = s
            .seen()
            .iter()
            .filter(|r| r.path.ends_with("/configmaps/m"))
            .map(|r| r.code)
            .collect();
        assert!(codes.ends_with(&[429, 200]), "{codes:?}");

        // plugin/pkg/admission/namespace/lifecycle: a deleted namespace is Terminating for a
        // while, creates in it are 403, then it is gone (404).
        namespaces.delete("t1", &DeleteParams { preconditions: Some(Preconditions { uid: made.metadata.uid.clone(), resource_version: None }), ..DeleteParams::default() }).await.unwrap();
        let other: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "late"}})).unwrap();
        let (code, msg) = api_code(cms.create(&pp, &other).await);
        assert_eq!(code, 403, "{msg}");
        assert!(msg.contains("because it is being terminated"), "{msg}");
        tokio::time::sleep(Duration::from_secs(3)).await;
        let (code, msg) = api_code(cms.create(&pp, &other).await);
        assert_eq!(code, 404, "{msg}");
        assert!(namespaces.get_opt("t1").await.unwrap().is_none());
    });
}

#[test]
fn the_standin_authorises_every_request_against_deploy_base_rbac() {
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    use kube::api::{Api, ListParams};
    let (s, _dir) = bare_standin(true);
    s.create_all(deploy_base(|d| !is_agent_daemonset(d)))
        .unwrap();
    let c = client(&s, &s.kubeconfig);
    s.block_on(async {
        // Allowed by deploy/base: the nodes; the CoreDNS ConfigMap by name.
        Api::<k8s_openapi::api::core::v1::Node>::all(c.clone())
            .list(&ListParams::default())
            .await
            .unwrap();
        Api::<ConfigMap>::namespaced(c.clone(), "kube-system")
            .get("coredns")
            .await
            .unwrap();
        // Not allowed: secrets anywhere, another ConfigMap.
        let (code, msg) = api_code(
            Api::<Secret>::namespaced(c.clone(), "kube-system")
                .list(&ListParams::default())
                .await,
        );
        assert_eq!(code, 403, "{msg}");
        assert!(msg.contains("cannot list resource \"secrets\""), "{msg}");
        let (code, _) = api_code(
            Api::<ConfigMap>::namespaced(c.clone(), "kube-system")
                .get("kubeadm-config")
                .await,
        );
        assert_eq!(code, 403);
    });
    // The discovery the CLI makes passes under that RBAC (with the optional file for the CNI
    // namespace this cluster has): refused only in namespaces the cluster does not have.
    s.create_all(deploy_file("deploy/base/optional/kube-flannel.yaml"))
        .unwrap();
    let before = s.seen().len();
    let out = run(&["discover", "-o", "json"], &s.kubeconfig);
    assert!(out.status.success(), "{}", text(&out));
    let refused = refused(&s, before);
    assert!(refused.is_empty(), "discovery was refused: {refused:?}");
}

#[test]
fn pod_security_baseline_refuses_the_host_agent_with_a_failed_create_event() {
    let (s, _dir) = bare_standin(false);
    let mut objects = deploy_base(|d| {
        d["kind"] == "Namespace" || d["kind"] == "DaemonSet" || d["kind"] == "ServiceAccount"
    });
    for o in &mut objects {
        if o["kind"] == "Namespace" {
            o["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = json!("baseline");
        }
    }
    s.create_all(objects).unwrap();
    eventually(10, "no FailedCreate event", || {
        let events = s.list("events");
        let refused = events.iter().any(|e| {
            e["reason"] == "FailedCreate"
                && e["involvedObject"]["name"] == "probe-host"
                && e["message"].as_str().unwrap_or_default().contains(
                    "violates PodSecurity \"baseline:latest\": host namespaces (hostNetwork=true)",
                )
        });
        (!refused).then(|| format!("{events:?}"))
    });
    assert!(
        s.list("pods")
            .iter()
            .all(|p| p["metadata"]["labels"]["app.kubernetes.io/component"] != "host-agent"),
        "a host agent pod was admitted"
    );
}

#[test]
fn https_proxy_with_no_proxy_covering_the_api_server_reaches_it() {
    let (s, _dir) = bare_standin(false);
    let out = prober_cmd(&["discover", "-o", "json"], &s.kubeconfig)
        // Nothing listens there: a request through the proxy would fail.
        .env("HTTPS_PROXY", "http://127.0.0.1:9")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
}

/// The Events prober wrote (labelled as its own), by reason.
fn prober_events(s: &StandIn) -> Vec<String> {
    s.list("events")
        .iter()
        .filter(|e| e["metadata"]["labels"]["app.kubernetes.io/name"] == "prober")
        .map(|e| e["reason"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The scheduled mode (the `CronJob`'s own arguments) against deploy/base's agents, twice: the
/// API server accepts its Events, the memory is written, the second run announces nothing new.
#[test]
fn the_scheduled_flow_twice_announces_each_change_once_and_remembers_it() {
    let Some(k) = KubeLab::up(
        "ke2s",
        "tests/scenarios/flannel-8472.yaml",
        Some("prober-scheduled"),
    ) else {
        return;
    };
    // deploy/scheduled: the base, its own RBAC (the CronJob's service account), and the
    // optional bindings for the CNI namespace this cluster has.
    k.standin.create_all(deploy_base(|_| true)).unwrap();
    k.standin
        .create_all(deploy_file("deploy/scheduled/rbac.yaml"))
        .unwrap();
    k.standin
        .create_all(deploy_file("deploy/base/optional/kube-flannel.yaml"))
        .unwrap();
    agents_ready(&k, k.lab.layout.nodes.len() * 2);
    let args = ["matrix", "--use-existing", "--remember", "-o", "json"];
    let first = run(&args, k.kubeconfig());
    assert_eq!(first.status.code(), Some(1), "{}", text(&first));
    let refused = refused(&k.standin, 0);
    assert!(refused.is_empty(), "refused: {refused:?}\n{}", text(&first));
    let announced = prober_events(&k.standin);
    assert!(
        announced.iter().any(|r| r == "FirewallGap"),
        "{announced:?}\n{}",
        text(&first)
    );
    assert!(
        k.standin
            .get("configmaps", "prober-system", "prober-last-report")
            .is_some(),
        "no memory written:\n{}",
        text(&first)
    );
    let second = run(&args, k.kubeconfig());
    assert_eq!(second.status.code(), Some(1), "{}", text(&second));
    assert_eq!(
        prober_events(&k.standin),
        announced,
        "the second run announced again:\n{}",
        text(&second)
    );
    // A permanent install is used as it is: nothing created, nothing removed.
    assert_eq!(
        k.standin
            .list("daemonsets")
            .iter()
            .filter(|d| d["metadata"]["namespace"] == "prober-system")
            .count(),
        2
    );
}

/// A run right after another that created (and deleted) its own namespace: the namespace is
/// still Terminating, and the second run must neither fail with a raw 403 nor leave anything.
#[test]
fn a_rerun_while_the_last_namespace_terminates_runs() {
    let Some(k) = KubeLab::up("ke2r", "tests/scenarios/healthy.yaml", None) else {
        return;
    };
    let first = matrix_through(&k, "60s");
    report(&first);
    assert!(
        k.standin
            .get("namespaces", "", "prober-system")
            .is_some_and(|n| n["status"]["phase"] == "Terminating"),
        "the first run's namespace should be terminating:\n{}",
        text(&first)
    );
    let second = matrix_through(&k, "60s");
    let r = report(&second);
    assert!(
        r["results"].as_array().is_some_and(|v| !v.is_empty()),
        "{}",
        text(&second)
    );
    eventually(60, "the runs left objects or processes behind", || {
        leftovers(&k)
    });
}

/// An exec stream that breaks mid-run: that agent's probes are reported with the cause within
/// seconds; the other agents' results are kept.
#[test]
fn an_exec_stream_cut_mid_run_is_reported_with_its_cause_and_the_rest_kept() {
    let Some(k) = KubeLab::up("ke2c", "tests/scenarios/healthy.yaml", None) else {
        return;
    };
    k.standin.faults(|f| f.exec_cut = Some(("n2".into(), 200)));
    let started = Instant::now();
    let out = matrix_through(&k, "60s");
    let took = started.elapsed();
    let r = report(&out);
    let from = |node: &str| {
        r["results"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|x| x["from"]["node"] == node)
            .cloned()
            .collect::<Vec<_>>()
    };
    assert!(
        from("n1").iter().any(|x| x["outcome"] == "ok"),
        "n1's results were lost:\n{}",
        text(&out)
    );
    let n2_failed: Vec<String> = r["agents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["node"] == "n2" && a["ran"] == false)
        .map(|a| a["detail"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(
        !n2_failed.is_empty(),
        "the cut stream was not reported as n2's agent failing:\n{}",
        text(&out)
    );
    // The cause is the broken stream, not the plan's deadline (how long it took is printed,
    // not asserted: a busy machine is slow).
    eprintln!("run with a cut exec stream took {took:?}; n2: {n2_failed:?}");
    assert!(
        n2_failed
            .iter()
            .all(|d| !d.contains("did not finish within")
                && ["stream", "connection", "closed", "lost", "broke"]
                    .iter()
                    .any(|w| d.contains(w))),
        "n2's agent should be reported with the broken stream as its cause: {n2_failed:?}"
    );
    eventually(60, "the run left objects or processes behind", || {
        leftovers(&k)
    });
}

/// Agents Pending for 40 s on one node (a slow image pull): the wait keeps watching, quiet
/// for longer than any read timeout, and the run goes on with every agent.
#[test]
fn agents_pending_for_40_seconds_are_waited_for() {
    let Some(k) = KubeLab::up("ke2p", "tests/scenarios/healthy.yaml", None) else {
        return;
    };
    k.standin.faults(|f| {
        f.pending.insert("n3".into(), Duration::from_secs(40));
    });
    let out = matrix_through(&k, "90s");
    let r = report(&out);
    let missing: Vec<&Value> = r["agents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["ran"] == false)
        .collect();
    assert!(
        missing.is_empty(),
        "agents missing: {missing:?}\n{}",
        text(&out)
    );
    eventually(60, "the run left objects or processes behind", || {
        leftovers(&k)
    });
}

/// Flannel in kube-system (its older manifests): discovery reads its `ConfigMap` there, and
/// deploy/base's RBAC must allow it.
#[test]
fn deploy_base_rbac_allows_discovery_of_flannel_in_kube_system() {
    let (s, _dir) = bare_standin_with(true, "kube-system");
    s.create_all(deploy_base(|d| !is_agent_daemonset(d)))
        .unwrap();
    let before = s.seen().len();
    let out = run(&["discover", "-o", "json"], &s.kubeconfig);
    assert!(out.status.success(), "{}", text(&out));
    let refused = refused(&s, before);
    assert!(refused.is_empty(), "discovery was refused: {refused:?}");
}

/// Starts `prober matrix -o json` through the stand-in, not waiting for it.
fn spawn_matrix(k: &KubeLab, wait: &str) -> std::process::Child {
    prober_cmd(
        &[
            "matrix",
            "-o",
            "json",
            "--image",
            IMAGE,
            "--agent-wait",
            wait,
        ],
        k.kubeconfig(),
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap()
}

/// Ctrl-C in each phase of a run (creating its objects, waiting for its agents, probing through
/// exec, removing its objects): the run stops and leaves no object and no process.
#[test]
fn ctrl_c_in_each_phase_leaves_nothing_behind() {
    let Some(k) = KubeLab::up("ke2i", "tests/scenarios/healthy.yaml", None) else {
        return;
    };
    let interrupt = |phase: &str, ready: &dyn Fn(&[test_kit::standin::Seen]) -> bool| {
        let before = k.standin.seen().len();
        let child = spawn_matrix(&k, "60s");
        eventually(
            60,
            &format!("the run never reached the {phase} phase"),
            || {
                (!ready(&k.standin.seen()[before..]))
                    .then(|| format!("{:?}", &k.standin.seen()[before..]))
            },
        );
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
        let out = child.wait_with_output().unwrap();
        k.standin
            .faults(|f| *f = test_kit::standin::Faults::default());
        eventually(
            30,
            &format!("Ctrl-C while {phase} left objects or processes"),
            || leftovers(&k).map(|l| format!("{l}\n{}", text(&out))),
        );
    };
    // Creating: every write takes a second; interrupted once the first object is made.
    k.standin
        .faults(|f| f.slow_writes = Some(Duration::from_secs(1)));
    interrupt("apply", &|seen| seen.iter().any(|r| r.method == "POST"));
    // Waiting: the agents stay Pending.
    k.standin.faults(|f| {
        for n in ["n1", "n2", "n3"] {
            f.pending.insert(n.into(), Duration::from_secs(60));
        }
    });
    interrupt("wait", &|seen| {
        seen.iter()
            .any(|r| r.path.ends_with("/pods") && r.query.contains("watch"))
    });
    // Probing: once an exec session is open.
    interrupt("exec", &|seen| {
        seen.iter().any(|r| r.path.ends_with("/exec"))
    });
    // Removing: every write slow again, interrupted after the first delete.
    k.standin
        .faults(|f| f.slow_writes = Some(Duration::from_secs(1)));
    interrupt("cleanup", &|seen| seen.iter().any(|r| r.method == "DELETE"));
}

/// Two runs at once in one namespace: the first gets every agent; the second either does too or
/// refuses, naming the run in its way (never wiping it); nothing is left behind.
#[test]
fn two_concurrent_runs_each_get_their_agents_and_leave_nothing() {
    // A namespace goes within a second of its deletion (one with few objects often does).
    let Some(k) = KubeLab::up_with("ke2k", "tests/scenarios/healthy.yaml", None, |s, c| {
        s.pods_per_node = 2;
        c.terminating = Duration::from_secs(1);
    }) else {
        return;
    };
    // B starts while A probes: A's agents hold their nodes' host port, A's cleanup comes first.
    let a = spawn_matrix(&k, "60s");
    eventually(60, "the first run never probed", || {
        (!k.standin.seen().iter().any(|r| r.path.ends_with("/exec"))).then(String::new)
    });
    let b = spawn_matrix(&k, "60s");
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let all_agents = |out: &Output| {
        let r = report(out);
        let missing: Vec<Value> = r["agents"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["ran"] == false)
            .cloned()
            .collect();
        assert!(
            missing.is_empty(),
            "agents missing: {missing:?}\n{}",
            text(out)
        );
    };
    all_agents(&a);
    if b.status.code() == Some(2) {
        assert!(text(&b).contains("another prober run"), "{}", text(&b));
    } else {
        all_agents(&b);
    }
    eventually(60, "the runs left objects or processes behind", || {
        leftovers(&k)
    });
}

/// Why an agent is missing, per node, in the cluster's own words: a `NotReady` node says so, a
/// pod sandbox the CNI could not make says `FailedCreatePodSandBox` (the broken-CNI case prober
/// exists for), not `ContainerCreating`.
#[test]
fn missing_agents_are_explained_by_their_nodes_and_pods_events() {
    let Some(k) = KubeLab::up("ke2w", "tests/scenarios/healthy.yaml", None) else {
        return;
    };
    k.standin.faults(|f| {
        f.not_ready.insert("n2".into());
        f.sandbox.insert("n3".into());
    });
    let out = matrix_through(&k, "20s");
    let r = report(&out);
    let detail = |node: &str, agent: &str| {
        r["agents"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["node"] == node && a["agent"] == agent && a["ran"] == false)
            .and_then(|a| a["detail"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    let n2 = detail("n2", "host");
    assert!(n2.contains("NotReady"), "n2: {n2:?}\n{}", text(&out));
    let n3 = detail("n3", "pod");
    assert!(
        n3.contains("FailedCreatePodSandBox"),
        "n3: {n3:?}\n{}",
        text(&out)
    );
    eventually(60, "the run left objects or processes behind", || {
        leftovers(&k)
    });
}
