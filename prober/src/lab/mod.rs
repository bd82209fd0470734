//! `prober lab`: a cluster emulator in network namespaces — kernel VXLAN, nftables kube-proxy and
//! firewalls, a real TLS API server and a real DNS server — with faults injected on demand.
//! Everything carries the run's prefix; nothing touches the root namespace.

pub mod apiserver;
pub mod build;
pub mod check;
pub mod exec;
pub mod pki;
pub mod scenario;
mod warm;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::inventory::Overlay;
use build::{AGENT_PORT, API_PORT, Layout};
use exec::ExecError;
use scenario::Scenario;

/// Where a lab built without agents serves its nodes' own ports (kubelet, etcd, the CNI's).
pub const NODE_SERVICES_PORT: u16 = 9916;
/// The ports a real control plane's programs serve in a lab built for one: the API server,
/// etcd (client and peer) and the kubelet.
pub const REAL_CONTROL_PLANE_PORTS: [u16; 4] = [API_PORT, 2379, 2380, 10250];
/// Every lab namespace starts with this.
pub const NS_PREFIX: &str = "plab-";
/// Where labs keep their state (tmpfs: gone after a reboot, like the namespaces).
pub const DEFAULT_STATE_ROOT: &str = "/run/prober-lab";
const READY_DEADLINE: Duration = Duration::from_secs(20);

/// Serialises lab construction and teardown, so a Ctrl-C handler never races a build step.
pub static LAB_LOCK: Mutex<()> = Mutex::new(());

#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("the lab needs root (it creates network namespaces); run it with sudo")]
    NotRoot,
    #[error("the lab needs {0}; install with: apt-get install {0} (or run scripts/install-deps)")]
    MissingTools(String),
    #[error(
        "the agent binary {0} does not exist; build it with `cargo build --release -p probe-pod` or pass --agent-bin"
    )]
    NoAgent(PathBuf),
    #[error(
        "a lab named {0:?} already exists; take it down with `prober lab down {0}` or pick another --name"
    )]
    Exists(String),
    #[error("lab name {0:?}: use 1-10 lowercase letters and digits")]
    BadName(String),
    #[error("{step}: {source}")]
    Step { step: String, source: ExecError },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Pki(#[from] pki::PkiError),
    #[error("not ready after {secs} s: {what}")]
    NotReady { secs: u64, what: String },
}

/// Where the lab's programs are and where it keeps its state.
#[derive(Debug, Clone)]
pub struct Options {
    pub name: Option<String>,
    pub state_root: PathBuf,
    pub agent_bin: PathBuf,
    /// The `prober` binary, which also serves as the API server stand-in.
    pub prober_bin: PathBuf,
    /// Print build steps to stderr.
    pub verbose: bool,
}

/// A running lab. Dropping it tears it down unless it was detached.
pub struct Lab {
    pub scenario: Scenario,
    pub layout: Layout,
    pub inventory_path: PathBuf,
    pub agent_bin: PathBuf,
    /// Whether the lab starts its own agents (off when a kubelet starts them as pods).
    agents: bool,
    /// Whether a real control plane serves the API, etcd and the kubelets' ports (tests).
    control_plane: bool,
    detached: bool,
}

impl std::fmt::Debug for Lab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lab")
            .field("prefix", &self.layout.prefix)
            .finish_non_exhaustive()
    }
}

/// Checks what the lab needs before touching anything.
pub fn preflight(opts: &Options) -> Result<(), LabError> {
    if !nix::unistd::geteuid().is_root() {
        return Err(LabError::NotRoot);
    }
    let mut missing = exec::missing_tools();
    missing.dedup();
    if !missing.is_empty() {
        return Err(LabError::MissingTools(missing.join(" ")));
    }
    if !opts.agent_bin.is_file() {
        return Err(LabError::NoAgent(opts.agent_bin.clone()));
    }
    Ok(())
}

/// Drops [`REAL_CONTROL_PLANE_PORTS`] from a host agent's `--extra-tcp-port` list.
fn free_real_ports(argv: &mut Vec<String>) {
    let Some(i) = argv.iter().position(|a| a == "--extra-tcp-port") else {
        return;
    };
    let Some(list) = argv.get(i + 1) else {
        return;
    };
    let kept: Vec<&str> = list
        .split(',')
        .filter(|p| {
            p.parse::<u16>()
                .is_ok_and(|p| !REAL_CONTROL_PLANE_PORTS.contains(&p))
        })
        .collect();
    if kept.is_empty() {
        argv.drain(i..=i + 1);
    } else {
        argv[i + 1] = kept.join(",");
    }
}

