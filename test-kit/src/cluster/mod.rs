//! The real Kubernetes control plane for end-to-end tests: etcd, kube-apiserver,
//! kube-controller-manager and kube-scheduler built from their published modules
//! (`test-kit/cluster/build`), started in a lab's control-plane namespace, and one node shim
//! (virtual-kubelet, `test-kit/cluster/nodeshim`) per lab node that runs the pods' commands as
//! processes in the lab's namespaces. Everything stops and its files go when the `Cluster` drops.
//!
//! Nothing here listens outside the lab: etcd on the control-plane namespace's loopback and
//! address, the API server on the control-plane address, each shim on its node's address.

mod args;
mod kubectl;
mod pki;
mod process;

use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use kubectl::KubectlError;
use process::Spawned;

/// Where `test-kit/cluster/build` put the binaries, from `PROBER_CLUSTER_BIN` (`scripts/test`
/// builds them first and sets it). Unset: one SKIP line, or a failure when `PROBER_REQUIRE_TOOLS`
/// says the run must have them.
#[must_use]
pub fn binaries() -> Option<PathBuf> {
    let dir = std::env::var_os("PROBER_CLUSTER_BIN").map(PathBuf::from);
    match dir {
        Some(d) if d.join("kube-apiserver").is_file() && d.join("nodeshim").is_file() => Some(d),
        other => {
            let why = match other {
                Some(d) => format!(
                    "PROBER_CLUSTER_BIN={} has no kube-apiserver and nodeshim",
                    d.display()
                ),
                None => "PROBER_CLUSTER_BIN is not set".to_string(),
            };
            assert!(
                std::env::var_os("PROBER_REQUIRE_TOOLS").is_none(),
                "PROBER_REQUIRE_TOOLS is set but {why}: run `export PROBER_CLUSTER_BIN=$(test-kit/cluster/build)`"
            );
            eprintln!(
                "SKIP: {why} (the real control plane: export PROBER_CLUSTER_BIN=$(test-kit/cluster/build))"
            );
            None
        }
    }
}

/// One node of the cluster: a lab node and the shim that stands for its kubelet.
#[derive(Debug, Clone)]
pub struct NodeSpec {
    pub name: String,
    /// The node's own network namespace: its shim and hostNetwork pods run there.
    pub netns: String,
    /// Its addresses, IPv4 first (the InternalIP of each family).
    pub addresses: Vec<IpAddr>,
    pub pod_cidrs: Vec<String>,
    /// Pod network namespaces the node's shim can give out, with their addresses.
    pub sandboxes: Vec<(String, Vec<IpAddr>)>,
    /// The node's `/` (hostPath volumes resolve under it).
    pub root: PathBuf,
    pub control_plane: bool,
    /// Its allocatable CPU (`2` unless a test wants the scheduler to refuse it).
    pub cpu: String,
    /// Labels an administrator sets after it joined (zones, roles).
    pub labels: Vec<(String, String)>,
}

/// An image a shim can run: its name, the directory of its binaries (mounted at
/// `/usr/local/bin` in its containers) and its entrypoint.
#[derive(Debug, Clone)]
pub struct Image {
    pub name: String,
    pub dir: PathBuf,
    pub entrypoint: Option<String>,
}

/// A pod annotation (set on a workload's template) that makes the shim adopt the pod instead
/// of running it: it stands for what the lab already runs (flannel's kernel VXLAN device, the
/// lab's DNS server), Running and Ready at once, on the node's address or [`ADOPT_IP`].
pub const ADOPT: &str = "nodeshim.prober.test/adopt";
/// The pod address an adopted pod reports (the lab's DNS server's, for CoreDNS).
pub const ADOPT_IP: &str = "nodeshim.prober.test/pod-ip";

