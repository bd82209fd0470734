//! `prober`: tells Kubernetes operators which network paths of their cluster fail, and why.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use prober::inventory::Inventory;
use prober::lab::{self, Lab, Options, check, scenario::Scenario};
use prober::model::PathClass;
use prober::plan::Filter;
use prober::report::{self, Report};
use prober::run::RunConfig;
use prober::runtime::local::Local;

use report::{EXIT_FAILURES, EXIT_USAGE};

#[derive(Parser)]
#[command(
    name = "prober",
    version,
    about = "Tells Kubernetes operators which network paths of their cluster fail, and why."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Probe the full path matrix with the agents named in an inventory, and report it.
    /// Exit 0: no failures; 1: failures; 2: usage or environment error; 3: agents missing.
    Matrix(MatrixArgs),
    /// Re-render a saved JSON report (`matrix -o json`) in any output format.
    Report(ReportArgs),
    /// Read the cluster through the Kubernetes API (read-only) and print what the prober believes
    /// about it, as an inventory you can inspect, edit and pass to `matrix --inventory`.
    Discover(DiscoverArgs),
    /// Remove the agents left behind by crashed runs (found by label).
    Cleanup(CleanupArgs),
    /// Print the objects the prober applies to run its agents (namespace, service account, the
    /// two agent DaemonSets): the same as `deploy/base`.
    Manifests(ManifestsArgs),
    /// A multi-node cluster emulator in network namespaces (Linux, root): real kernel VXLAN,
    /// nftables kube-proxy and firewalls, a TLS API server and a DNS server, with injectable faults.
    #[command(subcommand)]
    Lab(LabCommand),
}

#[derive(Subcommand)]
enum LabCommand {
    /// Build a lab and leave it running; prints its name and inventory.
    Up(UpArgs),
    /// Tear labs down: by name, or every lab on this machine with --all.
    Down(DownArgs),
    /// List the labs on this machine.
    Status(CommonArgs),
    /// Build a lab from a scenario, check its expectations, tear it down. Exit 0 when all held.
    Run(RunArgs),
    /// The API server stand-in (run inside a lab node by `lab up`).
    #[command(hide = true)]
    Apiserver(ApiserverArgs),
}

#[derive(Clone, Copy, ValueEnum)]
enum Output {
    Table,
    Json,
    Junit,
}

#[derive(Args)]
struct OutputArgs {
    /// Output format.
    #[arg(short, long, env = "PROBER_OUTPUT", value_enum, default_value_t = Output::Table)]
    output: Output,
    /// Width of the table (defaults to 100 columns).
    #[arg(long, env = "PROBER_WIDTH", default_value_t = 100)]
    width: usize,
}

#[derive(Args, Clone)]
struct KubeArgs {
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or the in-cluster service account).
    #[arg(long, env = "PROBER_KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use.
    #[arg(long, env = "PROBER_CONTEXT")]
    context: Option<String>,
}

#[derive(Args, Clone)]
struct AgentArgs {
    /// Namespace of the agents.
    #[arg(long, short = 'n', env = "PROBER_NAMESPACE", default_value = prober::runtime::kube::manifests::DEFAULT_NAMESPACE)]
    namespace: String,
    /// Agent image.
    #[arg(long, env = "PROBER_IMAGE", default_value = prober::runtime::kube::manifests::DEFAULT_IMAGE)]
    image: String,
    /// Leave the agents running afterwards (remove them with `prober cleanup`).
    #[arg(long, env = "PROBER_KEEP_AGENTS")]
    keep_agents: bool,
    /// Use agents already installed from deploy/ (the scheduled mode): apply and remove nothing.
    #[arg(long, env = "PROBER_USE_EXISTING")]
    use_existing: bool,
    /// How long to wait for the agents to become ready before probing with those that are.
    #[arg(long, env = "PROBER_AGENT_WAIT", default_value = "90s", value_parser = parse_timeout)]
    agent_wait: Duration,
}

#[derive(Args)]
struct CleanupArgs {
    #[command(flatten)]
    kube: KubeArgs,
    /// Namespace of the agents.
    #[arg(long, short = 'n', env = "PROBER_NAMESPACE", default_value = prober::runtime::kube::manifests::DEFAULT_NAMESPACE)]
    namespace: String,
}

#[derive(Args)]
struct DiscoverArgs {
    #[command(flatten)]
    kube: KubeArgs,
    /// Output format.
    #[arg(short, long, env = "PROBER_OUTPUT", value_enum, default_value_t = DocFormat::Yaml)]
    output: DocFormat,
}

