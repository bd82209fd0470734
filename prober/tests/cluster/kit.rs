//! The harness: a lab built for a real control plane, the control plane started in it with a
//! shim per node, the cluster's own objects as a kubeadm cluster with flannel has them, and
//! `prober`/`kubectl` run from the control-plane node's namespace.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::common::{agent, lab_name, prober, require_root, root, text};
pub(crate) use crate::common::{eventually, report};
use prober::lab::scenario::Scenario;
use prober::lab::{Lab, Options};
use serde_json::{Value, json};
use test_kit::cluster::{Cluster, Config, Image, NodeSpec};

/// The image the runs name; the shims run the binaries cargo built for it.
pub(crate) const IMAGE: &str = "registry.example/prober:e2e";
/// The image deploy/ names: the same binaries.
pub(crate) const DEPLOY_IMAGE: &str = "ghcr.io/prober-dev/prober:0.1.0";

/// A lab and the real control plane in it, both torn down on drop (pass, fail, panic): the
/// cluster first (its shims end their pods), then the lab's namespaces.
pub(crate) struct RealLab {
    pub(crate) cluster: Cluster,
    pub(crate) lab: Lab,
    pub(crate) scenario: Scenario,
    _dir: tempfile::TempDir,
}

impl RealLab {
    pub(crate) fn up(name: &str, scenario: &str) -> Option<Self> {
        Self::up_with(name, scenario, |_| {})
    }

    pub(crate) fn up_with(
        name: &str,
        scenario: &str,
        change: impl FnOnce(&mut Config),
    ) -> Option<Self> {
        Self::up_full(name, scenario, change, None)
    }

    /// `up`, with flannel's own objects (its upstream manifest) instead of the seeded ones.
    pub(crate) fn up_with_flannel(name: &str, scenario: &str, flannel: Vec<Value>) -> Option<Self> {
        Self::up_full(name, scenario, |_| {}, Some(flannel))
    }

    fn up_full(
        name: &str,
        scenario: &str,
        change: impl FnOnce(&mut Config),
        flannel: Option<Vec<Value>>,
    ) -> Option<Self> {
        if !require_root() {
            return None;
        }
        let bins = test_kit::cluster::binaries()?;
        let dir = tempfile::tempdir().unwrap();
        let mut s = Scenario::load(&root().join(scenario)).unwrap();
        // A sandbox for the pod agent and one for a Job's pod on every node.
        s.pods_per_node = s.pods_per_node.max(2);
        let opts = Options {
            name: Some(lab_name(name)),
            state_root: dir.path().join("lab"),
            agent_bin: agent(),
            prober_bin: PathBuf::from(prober()),
            verbose: false,
        };
        let lab = Lab::up_for_control_plane(&s, &opts).unwrap();
        let l = &lab.layout;
        let pki = l.state_dir.join("pki");
        let bin_dir = Path::new(prober()).parent().unwrap().to_path_buf();
        let nodes = l
            .nodes
            .iter()
            .map(|n| NodeSpec {
                name: n.name.clone(),
                netns: n.ns.clone(),
                addresses: std::iter::once(IpAddr::V4(n.address))
                    .chain(n.address6.map(IpAddr::V6))
                    .collect(),
                pod_cidrs: vec![n.pod_cidr.to_string()],
                sandboxes: n
                    .pods
                    .iter()
                    .map(|p| {
                        let ips = std::iter::once(IpAddr::V4(p.address))
                            .chain(p.address6.map(IpAddr::V6))
                            .collect();
                        (p.ns.clone(), ips)
                    })
                    .collect(),
                root: n.root.clone(),
                control_plane: n.control_plane,
                cpu: "2".into(),
                labels: s
                    .zones
                    .get(n.zone)
                    .map(|z| vec![("topology.kubernetes.io/zone".to_string(), z.name.clone())])
                    .unwrap_or_default(),
            })
            .collect();
        let tokens = std::fs::read_to_string(pki.join("tokens")).unwrap_or_default();
        let mut config = Config {
            dir: dir.path().join("cluster"),
            bins,
            nodes,
            service_cidrs: vec!["10.96.0.0/12".into()],
            ca_cert: pki.join("ca.crt"),
            api_cert: pki.join("apiserver.crt"),
            api_key: pki.join("apiserver.key"),
            // The lab's CNI kubeconfigs carry these: the API server knows them, as a cluster
            // knows the tokens its CNI was given (an expired one is not among them).
            extra_tokens: tokens
                .lines()
                .filter(|t| !t.trim().is_empty())
                .enumerate()
                .map(|(i, t)| {
                    (
                        t.trim().to_string(),
                        format!("lab-cni-{i}"),
                        vec!["system:authenticated".to_string()],
                    )
                })
                .collect(),
            images: [IMAGE, DEPLOY_IMAGE]
                .into_iter()
                .map(|name| Image {
                    name: name.into(),
                    dir: bin_dir.clone(),
                    entrypoint: Some("/usr/local/bin/probe-pod".into()),
                })
                .collect(),
            node_monitor_grace: Duration::from_secs(12),
            etcd_compaction: Duration::from_secs(300),
            cluster_dns: Some(IpAddr::V4(prober::lab::build::DNS_SERVICE)),
        };
        change(&mut config);
        let cluster = Cluster::start(config).unwrap_or_else(|e| panic!("the control plane: {e}"));
        let me = Self {
            cluster,
            lab,
            scenario: s,
            _dir: dir,
        };
        me.seed(flannel);
        Some(me)
    }