/// How the cluster is set up.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the cluster keeps its state: etcd's data, keys, kubeconfigs, logs. Removed on drop.
    pub dir: PathBuf,
    /// `binaries()`.
    pub bins: PathBuf,
    pub nodes: Vec<NodeSpec>,
    pub service_cidrs: Vec<String>,
    /// The serving certificate and key of the API server, and the CA that signed them (the
    /// lab's, which its nodes' kubeconfigs already trust).
    pub ca_cert: PathBuf,
    pub api_cert: PathBuf,
    pub api_key: PathBuf,
    /// More bearer tokens the API server accepts: (token, user, groups) (the lab's CNI tokens).
    pub extra_tokens: Vec<(String, String, Vec<String>)>,
    /// The images the shims can run; any other fails to pull.
    pub images: Vec<Image>,
    /// How long a node may be silent before the node lifecycle controller marks it NotReady.
    pub node_monitor_grace: Duration,
    /// How often etcd's history is compacted by the API server (its default is 5 minutes).
    pub etcd_compaction: Duration,
    pub cluster_dns: Option<IpAddr>,
}

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start {what}: {source}")]
    Start {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} exited before it was ready; its log ({log}) ends:\n{tail}")]
    Exited {
        what: String,
        log: PathBuf,
        tail: String,
    },
    #[error("{what} not ready after {secs} s; its log ({log}) ends:\n{tail}")]
    NotReady {
        what: String,
        secs: u64,
        log: PathBuf,
        tail: String,
    },
    #[error(transparent)]
    Pki(#[from] pki::PkiError),
    #[error(transparent)]
    Kubectl(#[from] KubectlError),
    #[error("the configuration has no control-plane node")]
    NoControlPlane,
}

/// A running cluster. Dropping it stops every process (the shims take their pods with them)
/// and removes its directory.
pub struct Cluster {
    pub config: Config,
    /// The administrator's kubeconfig (`system:masters`): for set-up and inspection only.
    pub admin: PathBuf,
    /// The API server's address as the kubeconfigs name it: `https://ADDRESS:6443`.
    pub server: String,
    /// The control-plane node's network namespace: clients run there.
    pub netns: String,
    ca_pem: String,
    processes: Vec<Spawned>,
    /// Where the shims are in `processes`.
    shims: Vec<usize>,
    audit_log: PathBuf,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("server", &self.server)
            .field("netns", &self.netns)
            .finish_non_exhaustive()
    }
}

/// The API server's port.
pub const API_PORT: u16 = 6443;
/// The kubelet's port, where each shim serves exec.
pub const KUBELET_PORT: u16 = 10250;
const READY: Duration = Duration::from_secs(90);

pub(crate) fn url_host(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v) => v.to_string(),
        IpAddr::V6(v) => format!("[{v}]"),
    }
}

fn write(path: &Path, text: &str) -> Result<(), ClusterError> {
    let err = |source| ClusterError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(err)?;
    }
    std::fs::write(path, text).map_err(err)
}

impl Cluster {
    /// Starts etcd, the API server, the controller manager, the scheduler and a shim per node,
    /// and waits until every node is Ready and the `kubernetes` Service has its endpoint.
    pub fn start(config: Config) -> Result<Self, ClusterError> {
        let cp = config
            .nodes
            .iter()
            .find(|n| n.control_plane)
            .ok_or(ClusterError::NoControlPlane)?
            .clone();
        let dir = config.dir.clone();
        let cp_ip = cp.addresses[0];
        let server = format!("https://{}:{API_PORT}", url_host(cp_ip));
        let ca_pem =
            std::fs::read_to_string(&config.ca_cert).map_err(|source| ClusterError::Write {
                path: config.ca_cert.clone(),
                source,
            })?;
        let keys = pki::Keys::generate(&dir, &config.nodes)?;
        for (user, token) in &keys.tokens {
            let name = user.replace(':', "-");
            write(
                &dir.join(format!("kubeconfig/{name}")),
                &pki::kubeconfig(&server, &ca_pem, user, token),
            )?;
        }
        let mut tokens = keys.token_file();
        for (t, user, groups) in &config.extra_tokens {
            let _ = writeln!(tokens, "{t},{user},{user},\"{}\"", groups.join(","));
        }
        write(&dir.join("pki/tokens.csv"), &tokens)?;
        let audit_log = dir.join("logs/audit.log");
        write(
            &dir.join("audit-policy.yaml"),
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n",
        )?;
        let mut me = Self {
            admin: dir.join("kubeconfig/admin"),
            server,
            netns: cp.netns.clone(),
            ca_pem,
            processes: Vec::new(),
            shims: Vec::new(),
            audit_log,
            config,
        };
        me.start_control_plane(&cp, &keys)?;
        me.start_shims()?;
        me.wait_nodes()?;
        Ok(me)
    }