#[derive(Clone, Copy, ValueEnum)]
enum DocFormat {
    Yaml,
    Json,
}

#[derive(Args)]
struct ManifestsArgs {
    /// Namespace of the agents.
    #[arg(long, short = 'n', env = "PROBER_NAMESPACE", default_value = prober::runtime::kube::manifests::DEFAULT_NAMESPACE)]
    namespace: String,
    /// Agent image.
    #[arg(long, env = "PROBER_IMAGE", default_value = prober::runtime::kube::manifests::DEFAULT_IMAGE)]
    image: String,
}

#[derive(Args)]
struct MatrixArgs {
    /// Inventory file (YAML or JSON; DESIGN.md section 4), e.g. the one `prober lab up` writes.
    /// Without it, the cluster is discovered through the Kubernetes API.
    #[arg(long, env = "PROBER_INVENTORY")]
    inventory: Option<PathBuf>,
    #[command(flatten)]
    kube: KubeArgs,
    #[command(flatten)]
    agents: AgentArgs,
    #[command(flatten)]
    probe: ProbeArgs,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Args)]
struct ProbeArgs {
    /// The agent binary as each exec prefix sees it.
    #[arg(long, env = "PROBER_AGENT_BIN", default_value = "probe-pod")]
    agent_bin: String,
    /// Only these path classes (comma-separated).
    #[arg(long, env = "PROBER_PATHS", value_enum, value_delimiter = ',')]
    paths: Vec<PathClass>,
    /// Skip these path classes (comma-separated).
    #[arg(long, env = "PROBER_SKIP_PATHS", value_enum, value_delimiter = ',')]
    skip_paths: Vec<PathClass>,
    /// Only probes from or to these nodes (comma-separated).
    #[arg(long, env = "PROBER_NODES", value_delimiter = ',')]
    nodes: Vec<String>,
    /// Deadline of each probe (e.g. 2s, 500ms).
    #[arg(long, env = "PROBER_TIMEOUT", default_value = "2s", value_parser = parse_timeout)]
    timeout: Duration,
    /// Agents probing at once.
    #[arg(long, env = "PROBER_CONCURRENCY", default_value_t = 64)]
    concurrency: usize,
    /// Also write the JSON report to this file.
    #[arg(long, env = "PROBER_SAVE")]
    save: Option<PathBuf>,
    /// No progress bar, even on a terminal.
    #[arg(long, env = "PROBER_NO_PROGRESS")]
    no_progress: bool,
}

#[derive(Args)]
struct ReportArgs {
    /// A JSON report saved by `prober matrix -o json` or `--save`.
    file: PathBuf,
    #[command(flatten)]
    out: OutputArgs,
}

fn parse_timeout(s: &str) -> Result<Duration, String> {
    let d = probe_proto::parse_duration(s)?;
    if d.is_zero() {
        return Err("must be more than zero".into());
    }
    Ok(d)
}

#[derive(Args, Clone)]
struct CommonArgs {
    /// Where labs keep inventories, certificates, host roots and logs.
    #[arg(long, env = "PROBER_LAB_STATE", default_value = lab::DEFAULT_STATE_ROOT)]
    state_dir: PathBuf,
}

#[derive(Args)]
struct BuildArgs {
    /// Scenario file (YAML); without it, a healthy cluster.
    #[arg(long, env = "PROBER_LAB_SCENARIO")]
    scenario: Option<PathBuf>,
    /// Number of nodes (overrides the scenario's).
    #[arg(long, env = "PROBER_LAB_NODES")]
    nodes: Option<usize>,
    /// Lab name (1-10 lowercase letters/digits); namespaces are plab-NAME-*. Random by default.
    #[arg(long, env = "PROBER_LAB_NAME")]
    name: Option<String>,
    /// The agent binary to run in every node and pod.
    #[arg(long, env = "PROBER_AGENT_BIN")]
    agent_bin: Option<PathBuf>,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Args)]
struct UpArgs {
    #[command(flatten)]
    build: BuildArgs,
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    build: BuildArgs,
    #[command(flatten)]
    out: OutputArgs,
    /// Also write the matrix's JSON report to this file.
    #[arg(long)]
    save: Option<PathBuf>,
    /// Leave the lab running afterwards (take it down with `prober lab down NAME`).
    #[arg(long)]
    keep: bool,
}