fn step(what: impl Into<String>) -> impl FnOnce(ExecError) -> LabError {
    let step = what.into();
    move |source| LabError::Step { step, source }
}

fn write(path: &Path, text: &str) -> Result<(), LabError> {
    let err = |source| LabError::Write {
        path: path.to_path_buf(),
        source,
    };
    // Under the lab lock, as every namespace step: a signal's teardown holds it until the
    // process exits, so no file (the inventory last of all) is written after it.
    let _guard = LAB_LOCK.lock();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    std::fs::write(path, text).map_err(err)
}

/// A fresh lab name: four hex digits.
#[must_use]
pub fn unique_name() -> String {
    format!("{:04x}", probe_proto::util::random_u32() & 0xffff)
}

impl Lab {
    /// Builds the lab. On any failure everything built so far is removed before returning.
    pub fn up(s: &Scenario, opts: &Options) -> Result<Self, LabError> {
        Self::up_with(s, opts, true, false)
    }

    /// Builds the lab without its agents, for a kubelet that starts them as pods (the tests' API
    /// stand-in): no pod agents, and the host process keeps serving what a real node serves (the
    /// kubelet's and the CNI's ports) on [`NODE_SERVICES_PORT`] instead of the agent's port.
    pub fn up_without_agents(s: &Scenario, opts: &Options) -> Result<Self, LabError> {
        Self::up_with(s, opts, false, false)
    }

    /// Builds the lab for a real control plane that the caller starts in it: as
    /// [`Lab::up_without_agents`], but the API server, etcd and each node's kubelet port
    /// ([`REAL_CONTROL_PLANE_PORTS`]) are left free for the real programs.
    pub fn up_for_control_plane(s: &Scenario, opts: &Options) -> Result<Self, LabError> {
        Self::up_with(s, opts, false, true)
    }