    fn spawn(&mut self, ns: &str, what: &str, argv: &[String]) -> Result<usize, ClusterError> {
        let log = self.config.dir.join(format!("logs/{what}.log"));
        let p = process::spawn(ns, what, argv, &log)?;
        self.processes.push(p);
        Ok(self.processes.len() - 1)
    }

    fn start_control_plane(&mut self, cp: &NodeSpec, keys: &pki::Keys) -> Result<(), ClusterError> {
        let a = args::Args {
            config: &self.config,
            keys,
            audit_log: &self.audit_log,
        };
        let (etcd, api, cm, sched) = (
            a.etcd(cp),
            a.apiserver(cp),
            a.controller_manager(),
            a.scheduler(),
        );
        let i = self.spawn(&cp.netns, "etcd", &etcd)?;
        self.wait_until(i, "etcd", || process::listening(&cp.netns, args::ETCD_PORT))?;
        let i = self.spawn(&cp.netns, "kube-apiserver", &api)?;
        self.wait_until(i, "kube-apiserver", || {
            kubectl::run(&self.netns, &self.admin, &["get", "--raw", "/readyz"])
                .is_ok_and(|o| o.trim() == "ok")
        })?;
        self.spawn(&cp.netns, "kube-controller-manager", &cm)?;
        self.spawn(&cp.netns, "kube-scheduler", &sched)?;
        Ok(())
    }

    fn start_shims(&mut self) -> Result<(), ClusterError> {
        for n in self.config.nodes.clone() {
            let state = self.config.dir.join(format!("nodes/{}", n.name));
            let (cert, key) = pki::kubelet_cert(&n.name, &n.addresses)?;
            write(&state.join("kubelet.crt"), &cert)?;
            write(&state.join("kubelet.key"), &key)?;
            let argv = args::shim(&self.config, &n, &state);
            let i = self.spawn(&n.netns, &format!("nodeshim-{}", n.name), &argv)?;
            self.shims.push(i);
        }
        Ok(())
    }