#[derive(Args)]
struct DownArgs {
    /// Lab names (as printed by `lab up` and `lab status`).
    names: Vec<String>,
    /// Remove every lab on this machine, including leftovers of crashed runs.
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Args)]
struct ApiserverArgs {
    #[arg(long)]
    listen: std::net::SocketAddr,
    #[arg(long)]
    cert: PathBuf,
    #[arg(long)]
    key: PathBuf,
    #[arg(long)]
    tokens: PathBuf,
}

/// The lab being built, for the signal handler.
static CURRENT: Mutex<Option<(String, PathBuf)>> = Mutex::new(None);

/// Blocks SIGINT/SIGTERM in every thread and tears the current lab down when one arrives, so
/// Ctrl-C never leaves namespaces behind. Must run before any other thread starts.
fn install_signal_teardown() {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    if set.thread_block().is_err() {
        return;
    }
    std::thread::spawn(move || {
        let Ok(sig) = set.wait() else { return };
        let held = lab::LAB_LOCK.lock();
        if let Some((prefix, state)) = CURRENT.lock().ok().and_then(|c| c.clone()) {
            eprintln!("prober: {sig:?}: tearing the lab down");
            if let Err(e) = lab::teardown_locked(&prefix, &state) {
                eprintln!("prober: teardown: {e}");
            }
        }
        // Exit while still holding the lock: released earlier, the build thread could start one
        // more `ip netns add` that would outlive us and leave a namespace behind.
        let _held = held;
        std::process::exit(130);
    });
}

fn sibling(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join(name)))
        .unwrap_or_else(|| PathBuf::from(name))
}

fn load_scenario(b: &BuildArgs) -> Result<Scenario, String> {
    let mut s = match &b.scenario {
        Some(path) => Scenario::load(path).map_err(|e| e.to_string())?,
        None => Scenario::default(),
    };
    if let Some(n) = b.nodes {
        s.nodes = n;
        s.validate().map_err(|e| format!("--nodes {n}: {e}"))?;
    }
    Ok(s)
}

fn options(b: &BuildArgs) -> Options {
    Options {
        name: b.name.clone(),
        state_root: b.common.state_dir.clone(),
        agent_bin: b.agent_bin.clone().unwrap_or_else(|| sibling("probe-pod")),
        prober_bin: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("prober")),
        verbose: true,
    }
}

fn build(b: &BuildArgs) -> Result<(Scenario, Lab), ExitCode> {
    let s = load_scenario(b).map_err(|e| {
        eprintln!("prober lab: {e}");
        ExitCode::from(EXIT_USAGE)
    })?;
    let opts = options(b);
    if let Err(e) = lab::preflight(&opts) {
        eprintln!("prober lab: {e}");
        return Err(ExitCode::from(EXIT_USAGE));
    }
    // The name must be known before building so the signal handler can clean up after it.
    let name = opts.name.clone().unwrap_or_else(lab::unique_name);
    let opts = Options {
        name: Some(name.clone()),
        ..opts
    };
    let prefix = lab::prefix_of(&name);
    if let Ok(mut c) = CURRENT.lock() {
        *c = Some((
            prefix.clone(),
            opts.state_root.join(prefix.trim_end_matches('-')),
        ));
    }
    match Lab::up(&s, &opts) {
        Ok(l) => Ok((s, l)),
        Err(e) => {
            eprintln!("prober lab: {e}");
            Err(ExitCode::from(EXIT_USAGE))
        }
    }
}

fn lab_up(args: &UpArgs) -> ExitCode {
    let (s, lab) = match build(&args.build) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let inventory = lab.inventory_path.clone();
    let layout = lab.detach();
    let name = layout
        .prefix
        .trim_start_matches(lab::NS_PREFIX)
        .trim_end_matches('-')
        .to_string();
    println!(
        "lab {name} is up: {} nodes ({}), {} faults",
        s.nodes,
        s.name,
        s.faults.len()
    );
    println!("inventory: {}", inventory.display());
    for n in &layout.nodes {
        println!(
            "  {:<4} {:<15} pod {:<13} ip netns exec {}",
            n.name,
            n.address.to_string(),
            n.pods[0].address.to_string(),
            n.ns
        );
    }
    println!("take it down with: prober lab down {name}");
    ExitCode::SUCCESS
}

