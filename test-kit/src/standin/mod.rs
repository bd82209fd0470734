//! The Kubernetes API stand-in: real HTTPS on loopback with its own CA, a kubeconfig with a bearer
//! token, JSON lists and watches with resource versions, server-side apply, deletes with
//! preconditions, `Status` errors, WebSocket `pods/exec`, the rules of the real API server (each
//! in `rules/`, citing the Kubernetes source it follows), RBAC from the objects it stores, and a
//! kubelet that runs each pod's command inside a lab node's network namespace. The real kube-rs
//! client, hyper, rustls and WebSocket code talk to it exactly as to a cluster.

mod api;
mod exec;
mod kubelet;
pub mod pki;
mod rbac;
mod rules;
pub mod seed;
pub mod select;
pub mod store;
pub mod stub;
mod watch;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;

pub use kubelet::Running;
use store::Store;

/// One lab node as the kubelet sees it.
#[derive(Debug, Clone)]
pub struct NodeSpec {
    pub name: String,
    /// The node's own network namespace (hostNetwork pods run here).
    pub netns: String,
    pub address: Ipv4Addr,
    /// The pod sandboxes the node can give out: (network namespace, pod address), in order.
    pub pod_sandboxes: Vec<(String, Ipv4Addr)>,
    /// The node's `/` (hostPath volumes are checked under it).
    pub root: PathBuf,
}

/// How the stand-in is set up.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the kubeconfigs, the CA and the pods' logs are written.
    pub dir: PathBuf,
    pub nodes: Vec<NodeSpec>,
    /// The binary a container's `probe-pod` command (and any image's entrypoint) runs: the one
    /// cargo built, mapped by path as an image would carry it.
    pub entrypoint: PathBuf,
    /// How long a deleted namespace stays `Terminating` before it and its objects go.
    pub terminating: Duration,
    /// Authorise the coordinator's token against the RBAC objects stored (the project's own
    /// `deploy/` RBAC), as `--authorization-mode=RBAC` does. Off: the token may do anything.
    pub rbac: bool,
    /// The service account the coordinator's token authenticates as.
    pub coordinator: (String, String),
    /// Stub agents instead of lab nodes (None: every node is a lab namespace).
    pub stub: Option<Stub>,
}

/// Stub agents, for the API path at scale: the nodes are no lab namespaces, a pod's container
/// runs no process (Running and Ready once its sandbox is given out), and an exec of
/// `probe-pod probe` runs the agent with `--simulate` (it answers every probe as a healthy
/// cluster would and sends nothing on any network), answered only after `exec_round_trip`,
/// its answers held back until `probe_phase` has passed. Any other command is refused.
#[derive(Debug, Clone, Copy)]
pub struct Stub {
    /// How long an exec takes to be answered (the API server -> kubelet -> runtime hops).
    pub exec_round_trip: Duration,
    /// How long a stub agent's probe phase lasts before its results leave.
    pub probe_phase: Duration,
}

impl Config {
    #[must_use]
    pub fn new(dir: &Path, nodes: Vec<NodeSpec>, entrypoint: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
            nodes,
            entrypoint: entrypoint.to_path_buf(),
            terminating: Duration::from_secs(3),
            rbac: false,
            coordinator: ("prober-system".into(), "prober".into()),
            stub: None,
        }
    }
}

