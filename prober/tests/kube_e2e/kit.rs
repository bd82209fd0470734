//! The harness: a lab whose nodes the stand-in's kubelet runs agents in, the project's own
//! manifests, `prober` through the stand-in, and what a run left behind.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::common::{agent, lab_name, prober, require_root, root, text};
pub(crate) use crate::common::{eventually, report};
use prober::lab::scenario::Scenario;
use prober::lab::{Lab, Options};
use serde_json::Value;
use test_kit::standin::{Config, NodeSpec, StandIn, seed};

/// The image the runs name: the stand-in's kubelet runs the agent cargo built for any image.
pub(crate) const IMAGE: &str = "registry.example/prober:e2e";

/// A cluster description for the stand-in from a lab's own inventory.
pub(crate) fn cluster_of(inv: &prober::inventory::Inventory) -> seed::Cluster {
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
                control_plane: n.is_control_plane(),
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
pub(crate) struct KubeLab {
    pub(crate) standin: StandIn,
    pub(crate) lab: Lab,
    _dir: tempfile::TempDir,
}

impl KubeLab {
    /// `rbac_as`: the service account in prober-system the coordinator's token is, every
    /// request authorised against the RBAC stored (None: no RBAC).
    pub(crate) fn up(name: &str, scenario: &str, rbac_as: Option<&str>) -> Option<Self> {
        Self::up_with(name, scenario, rbac_as, |_, _| {})
    }

    /// `up`, with the scenario and the stand-in's configuration changed by `change` first.
    pub(crate) fn up_with(
        name: &str,
        scenario: &str,
        rbac_as: Option<&str>,
        change: impl FnOnce(&mut Scenario, &mut Config),
    ) -> Option<Self> {
        if !require_root() {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let mut s = Scenario::load(&root().join(scenario)).unwrap();
        let mut tuned = Config::new(&dir.path().join("standin"), Vec::new(), &agent());
        change(&mut s, &mut tuned);
        // A lab name of this run's own (PROBER_TEST_RUN's tag, which scripts/test's cleanup
        // looks for): another checkout may run the same test at once.
        let name = lab_name(name);
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
            _dir: dir,
        })
    }

    pub(crate) fn kubeconfig(&self) -> &Path {
        &self.standin.kubeconfig
    }
}

/// The project's own `deploy/base` (what `kubectl kustomize deploy/base` renders: its
/// kustomization only lists these files), keeping the documents `keep` accepts.
pub(crate) fn deploy_base(keep: impl Fn(&Value) -> bool) -> Vec<Value> {
    let mut out = Vec::new();
    for f in ["agents.yaml", "rbac.yaml"] {
        let text = std::fs::read_to_string(root().join("deploy/base").join(f)).unwrap();
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
        out.extend(docs.into_iter().filter(|d| !d.is_null() && keep(d)));
    }
    out
}

/// One of the repository's manifests, by its path.
pub(crate) fn deploy_file(path: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(root().join(path)).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// The requests since the `since`th that were refused (4xx but 404), except those into
/// namespaces the cluster does not have (discovery reads those knowing it may not).
pub(crate) fn refused(s: &StandIn, since: usize) -> Vec<test_kit::standin::Seen> {
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

pub(crate) fn is_agent_daemonset(d: &Value) -> bool {
    d["kind"] == "DaemonSet"
}

pub(crate) fn prober_cmd(args: &[&str], kubeconfig: &Path) -> Command {
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

pub(crate) fn run(args: &[&str], kubeconfig: &Path) -> Output {
    prober_cmd(args, kubeconfig).output().unwrap()
}

/// `prober matrix -o json` through the stand-in, creating its own agents, waiting `wait`,
/// its agents in `namespace` (None: the default, prober-system).
pub(crate) fn matrix_cmd(k: &KubeLab, wait: &str, namespace: Option<&str>) -> Command {
    let mut args = vec![
        "matrix",
        "-o",
        "json",
        "--image",
        IMAGE,
        "--agent-wait",
        wait,
    ];
    if let Some(ns) = namespace {
        args.extend(["--namespace", ns]);
    }
    prober_cmd(&args, k.kubeconfig())
}

/// Fails unless every agent of the run that printed `out` ran.
pub(crate) fn no_agent_missing(out: &Output) {
    let r = report(out);
    let missing: Vec<&Value> = r["agents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["ran"] == false)
        .collect();
    assert!(
        missing.is_empty(),
        "agents missing: {missing:?}\n{}",
        text(out)
    );
}

/// Waits until the runs on `k` left no object and no process behind.
pub(crate) fn nothing_left(k: &KubeLab) {
    eventually(60, "the run left objects or processes behind", || {
        leftovers(k)
    });
}

/// What a run left in the cluster and on the nodes: objects labelled with a run, and processes.
pub(crate) fn leftovers(k: &KubeLab) -> Option<String> {
    leftovers_beside(k, None)
}

/// [`leftovers`], but for the processes of `permanent`'s pods (deploy/base's agents there).
pub(crate) fn leftovers_beside(k: &KubeLab, permanent: Option<&str>) -> Option<String> {
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
            .filter(|r| Some(r.namespace.as_str()) != permanent)
            .map(|r| format!("process {} ({}) of pod {}", r.pid, r.what, r.pod)),
    );
    (!left.is_empty()).then(|| left.join(", "))
}

/// Waits until every agent pod of deploy/base is Ready.
pub(crate) fn agents_ready(k: &KubeLab, want: usize) {
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

pub(crate) fn bare_standin(rbac: bool) -> (StandIn, tempfile::TempDir) {
    bare_standin_with(rbac, "kube-flannel")
}

/// A stand-in without a lab whose cluster runs flannel in `flannel_namespace`.
pub(crate) fn bare_standin_with(
    rbac: bool,
    flannel_namespace: &str,
) -> (StandIn, tempfile::TempDir) {
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

pub(crate) fn client(s: &StandIn, kubeconfig: &Path) -> kube::Client {
    s.block_on(async {
        let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
        let cfg =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .unwrap();
        kube::Client::try_from(cfg).unwrap()
    })
}

pub(crate) fn api_code<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> (u16, String) {
    match r {
        Err(kube::Error::Api(s)) => (s.code, s.message),
        other => panic!("expected an API error, got {other:?}"),
    }
}