fn lab_run(args: &RunArgs) -> ExitCode {
    let (s, lab) = match build(&args.build) {
        Ok(x) => x,
        Err(code) => return code,
    };
    println!("scenario {}: {}", s.name, s.description.trim());
    let inv = lab::build::inventory(&s, &lab.layout);
    let probe = ProbeArgs {
        agent_bin: lab.agent_bin.display().to_string(),
        paths: Vec::new(),
        skip_paths: Vec::new(),
        nodes: Vec::new(),
        timeout: Duration::from_secs(2),
        concurrency: 64,
        save: args.save.clone(),
        no_progress: false,
    };
    let matrix = run_matrix(&inv, &probe);
    match &matrix {
        Ok(r) => print!("{}", render(r, &args.out)),
        Err(e) => eprintln!("prober lab run: matrix: {e}"),
    }
    println!("\nexpectations:");
    let checked = check::run(&lab);
    let (report, reach_ok) = check::render(&checked);
    print!("{report}");
    let (found_text, found_ok) = match &matrix {
        Ok(r) => check::findings(&s.expect, &r.findings),
        Err(_) => ("FAIL the matrix did not run\n".to_string(), false),
    };
    print!("{found_text}");
    let ok = reach_ok && found_ok;
    let total = checked.len() + s.expect.findings.len() + s.expect.not_findings.len();
    let count = |p: &str| found_text.lines().filter(|l| l.starts_with(p)).count();
    let failed = checked.iter().filter(|c| !c.pass).count() + count("FAIL");
    let skipped = count("skip");
    println!(
        "{} passed, {failed} failed, {skipped} skipped",
        total - failed - skipped
    );
    if args.keep {
        let layout = lab.detach();
        println!(
            "lab kept: prober lab down {}",
            layout
                .prefix
                .trim_start_matches(lab::NS_PREFIX)
                .trim_end_matches('-')
        );
    } else if let Err(e) = lab.down() {
        eprintln!("prober lab: teardown: {e}");
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILURES)
    }
}