/// Faults switched on while the stand-in runs.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Pods on these nodes stay Pending (`ContainerCreating`) this long after they are created.
    pub pending: BTreeMap<String, Duration>,
    /// These nodes are `NotReady`: their kubelet starts nothing.
    pub not_ready: BTreeSet<String>,
    /// Every image pull fails (`ErrImagePull`, then `ImagePullBackOff`).
    pub image_pull: bool,
    /// The CNI cannot set up pod sandboxes on these nodes (`FailedCreatePodSandBox`).
    pub sandbox: BTreeSet<String>,
    /// An exec into a pod on this node loses its connection after this many stdout bytes.
    pub exec_cut: Option<(String, usize)>,
    /// (N, D): every exec's stdout leaves in pieces of at most N bytes, one every D (a slow
    /// link, or an API server and coordinator slow to pass a big result stream on).
    pub exec_slow: Option<(usize, Duration)>,
    /// Every write (create, patch, delete) is answered only after this long (a slow etcd).
    pub slow_writes: Option<Duration>,
    /// Every delete is answered only after this long (an API server slow to confirm deletions,
    /// with finalizers or admission webhooks on them).
    pub slow_deletes: Option<Duration>,
    /// Every watch is ended by the server this long after it opened, whatever its
    /// `timeoutSeconds` (an API server restarting, a load balancer's idle timeout): the client
    /// must open it again from the last version it saw.
    pub watch_end: Option<Duration>,
    /// The server speaks only `v4.channel.k8s.io` on exec (an API server before 1.30).
    pub exec_v4_only: bool,
    /// An exec's connection ends as soon as its command exits: what of its output was not yet
    /// sent is lost, with its exit status. The kubelet's streaming server closes the connection
    /// when the command exits, and a reader still behind (`exec_slow`) loses the unread rest to
    /// the reset.
    pub exec_reset_on_exit: bool,
    /// The next this many API requests are answered 429 with `Retry-After: 1`.
    pub throttle: u32,
    /// (N, S): the next N `pods/exec` requests are answered 429 with `Retry-After: S`.
    pub throttle_exec: Option<(u32, u32)>,
}

/// A request the stand-in answered: for tests that check what was asked.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: String,
    pub code: u16,
    /// When it was answered.
    pub at: std::time::Instant,
}