    fn up_with(
        s: &Scenario,
        opts: &Options,
        agents: bool,
        control_plane: bool,
    ) -> Result<Self, LabError> {
        preflight(opts)?;
        let name = match &opts.name {
            Some(n)
                if n.is_empty()
                    || n.len() > 10
                    || !n
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()) =>
            {
                return Err(LabError::BadName(n.clone()));
            }
            Some(n) => n.clone(),
            None => unique_name(),
        };
        let prefix = format!("{NS_PREFIX}{name}-");
        if exec::list_ns().iter().any(|n| n.starts_with(&prefix)) {
            return Err(LabError::Exists(name));
        }
        let state_dir = opts.state_root.join(prefix.trim_end_matches('-'));
        let layout = build::layout(s, &prefix, &state_dir);
        let mut lab = Self {
            scenario: s.clone(),
            inventory_path: state_dir.join("inventory.yaml"),
            layout,
            agent_bin: opts.agent_bin.clone(),
            agents,
            control_plane,
            detached: false,
        };
        // `lab` tears down on drop if any step fails.
        lab.build(opts)?;
        Ok(lab)
    }

    fn build(&mut self, opts: &Options) -> Result<(), LabError> {
        let started = Instant::now();
        let say = |m: &str| {
            if opts.verbose {
                eprintln!("lab: {m} ({:.1} s)", started.elapsed().as_secs_f64());
            }
        };
        let l = &self.layout;
        let setups = build::setups(&self.scenario, l);
        let namespaces = l.namespaces();
        say(&format!(
            "creating {} namespaces with prefix {}",
            namespaces.len(),
            l.prefix
        ));
        for ns in &namespaces {
            let _guard = LAB_LOCK.lock();
            exec::add_ns(ns).map_err(step(format!("create namespace {ns}")))?;
        }
        write(
            &l.state_dir.join("scenario.yaml"),
            &serde_saphyr::to_string(&self.scenario).unwrap_or_default(),
        )?;
        say("wiring switches, nodes, VXLAN and pods");
        for st in &setups {
            exec::ip_batch(&st.ns, &st.links)
                .map_err(step(format!("create links in {}", st.ns)))?;
        }
        for st in &setups {
            exec::sysctl(&st.ns, &st.sysctl).map_err(step(format!("sysctl in {}", st.ns)))?;
            // Loopback first, in the same `ip` process as the rest of the configuration.
            let lines: Vec<String> = std::iter::once("link set lo up".to_string())
                .chain(st.config.iter().cloned())
                .collect();
            exec::ip_batch(&st.ns, &lines).map_err(step(format!("configure {}", st.ns)))?;
        }
        for st in &setups {
            exec::bridge_batch(&st.ns, &st.fdb).map_err(step(format!("fdb in {}", st.ns)))?;
            exec::nft(&st.ns, &st.nft).map_err(step(format!("nftables in {}", st.ns)))?;
        }
        say("writing certificates, tokens and host roots");
        // Every API address and the `kubernetes` Service of each family the lab has.
        let endpoints: Vec<std::net::IpAddr> = l
            .api_endpoints()
            .iter()
            .map(std::net::SocketAddr::ip)
            .chain(std::iter::once(build::API_SERVICE.into()))
            .chain(
                self.scenario
                    .dual_stack()
                    .then_some(build::API_SERVICE6.into()),
            )
            .collect();
        let pki = pki::generate(&endpoints)?;
        let pki_dir = l.state_dir.join("pki");
        write(&pki_dir.join("ca.crt"), &pki.ca_pem)?;
        write(&pki_dir.join("apiserver.crt"), &pki.cert_pem)?;
        write(&pki_dir.join("apiserver.key"), &pki.key_pem)?;
        let key = format!(
            "{:08x}{:08x}",
            probe_proto::util::random_u32(),
            probe_proto::util::random_u32()
        )
        .into_bytes();
        let now = probe_proto::util::unix_secs();
        let files = build::host_files(&self.scenario, l, &pki.ca_pem, &build::Tokens { now, key });
        for (path, text) in &files.files {
            write(path, text)?;
        }
        write(
            &pki_dir.join("tokens"),
            &(files.allowed_tokens.join("\n") + "\n"),
        )?;
        say("starting the API server, DNS servers and agents");
        self.start_processes(opts)?;
        self.wait_ready()?;
        say("warming neighbour caches (one echo along every path)");
        warm::warm(l, &self.agent_bin);
        let mut inv = build::inventory(&self.scenario, l);
        // The inventory runs as written: `prober matrix --inventory` starts this same agent.
        inv.agent_bin = Some(self.agent_bin.display().to_string());
        write(&self.inventory_path, &inv.to_yaml())?;
        say("ready");
        Ok(())
    }

    fn start_processes(&self, opts: &Options) -> Result<(), LabError> {
        let l = &self.layout;
        let logs = l.state_dir.join("logs");
        std::fs::create_dir_all(&logs).map_err(|source| LabError::Write {
            path: logs.clone(),
            source,
        })?;
        for mut p in build::processes(&self.scenario, l, &self.agent_bin, &opts.prober_bin) {
            if self.control_plane {
                if p.what == "apiserver" {
                    continue;
                }
                if p.what == "host-agent" {
                    free_real_ports(&mut p.argv);
                }
            }
            if !self.agents {
                match p.what {
                    "pod-agent" => continue,
                    "host-agent" => {
                        p.argv
                            .extend(["--port".into(), NODE_SERVICES_PORT.to_string()]);
                        // The pod's host agent sniffs; a user-space tunnel's still needs this one.
                        if !p.argv.iter().any(|a| a == "--sniff") {
                            p.argv.extend(["--sniff", "never"].map(String::from));
                        }
                    }
                    _ => {}
                }
            }
            let log = logs.join(format!(
                "{}-{}.log",
                p.ns.trim_start_matches(&l.prefix),
                p.what
            ));
            let _guard = LAB_LOCK.lock();
            exec::spawn(&p.ns, &p.argv, &log)
                .map_err(step(format!("start {} in {}", p.what, p.ns)))?;
        }
        Ok(())
    }

    fn wait_ready(&self) -> Result<(), LabError> {
        let l = &self.layout;
        let mut pending: Vec<(String, &str, u16)> = vec![
            (l.router_ns.clone(), "udp", 53),
            (l.dns_pod.ns.clone(), "udp", 53),
        ];
        let udp_tunnel = matches!(
            self.scenario.overlay(),
            Overlay::Geneve { .. } | Overlay::Wireguard { .. }
        );
        let node_port = if self.agents {
            AGENT_PORT
        } else {
            NODE_SERVICES_PORT
        };
        for n in &l.nodes {
            pending.push((n.ns.clone(), "tcp", node_port));
            if udp_tunnel {
                // The user-space tunnel's socket.
                pending.push((
                    n.ns.clone(),
                    "udp",
                    self.scenario
                        .overlay()
                        .port()
                        .map_or(0, probe_proto::Port::get),
                ));
            }
            if n.control_plane && !self.control_plane {
                pending.push((n.ns.clone(), "tcp", API_PORT));
            }
            if self.agents {
                pending.extend(n.pods.iter().map(|p| (p.ns.clone(), "tcp", AGENT_PORT)));
            }
        }
        let deadline = Instant::now() + READY_DEADLINE;
        while !pending.is_empty() {
            pending.retain(|(ns, proto, port)| !exec::listening(ns, proto, *port));
            if pending.is_empty() {
                break;
            }
            if Instant::now() > deadline {
                let names: Vec<String> = pending
                    .iter()
                    .map(|(ns, p, port)| format!("{ns} {p}/{port}"))
                    .collect();
                return Err(LabError::NotReady {
                    secs: READY_DEADLINE.as_secs(),
                    what: format!(
                        "nothing listens on {} (logs in {})",
                        names.join(", "),
                        l.state_dir.join("logs").display()
                    ),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Keeps the lab running after this value is dropped (`prober lab up`).
    #[must_use]
    pub fn detach(mut self) -> Layout {
        self.detached = true;
        self.layout.clone()
    }

    /// Tears the lab down now.
    pub fn down(mut self) -> Result<usize, LabError> {
        self.detached = true;
        teardown(&self.layout.prefix, &self.layout.state_dir)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if !self.detached {
            let _ = teardown(&self.layout.prefix, &self.layout.state_dir);
        }
    }
}

/// Removes every namespace with `prefix` (killing what runs inside) and the state directory.
/// Returns how many namespaces were removed.
pub fn teardown(prefix: &str, state_dir: &Path) -> Result<usize, LabError> {
    let _guard = LAB_LOCK.lock();
    teardown_locked(prefix, state_dir)
}

/// `teardown` for a caller that already holds `LAB_LOCK` (the signal handler, which keeps it until
/// the process exits so no build step can start after the teardown).
pub fn teardown_locked(prefix: &str, state_dir: &Path) -> Result<usize, LabError> {
    let mut removed = 0;
    let mut first_error = None;
    for ns in exec::list_ns()
        .into_iter()
        .filter(|n| n.starts_with(prefix))
    {
        match exec::del_ns(&ns) {
            Ok(()) => removed += 1,
            Err(e) => {
                first_error.get_or_insert(LabError::Step {
                    step: format!("delete namespace {ns}"),
                    source: e,
                });
            }
        }
    }
    if state_dir.starts_with(DEFAULT_STATE_ROOT) || state_dir.join("scenario.yaml").exists() {
        let _ = std::fs::remove_dir_all(state_dir);
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(removed),
    }
}

/// One lab found on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabSummary {
    pub name: String,
    pub namespaces: usize,
    pub nodes: usize,
    pub state_dir: Option<PathBuf>,
}

/// The labs that exist now (by namespace prefix and state directory).
#[must_use]
pub fn list(state_root: &Path) -> Vec<LabSummary> {
    let mut out: std::collections::BTreeMap<String, LabSummary> = std::collections::BTreeMap::new();
    for ns in exec::list_ns() {
        let Some(rest) = ns.strip_prefix(NS_PREFIX) else {
            continue;
        };
        let Some((name, node)) = rest.split_once('-') else {
            continue;
        };
        let e = out.entry(name.to_string()).or_insert_with(|| LabSummary {
            name: name.to_string(),
            namespaces: 0,
            nodes: 0,
            state_dir: None,
        });
        e.namespaces += 1;
        if node.starts_with('n') && node[1..].chars().all(|c| c.is_ascii_digit()) {
            e.nodes += 1;
        }
    }
    if let Ok(dir) = std::fs::read_dir(state_root) {
        for entry in dir.filter_map(Result::ok) {
            let file = entry.file_name().to_string_lossy().into_owned();
            if let Some(name) = file.strip_prefix(NS_PREFIX) {
                let e = out.entry(name.to_string()).or_insert_with(|| LabSummary {
                    name: name.to_string(),
                    namespaces: 0,
                    nodes: 0,
                    state_dir: None,
                });
                e.state_dir = Some(entry.path());
            }
        }
    }
    out.into_values().collect()
}

/// The prefix of a lab name.
#[must_use]
pub fn prefix_of(name: &str) -> String {
    format!("{NS_PREFIX}{name}-")
}