fn lab_down(args: &DownArgs) -> ExitCode {
    if args.names.is_empty() && !args.all {
        eprintln!(
            "prober lab down: name the labs to remove, or pass --all (see `prober lab status`)"
        );
        return ExitCode::from(EXIT_USAGE);
    }
    let labs = lab::list(&args.common.state_dir);
    let chosen: Vec<&lab::LabSummary> = labs
        .iter()
        .filter(|l| args.all || args.names.contains(&l.name))
        .collect();
    for n in &args.names {
        if !labs.iter().any(|l| &l.name == n) {
            eprintln!("prober lab down: no lab named {n:?}");
        }
    }
    let mut failed = false;
    for l in chosen {
        let state = l.state_dir.clone().unwrap_or_else(|| {
            args.common
                .state_dir
                .join(lab::prefix_of(&l.name).trim_end_matches('-'))
        });
        match lab::teardown(&lab::prefix_of(&l.name), &state) {
            Ok(n) => println!("removed lab {} ({n} namespaces)", l.name),
            Err(e) => {
                eprintln!("prober lab down {}: {e}", l.name);
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::from(EXIT_USAGE)
    } else {
        ExitCode::SUCCESS
    }
}

fn lab_status(args: &CommonArgs) -> ExitCode {
    let labs = lab::list(&args.state_dir);
    if labs.is_empty() {
        println!("no labs");
    }
    for l in labs {
        let state = l.state_dir.as_deref().map_or_else(
            || "no state dir".to_string(),
            |p| Path::new(p).display().to_string(),
        );
        println!(
            "{:<12} {:>3} nodes {:>4} namespaces  {state}",
            l.name, l.nodes, l.namespaces
        );
    }
    ExitCode::SUCCESS
}

fn render(report: &Report, out: &OutputArgs) -> String {
    match out.output {
        Output::Table => {
            let color = std::io::stdout().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
            report::table(
                report,
                report::Style {
                    color,
                    width: out.width,
                },
            )
        }
        Output::Json => report.to_json() + "\n",
        Output::Junit => report::junit(report),
    }
}

/// Plans and runs the matrix on the inventory's agents through the local runtime.
fn run_matrix(inv: &Inventory, args: &ProbeArgs) -> Result<Report, String> {
    let unknown: Vec<&String> = args
        .nodes
        .iter()
        .filter(|n| !inv.nodes.iter().any(|m| &m.name == *n))
        .collect();
    if !unknown.is_empty() {
        return Err(format!(
            "--nodes: no node named {unknown:?} in the inventory"
        ));
    }
    let filter = Filter {
        paths: args.paths.clone(),
        skip_paths: args.skip_paths.clone(),
        nodes: args.nodes.clone(),
    };
    let planned = prober::plan::plan(inv, &filter);
    if planned.is_empty() {
        return Err("nothing to probe: the inventory and filters leave no probe".into());
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    let runtime = Arc::new(Local::new(inv, args.agent_bin.clone()));
    let cfg = RunConfig {
        probe_timeout: args.timeout,
        concurrency: args.concurrency.max(1),
        ..RunConfig::default()
    };
    let progress = (!args.no_progress && std::io::stderr().is_terminal()).then(|| {
        let bar = indicatif::ProgressBar::new(planned.len() as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} probing {pos}/{len} [{bar:40}] {elapsed}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    let out = rt.block_on(prober::run::run(
        &planned,
        runtime,
        &cfg,
        progress.as_ref(),
        async {
            let _ = tokio::signal::ctrl_c().await;
        },
    ));
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    let report = Report::new(out, inv);
    if let Some(path) = &args.save {
        std::fs::write(path, report.to_json() + "\n")
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(report)
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))
}

fn discover_cmd(args: &DiscoverArgs) -> ExitCode {
    let result = runtime().and_then(|rt| {
        rt.block_on(prober::runtime::kube::discover(
            args.kube.kubeconfig.as_deref(),
            args.kube.context.as_deref(),
        ))
    });
    match result {
        Ok(inv) => {
            match args.output {
                DocFormat::Yaml => print!("{}", inv.to_yaml()),
                DocFormat::Json => {
                    println!("{}", serde_json::to_string_pretty(&inv).unwrap_or_default());
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("prober discover: {e}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

fn manifests_cmd(args: &ManifestsArgs) -> ExitCode {
    let spec = prober::runtime::kube::manifests::AgentSpec {
        namespace: args.namespace.clone(),
        image: args.image.clone(),
        ttl: None,
        run: None,
    };
    print!("{}", prober::runtime::kube::manifests::yaml(&spec));
    ExitCode::SUCCESS
}

/// The matrix through the Kubernetes API: discover, deploy the agents, wait, probe through
/// pods/exec, clean up (on success, failure and Ctrl-C).
async fn kube_matrix(args: &MatrixArgs) -> Result<Report, String> {
    use prober::runtime::kube::{deploy, exec::KubeExec, manifests::AgentSpec};
    let (client, server, source) = prober::runtime::kube::client(
        args.kube.kubeconfig.as_deref(),
        args.kube.context.as_deref(),
    )
    .await
    .map_err(|e| e.to_string())?;
    let raw = tokio::time::timeout(
        prober::runtime::kube::CONNECT_TIMEOUT * 3,
        prober::runtime::kube::discover::read(&client),
    )
    .await
    .map_err(|_| format!("cannot reach the cluster at {server} (from {source}): no answer"))?
    .map_err(|e| format!("cannot reach the cluster at {server} (from {source}): {e}"))?;
    let mut inv = prober::runtime::kube::discover::build(&raw).map_err(|e| e.to_string())?;
    let run = format!("r{:x}", std::process::id());
    let spec = AgentSpec {
        namespace: args.agents.namespace.clone(),
        image: args.agents.image.clone(),
        ttl: (!args.agents.use_existing).then(|| "2h".to_string()),
        run: (!args.agents.use_existing).then(|| run.clone()),
    };
    let created_ns = if args.agents.use_existing {
        false
    } else {
        deploy::apply(&client, &spec)
            .await
            .map_err(|e| e.to_string())?
    };
    let nodes: Vec<String> = inv.nodes.iter().map(|n| n.name.clone()).collect();
    let progress = |ready: usize, wanted: usize| {
        if std::io::stderr().is_terminal() {
            eprint!("\ragents ready: {ready}/{wanted}   ");
        }
    };
    let outcome = async {
        // Ctrl-C while the agents start: stop waiting, clean up below.
        let waited = tokio::select! {
            w = deploy::wait(&client, &spec, &nodes, args.agents.agent_wait, &progress) => w.map_err(|e| e.to_string()),
            _ = tokio::signal::ctrl_c() => Err("interrupted while waiting for the agents".to_string()),
        };
        let (ready, missing) = waited?;
        for n in &mut inv.nodes {
            for (kind, slot) in [
                (prober::model::AgentKind::Host, &mut n.agents.host),
                (prober::model::AgentKind::Pod, &mut n.agents.pod),
            ] {
                let agent = prober::model::AgentRef {
                    node: n.name.clone(),
                    agent: kind,
                };
                *slot = ready.get(&agent).map(|p| prober::inventory::Agent {
                    exec: vec![
                        "kubectl".into(),
                        "-n".into(),
                        spec.namespace.clone(),
                        "exec".into(),
                        p.pod.clone(),
                        "--".into(),
                    ],
                    address: p.address,
                    port: prober::lab::build::AGENT_PORT,
                });
            }
        }
        let filter = Filter {
            paths: args.probe.paths.clone(),
            skip_paths: args.probe.skip_paths.clone(),
            nodes: args.probe.nodes.clone(),
        };
        let planned = prober::plan::plan(&inv, &filter);
        let runtime = Arc::new(KubeExec::new(client.clone(), &spec.namespace, ready));
        let cfg = RunConfig {
            probe_timeout: args.probe.timeout,
            concurrency: args.probe.concurrency.max(1),
            ..RunConfig::default()
        };
        let mut out = prober::run::run(&planned, runtime, &cfg, None, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await;
        out.agents.extend(missing);
        Ok::<_, String>(Report::new(out, &inv))
    }
    .await;
    let keep = args.agents.use_existing || args.agents.keep_agents;
    if !keep && let Err(e) = deploy::cleanup(&client, &spec, created_ns).await {
        eprintln!("prober matrix: cleanup: {e} (run `prober cleanup`)");
    }

    outcome
}

fn cleanup_cmd(args: &CleanupArgs) -> ExitCode {
    let result = runtime().and_then(|rt| {
        rt.block_on(async {
            let (client, _, _) = prober::runtime::kube::client(
                args.kube.kubeconfig.as_deref(),
                args.kube.context.as_deref(),
            )
            .await
            .map_err(|e| e.to_string())?;
            prober::runtime::kube::deploy::cleanup_leftovers(&client, &args.namespace)
                .await
                .map_err(|e| e.to_string())
        })
    });
    match result {
        Ok(n) => {
            println!("removed {n} agent DaemonSet(s) from {}", args.namespace);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("prober cleanup: {e}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

fn matrix(args: &MatrixArgs) -> ExitCode {
    let result = match &args.inventory {
        None => runtime().and_then(|rt| rt.block_on(kube_matrix(args))),
        Some(path) => Inventory::load(path)
            .map_err(|e| e.to_string())
            .and_then(|inv| run_matrix(&inv, &args.probe)),
    };
    match result {
        Ok(r) => {
            print!("{}", render(&r, &args.out));
            ExitCode::from(r.summary.exit_code)
        }
        Err(e) => {
            eprintln!("prober matrix: {e}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

fn report_cmd(args: &ReportArgs) -> ExitCode {
    let text = match std::fs::read_to_string(&args.file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("prober report: cannot read {}: {e}", args.file.display());
            return ExitCode::from(EXIT_USAGE);
        }
    };
    match Report::from_json(&text) {
        Ok(r) => {
            print!("{}", render(&r, &args.out));
            ExitCode::from(r.summary.exit_code)
        }
        Err(e) => {
            eprintln!("prober report: {}: {e}", args.file.display());
            ExitCode::from(EXIT_USAGE)
        }
    }
}

fn apiserver(args: &ApiserverArgs) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("prober lab apiserver: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    match rt.block_on(lab::apiserver::serve(
        args.listen,
        &args.cert,
        &args.key,
        &args.tokens,
    )) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("prober lab apiserver: {e}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

fn main() -> ExitCode {
    // Installed as `kubectl-probe`, it is a kubectl plugin: `kubectl probe matrix`.
    let invoked = std::env::args_os().next().map(std::path::PathBuf::from);
    let name = invoked
        .as_deref()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned());
    let cli = match name.as_deref() {
        Some("kubectl-probe") => {
            use clap::{CommandFactory, FromArgMatches};
            let matches = Cli::command().bin_name("kubectl probe").get_matches();
            Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
        }
        _ => Cli::parse(),
    };
    match cli.command {
        Command::Matrix(a) => matrix(&a),
        Command::Report(a) => report_cmd(&a),
        Command::Discover(a) => discover_cmd(&a),
        Command::Manifests(a) => manifests_cmd(&a),
        Command::Cleanup(a) => cleanup_cmd(&a),
        Command::Lab(LabCommand::Apiserver(a)) => apiserver(&a),
        Command::Lab(cmd) => {
            install_signal_teardown();
            match cmd {
                LabCommand::Up(a) => lab_up(&a),
                LabCommand::Run(a) => lab_run(&a),
                LabCommand::Down(a) => lab_down(&a),
                LabCommand::Status(a) => lab_status(&a),
                LabCommand::Apiserver(_) => unreachable!("handled above"),
            }
        }
    }
}