    /// The annotations flanneld writes on each node (its VTEP's MAC, the VNI, its address).
    fn annotate_nodes(&self, vni: u32) {
        for n in &self.lab.layout.nodes {
            let backend = json!({"VNI": vni, "VtepMAC": n.mac.to_string()}).to_string();
            self.cluster
                .kubectl(&[
                    "annotate",
                    "node",
                    &n.name,
                    "--overwrite",
                    &format!("flannel.alpha.coreos.com/backend-data={backend}"),
                    "flannel.alpha.coreos.com/backend-type=vxlan",
                    &format!("flannel.alpha.coreos.com/public-ip={}", n.address),
                ])
                .unwrap();
        }
    }

    /// What a kubeadm cluster running flannel has besides what the control plane makes itself:
    /// flannel's node annotations, DaemonSet and ConfigMap, CoreDNS's Deployment, ConfigMap and
    /// Service. The pods that stand for what the lab already runs (flannel's kernel VXLAN,
    /// the lab's DNS server) are adopted by their node's shim, not started.
    fn seed(&self, upstream_flannel: Option<Vec<Value>>) {
        let inv = prober::lab::build::inventory(&self.scenario, &self.lab.layout);
        let dns = inv.cluster.dns.as_ref().expect("the lab has cluster DNS");
        let overlay = inv
            .cluster
            .overlay
            .as_ref()
            .expect("the lab has an overlay");
        let vni = overlay.vni().map_or(0, probe_proto::Vni::get);
        let port = overlay.port().map_or(0, probe_proto::Port::get);
        self.annotate_nodes(vni);
        let dns_node = &self.lab.layout.nodes[self.lab.layout.dns_node].name;
        let dns_ip = self.lab.layout.dns_pod.address.to_string();
        let adopt = |ip: Option<&str>| {
            let mut a = json!({test_kit::cluster::ADOPT: "true"});
            if let Some(ip) = ip {
                a[test_kit::cluster::ADOPT_IP] = json!(ip);
            }
            a
        };
        let net_conf = json!({"Network": inv.cluster.pod_cidr.to_string(), "EnableNFTables": false,
            "Backend": {"Type": "vxlan", "VNI": vni, "Port": port}});
        let seeded = vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-flannel"}}),
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "flannel", "namespace": "kube-flannel"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "kube-flannel-cfg", "namespace": "kube-flannel",
                             "labels": {"app": "flannel", "tier": "node"}},
                "data": {"net-conf.json": serde_json::to_string_pretty(&net_conf).unwrap()}}),
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
                "metadata": {"name": "kube-flannel-ds", "namespace": "kube-flannel",
                             "labels": {"app": "flannel", "k8s-app": "flannel"}},
                "spec": {"selector": {"matchLabels": {"app": "flannel"}},
                  "template": {"metadata": {"labels": {"app": "flannel", "tier": "node"},
                                            "annotations": adopt(None)},
                    "spec": {"hostNetwork": true, "serviceAccountName": "flannel",
                      "tolerations": [{"operator": "Exists"}],
                      "containers": [{"name": "kube-flannel", "image": "ghcr.io/flannel-io/flannel:v0.26.0",
                        "command": ["/opt/bin/flanneld"], "args": ["--ip-masq", "--kube-subnet-mgr"]}]}}}}),
        ];
        // The pods of flannel's own DaemonSet stand for the lab's kernel VXLAN: adopted.
        let flannel = upstream_flannel.map_or(seeded, |docs| {
            docs.into_iter()
                .map(|mut d| {
                    if d["kind"] == "DaemonSet" {
                        d["spec"]["template"]["metadata"]["annotations"] = adopt(None);
                    }
                    d
                })
                .collect()
        });
        self.cluster.apply(&flannel).unwrap();
        let objects = vec![
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "coredns", "namespace": "kube-system"},
                "data": {"Corefile": dns.corefile.clone().unwrap_or_default()}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "coredns", "namespace": "kube-system", "labels": {"k8s-app": "kube-dns"}},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"k8s-app": "kube-dns"}},
                  "template": {"metadata": {"labels": {"k8s-app": "kube-dns"},
                                            "annotations": adopt(Some(&dns_ip))},
                    "spec": {"nodeSelector": {"kubernetes.io/hostname": dns_node},
                      "tolerations": [{"operator": "Exists"}],
                      "containers": [{"name": "coredns", "image": "registry.k8s.io/coredns/coredns:v1.12.0",
                        "args": ["-conf", "/etc/coredns/Corefile"],
                        "ports": [{"containerPort": 53, "name": "dns", "protocol": "UDP"},
                                  {"containerPort": 53, "name": "dns-tcp", "protocol": "TCP"}]}]}}}}),
            json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "kube-dns", "namespace": "kube-system",
                             "labels": {"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"}},
                "spec": {"clusterIP": dns.service.ip().to_string(), "selector": {"k8s-app": "kube-dns"},
                  "ports": [{"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                            {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53}]}}),
        ];
        self.cluster.apply(&objects).unwrap();
        // CoreDNS is Ready (the adopted pod) and its EndpointSlice written by the controller.
        eventually(60, "CoreDNS's EndpointSlice", || {
            let v = self
                .cluster
                .get_json(&[
                    "get",
                    "endpointslices",
                    "-n",
                    "kube-system",
                    "-l",
                    "kubernetes.io/service-name=kube-dns",
                ])
                .ok()?;
            let ready = v["items"].as_array().into_iter().flatten().any(|s| {
                s["endpoints"].as_array().into_iter().flatten().any(|e| {
                    e["addresses"][0] == dns_ip.as_str() && e["conditions"]["ready"] == true
                })
            });
            (!ready).then(|| v.to_string())
        });
    }

    /// A kubeconfig for a user bound to `deploy/base`'s RBAC: the service account
    /// `prober-system/NAME`'s token (the RBAC must be applied first).
    pub(crate) fn user(&self, sa: &str) -> PathBuf {
        self.cluster.kubeconfig_for("prober-system", sa).unwrap()
    }
}