    /// Waits until every node is Ready, then labels and taints them as an administrator
    /// (kubeadm) would: NodeRestriction keeps a kubelet from setting roles itself.
    fn wait_nodes(&mut self) -> Result<(), ClusterError> {
        let names: Vec<String> = self.config.nodes.iter().map(|n| n.name.clone()).collect();
        let first = self.shims.first().copied().unwrap_or(0);
        self.wait_until(first, "the nodes' shims", || {
            let Ok(v) = self.get_json(&["get", "nodes"]) else {
                return false;
            };
            names.iter().all(|name| {
                v["items"].as_array().into_iter().flatten().any(|n| {
                    n["metadata"]["name"] == name.as_str()
                        && n["status"]["conditions"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
            })
        })?;
        for n in self.config.nodes.clone() {
            let mut labels: Vec<String> =
                n.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            if n.control_plane {
                labels.push("node-role.kubernetes.io/control-plane=".into());
                self.kubectl(&[
                    "taint",
                    "node",
                    &n.name,
                    "node-role.kubernetes.io/control-plane:NoSchedule",
                    "--overwrite",
                ])?;
            }
            if !labels.is_empty() {
                let mut args = vec!["label", "node", n.name.as_str(), "--overwrite"];
                args.extend(labels.iter().map(String::as_str));
                self.kubectl(&args)?;
            }
        }
        // The service-account controller's `default` account and the root CA's ConfigMap: a
        // namespace is usable once both exist.
        self.wait_until(first, "the default service account", || {
            self.kubectl(&["get", "serviceaccount", "default", "-n", "default"])
                .is_ok()
                && self
                    .kubectl(&["get", "configmap", "kube-root-ca.crt", "-n", "default"])
                    .is_ok()
        })?;
        Ok(())
    }

    /// Polls `ready` until it holds, failing early when process `i` exits.
    fn wait_until(
        &self,
        i: usize,
        what: &str,
        mut ready: impl FnMut() -> bool,
    ) -> Result<(), ClusterError> {
        let start = Instant::now();
        loop {
            if ready() {
                return Ok(());
            }
            let p = &self.processes[i];
            if p.exited() {
                return Err(ClusterError::Exited {
                    what: p.what.clone(),
                    log: p.log.clone(),
                    tail: p.tail(),
                });
            }
            if start.elapsed() > READY {
                return Err(ClusterError::NotReady {
                    what: what.to_string(),
                    secs: READY.as_secs(),
                    log: p.log.clone(),
                    tail: p.tail(),
                });
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// `kubectl ARGS` as the administrator, in the control-plane namespace: its stdout.
    pub fn kubectl(&self, args: &[&str]) -> Result<String, KubectlError> {
        kubectl::run(&self.netns, &self.admin, args)
    }

    /// `kubectl ARGS -o json` as the administrator, parsed.
    pub fn get_json(&self, args: &[&str]) -> Result<serde_json::Value, KubectlError> {
        let mut a = args.to_vec();
        a.extend(["-o", "json"]);
        let out = self.kubectl(&a)?;
        serde_json::from_str(&out).map_err(|e| KubectlError::Parse {
            args: a.iter().map(ToString::to_string).collect(),
            source: e,
        })
    }

    /// Creates (server-side apply) the objects as the administrator.
    pub fn apply(&self, objects: &[serde_json::Value]) -> Result<String, KubectlError> {
        let mut text = String::new();
        for o in objects {
            text.push_str(&serde_json::to_string(o).unwrap_or_default());
            text.push('\n');
        }
        kubectl::run_stdin(
            &self.netns,
            &self.admin,
            &["apply", "--server-side", "--force-conflicts", "-f", "-"],
            &text,
        )
    }

    /// A kubeconfig holding `token` for this cluster (a service account's, from `kubectl
    /// create token`), written under the cluster's directory as `name`.
    pub fn kubeconfig_with_token(&self, name: &str, token: &str) -> Result<PathBuf, ClusterError> {
        let path = self.config.dir.join(format!("kubeconfig/{name}"));
        write(
            &path,
            &pki::kubeconfig(&self.server, &self.ca_pem, name, token),
        )?;
        Ok(path)
    }

    /// A kubeconfig for the service account `namespace/name`, as its RBAC allows and no more
    /// (a TokenRequest of an hour).
    pub fn kubeconfig_for(&self, namespace: &str, name: &str) -> Result<PathBuf, ClusterError> {
        let token =
            self.kubectl(&["create", "token", name, "-n", namespace, "--duration", "1h"])?;
        self.kubeconfig_with_token(&format!("sa-{namespace}-{name}"), token.trim())
    }

    /// The argv prefix that runs a client where it can reach the API server: the
    /// control-plane node's namespace (the tests never connect a lab to the root namespace).
    #[must_use]
    pub fn exec_prefix(&self) -> Vec<String> {
        vec![
            "ip".into(),
            "netns".into(),
            "exec".into(),
            self.netns.clone(),
        ]
    }

    /// Switches a node shim's fault (`not-ready`, `slow-start`, `exec-cut`, `pull-error`) on
    /// with `value`, or off with `None`.
    pub fn fault(&self, node: &str, fault: &str, value: Option<&str>) -> Result<(), ClusterError> {
        let path = self.config.dir.join(format!("nodes/{node}/faults/{fault}"));
        match value {
            Some(v) => write(&path, v),
            None => match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(ClusterError::Write { path, source: e })
                }
                _ => Ok(()),
            },
        }
    }

    /// The API server's audit log so far: one JSON event per request it answered.
    #[must_use]
    pub fn audit(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.audit_log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The log of one of the cluster's processes (`kube-apiserver`, `nodeshim-n2`, ...).
    #[must_use]
    pub fn log(&self, what: &str) -> String {
        std::fs::read_to_string(self.config.dir.join(format!("logs/{what}.log")))
            .unwrap_or_default()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Shims first (they end their pods), then the controllers, the API server and etcd.
        for p in self.processes.iter_mut().rev() {
            p.stop(Duration::from_secs(5));
        }
        if std::env::var_os("PROBER_KEEP_CLUSTER").is_none() {
            let _ = std::fs::remove_dir_all(&self.config.dir);
        }
    }
}