pub(crate) struct Inner {
    pub config: Config,
    pub store: Mutex<Store>,
    pub faults: Mutex<Faults>,
    /// Bumped after every change, waking the watches and the kubelet.
    pub tick: tokio::sync::watch::Sender<u64>,
    pub seen: Mutex<Vec<Seen>>,
    pub admin_token: String,
    pub coordinator_token: String,
    pub kubelet: Mutex<kubelet::Kubelet>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Inner {
    /// Wakes the watches and the kubelet when the store changed since the last wake-up.
    pub fn changed(&self) {
        let rv = lock(&self.store).rv();
        self.tick.send_if_modified(|seen| {
            let newer = *seen != rv;
            *seen = rv;
            newer
        });
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Pki(#[from] pki::PkiError),
    #[error("cannot {what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("the stand-in's TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
}

/// A running stand-in. Dropping it stops the server and kills every process its kubelet started.
pub struct StandIn {
    inner: Arc<Inner>,
    runtime: Option<tokio::runtime::Runtime>,
    pub addr: SocketAddr,
    /// The coordinator's kubeconfig (RBAC applies to it when `Config::rbac`).
    pub kubeconfig: PathBuf,
    /// A kubeconfig with a token that may do anything (`kubectl` as cluster admin).
    pub admin_kubeconfig: PathBuf,
    pub ca_pem: String,
}

fn random_token(tag: &str) -> String {
    let mut b = [0u8; 16];
    let _ = getrandom_fill(&mut b);
    let hex: String = b.iter().fold(String::new(), |mut s, x| {
        use std::fmt::Write as _;
        let _ = write!(s, "{x:02x}");
        s
    });
    format!("{tag}-{hex}")
}

fn getrandom_fill(b: &mut [u8]) -> std::io::Result<()> {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")?.read_exact(b)
}

impl StandIn {
    /// Starts serving on 127.0.0.1 (a port of its own) and writes the kubeconfigs into
    /// `config.dir`.
    pub fn start(config: Config) -> Result<Self, StartError> {
        let io = |what: &str| {
            let what = what.to_string();
            move |source| StartError::Io { what, source }
        };
        std::fs::create_dir_all(config.dir.join("logs")).map_err(io("create the state dir"))?;
        let pki = pki::generate()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .thread_name("standin")
            .build()
            .map_err(io("start the stand-in's runtime"))?;
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
            .map_err(io("listen on 127.0.0.1"))?;
        let addr = listener.local_addr().map_err(io("read the port"))?;
        let inner = Arc::new(Inner {
            store: Mutex::new(Store::default()),
            faults: Mutex::new(Faults::default()),
            tick: tokio::sync::watch::channel(0).0,
            seen: Mutex::new(Vec::new()),
            admin_token: random_token("admin"),
            coordinator_token: random_token("coordinator"),
            kubelet: Mutex::new(kubelet::Kubelet::default()),
            config,
        });
        let server = format!("https://{addr}");
        let kubeconfig = inner.config.dir.join("kubeconfig");
        let admin_kubeconfig = inner.config.dir.join("admin.kubeconfig");
        pki::write_kubeconfig(&kubeconfig, &server, &pki.ca_pem, &inner.coordinator_token)
            .map_err(io("write the kubeconfig"))?;
        pki::write_kubeconfig(&admin_kubeconfig, &server, &pki.ca_pem, &inner.admin_token)
            .map_err(io("write the admin kubeconfig"))?;
        let tls = api::tls_config(&pki)?;
        runtime.spawn(api::serve(inner.clone(), listener, tls));
        runtime.spawn(kubelet::run(inner.clone()));
        Ok(Self {
            inner,
            runtime: Some(runtime),
            addr,
            kubeconfig,
            admin_kubeconfig,
            ca_pem: pki.ca_pem,
        })
    }

    /// Stores objects as they are (the cluster's own state: nodes, kube-system, RBAC), without
    /// admission. Each needs `apiVersion` and `kind`.
    pub fn seed(&self, objects: impl IntoIterator<Item = Value>) {
        {
            let mut s = lock(&self.inner.store);
            for o in objects {
                let kind = store::kind_of(
                    o["apiVersion"].as_str().unwrap_or_default(),
                    o["kind"].as_str().unwrap_or_default(),
                )
                .unwrap_or_else(|| panic!("the stand-in serves no {}", o["kind"]));
                s.create(kind, o);
            }
        }
        self.inner.changed();
    }

    /// Creates objects as `kubectl create` would, through the API's own rules (admission,
    /// defaults, validation), as the cluster admin; stops at the first refusal.
    pub fn create_all(
        &self,
        objects: impl IntoIterator<Item = Value>,
    ) -> Result<Vec<Value>, String> {
        let mut out = Vec::new();
        for o in objects {
            out.push(api::create_object(&self.inner, o).map_err(|s| s.to_string())?);
        }
        Ok(out)
    }

    /// One stored object, by plural resource (`pods`, `daemonsets`), namespace ("" for
    /// cluster-scoped) and name.
    #[must_use]
    pub fn get(&self, plural: &str, ns: &str, name: &str) -> Option<Value> {
        let key = store::Key::new(store::index(plural), ns, name);
        lock(&self.inner.store).get(&key).cloned()
    }

    /// Every stored object of a plural resource, in every namespace.
    #[must_use]
    pub fn list(&self, plural: &str) -> Vec<Value> {
        lock(&self.inner.store)
            .list(store::index(plural), None)
            .into_iter()
            .cloned()
            .collect()
    }

    /// Switches faults on or off.
    pub fn faults(&self, f: impl FnOnce(&mut Faults)) {
        f(&mut lock(&self.inner.faults));
        kubelet::apply_node_faults(&self.inner);
        // The kubelet looks again even when no object changed (a fault of its own).
        self.inner.tick.send_modify(|_| {});
    }

    /// Makes every watch from a version older than the newest end with 410 Gone, as after
    /// etcd compaction.
    pub fn compact(&self) {
        let mut s = lock(&self.inner.store);
        s.compacted = s.rv();
    }

    /// The requests answered so far.
    #[must_use]
    pub fn seen(&self) -> Vec<Seen> {
        lock(&self.inner.seen).clone()
    }

    /// The processes the kubelet runs now (pods' containers and exec sessions).
    #[must_use]
    pub fn running(&self) -> Vec<Running> {
        lock(&self.inner.kubelet).running()
    }

    /// The coordinator's bearer token (never printed by prober; tests look for it in output).
    #[must_use]
    pub fn token(&self) -> &str {
        &self.inner.coordinator_token
    }

    /// Runs a future on the stand-in's runtime (a kube client for a test's own checks).
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.runtime
            .as_ref()
            .expect("the runtime lives as long as the stand-in")
            .block_on(f)
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        lock(&self.inner.kubelet).kill_all();
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(2));
        }
    }
}