/// `prober ARGS --kubeconfig K`, run from the control-plane node's namespace.
pub(crate) fn prober_cmd(k: &RealLab, args: &[&str], kubeconfig: &Path) -> Command {
    let prefix = k.cluster.exec_prefix();
    let mut c = Command::new(&prefix[0]);
    c.args(&prefix[1..])
        .arg(prober())
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env("NO_COLOR", "1")
        .env_remove("KUBECONFIG")
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy");
    c
}

pub(crate) fn run(k: &RealLab, args: &[&str], kubeconfig: &Path) -> Output {
    prober_cmd(k, args, kubeconfig).output().unwrap()
}

/// `prober matrix -o json` creating its own agents, waiting `wait`.
pub(crate) fn matrix(k: &RealLab, kubeconfig: &Path, wait: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "matrix",
        "-o",
        "json",
        "--image",
        IMAGE,
        "--agent-wait",
        wait,
    ];
    args.extend(extra);
    run(k, &args, kubeconfig)
}

/// Fails unless `found` (discovery's inventory, its policies taken out) is the lab's own
/// inventory as far as discovery can know it; `what` names the source in the failure.
pub(crate) fn assert_discovered_the_lab(k: &RealLab, mut found: Value, what: &str) {
    found["cluster"].as_object_mut().unwrap().remove("policies");
    let mut lab: Value =
        serde_json::to_value(prober::lab::build::inventory(&k.scenario, &k.lab.layout)).unwrap();
    crate::common::comparable_inventory(&mut found);
    crate::common::comparable_inventory(&mut lab);
    assert_eq!(
        serde_json::to_string_pretty(&found).unwrap(),
        serde_json::to_string_pretty(&lab).unwrap(),
        "discovery {what} differs from the lab's inventory"
    );
}

