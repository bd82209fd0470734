//! `prober`: tells Kubernetes operators which network paths of their cluster fail, and why.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;

use clap::{Args, Parser, Subcommand};
use prober::lab::{self, Lab, Options, check, scenario::Scenario};

/// Exit codes (DESIGN.md section 4).
const EXIT_FAILURES: u8 = 1;
const EXIT_USAGE: u8 = 2;

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
            let _ = lab::teardown_locked(&prefix, &state);
        }
        drop(held);
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
    let name = opts
        .name
        .clone()
        .unwrap_or_else(|| format!("{:04x}", std::process::id() & 0xffff));
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
    let checked = check::run(&lab);
    let (report, ok) = check::render(&checked);
    print!("{report}");
    let pending = s.expect.findings.len() + s.expect.not_findings.len();
    if pending > 0 {
        println!(
            "({pending} finding expectation(s) recorded; they are checked once the diagnosis lands)"
        );
    }
    let passed = checked.iter().filter(|c| c.pass).count();
    println!("{passed} passed, {} failed", checked.len() - passed);
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
    let cli = Cli::parse();
    match cli.command {
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