/// Fails unless every agent of the run that printed `out` ran.
pub(crate) fn all_ran(out: &Output) {
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

/// What prober's runs left in the cluster: objects labelled with a run, namespaces it created
/// (still there, even Terminating), and pods of its agents.
pub(crate) fn leftovers(k: &RealLab) -> Option<String> {
    let mut left = Vec::new();
    for kind in [
        "daemonsets",
        "serviceaccounts",
        "pods",
        "roles",
        "rolebindings",
        "networkpolicies",
    ] {
        let Ok(v) = k
            .cluster
            .get_json(&["get", kind, "-A", "-l", "prober.io/run"])
        else {
            left.push(format!("cannot list {kind}"));
            continue;
        };
        for o in v["items"].as_array().into_iter().flatten() {
            left.push(format!(
                "{kind}/{}/{}",
                o["metadata"]["namespace"].as_str().unwrap_or_default(),
                o["metadata"]["name"].as_str().unwrap_or_default()
            ));
        }
    }
    if let Ok(v) = k
        .cluster
        .get_json(&["get", "namespaces", "-l", "prober.io/run"])
    {
        for o in v["items"].as_array().into_iter().flatten() {
            left.push(format!("namespace/{}", o["metadata"]["name"]));
        }
    }
    (!left.is_empty()).then(|| left.join(", "))
}

/// Waits until the runs left nothing behind.
pub(crate) fn nothing_left(k: &RealLab) {
    eventually(90, "the run left objects behind", || leftovers(k));
}

/// The requests the API server refused (4xx but 404) since the audit log's `since`th event,
/// with who made them: RBAC is really enforced here. Lists in namespaces the cluster does not
/// have are left out: discovery reads those knowing they may be missing, and RBAC refuses them
/// before the API server could say 404.
pub(crate) fn refused(k: &RealLab, since: usize) -> Vec<String> {
    let namespaces: Vec<String> = k.cluster.get_json(&["get", "namespaces"]).unwrap()["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n["metadata"]["name"].as_str().map(String::from))
        .collect();
    k.cluster.audit()[since..]
        .iter()
        .filter(|e| {
            let code = e["responseStatus"]["code"].as_u64().unwrap_or(0);
            code >= 400 && code != 404 && code != 409
        })
        .filter(|e| {
            e["objectRef"]["namespace"]
                .as_str()
                .is_none_or(|ns| namespaces.iter().any(|n| n == ns))
        })
        .map(|e| {
            format!(
                "{} {} {} -> {} ({})",
                e["user"]["username"].as_str().unwrap_or_default(),
                e["verb"].as_str().unwrap_or_default(),
                e["requestURI"].as_str().unwrap_or_default(),
                e["responseStatus"]["code"],
                e["responseStatus"]["message"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// The project's `deploy/base` as `kubectl kustomize` renders it, applied with the real
/// `kubectl apply -k` (server-side), as the administrator.
pub(crate) fn apply_k(k: &RealLab, dir: &str) -> String {
    let prefix = k.cluster.exec_prefix();
    let out = Command::new(&prefix[0])
        .args(&prefix[1..])
        .args(["kubectl", "--kubeconfig"])
        .arg(&k.cluster.admin)
        .args(["apply", "--server-side", "-k"])
        .arg(root().join(dir))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl apply -k {dir}: {}",
        text(&out)
    );
    text(&out)
}

/// Waits until `want` pods in `namespace` are Ready.
pub(crate) fn pods_ready(k: &RealLab, namespace: &str, want: usize) {
    eventually(90, "pods never became ready", || {
        let v = k.cluster.get_json(&["get", "pods", "-n", namespace]).ok()?;
        let ready = v["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| {
                p["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
            .count();
        (ready < want).then(|| format!("{ready} of {want} ready: {}", k.cluster.log("nodeshim-n2")))
    });
}
