//! `probe-pod`: the prober agent. `serve` answers probes; `probe` runs a plan and prints results.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use probe_pod::proto::{
    DEFAULT_AGENT_PORT, MAX_PLAN_BYTES, Outcome, ProbeResult, parse_duration, parse_plan_lazy,
};
use probe_pod::serve::{self, SniffMode, Stopped};
use probe_pod::{engine, files, plan_input, simulate};

#[derive(Parser)]
#[command(
    name = "probe-pod",
    version,
    about = "The prober agent: answers probes and runs probe plans."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Answer probes: TCP and UDP echo and HTTP /healthz on one port, and sniff for crafted VXLAN
    /// probes when a VXLAN device exists.
    Serve(ServeArgs),
    /// Run a plan (JSON) and print one JSON result per line to stdout as each probe finishes.
    /// Exits 0 when the plan ran, whatever the outcomes; 2 when the plan is invalid.
    Probe(ProbeArgs),
    /// The lab's user-space tunnel: carries what the node routes into a TUN device as real
    /// IP-in-IP or Geneve packets (for kernels without those devices). Runs until killed.
    #[command(hide = true)]
    Tunnel(TunnelArgs),
}

#[derive(clap::Args)]
struct TunnelArgs {
    /// The TUN device (created or attached to).
    #[arg(long)]
    device: String,
    #[arg(long, value_enum)]
    mode: TunnelMode,
    /// Geneve's VNI.
    #[arg(long, default_value_t = 2)]
    vni: u32,
    /// Geneve's UDP port (the `WireGuard` port for the lab's plaintext `WireGuard` stand-in).
    #[arg(long, default_value_t = probe_pod::proto::DEFAULT_GENEVE_PORT)]
    port: u16,
    /// NETWORK/PREFIX=ADDRESS: the peer at ADDRESS owns the pod network NETWORK/PREFIX.
    #[arg(long = "peer", value_delimiter = ',')]
    peers: Vec<probe_pod::net::tunnel::Peer>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum OnTtl {
    Exit,
    Idle,
}

#[derive(Clone, Copy, ValueEnum)]
enum TunnelMode {
    Ipip,
    Geneve,
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Address to listen on: `::` serves both families (IPv4 peers as `::ffff:a.b.c.d`), or IPv4
    /// alone on a kernel without IPv6.
    #[arg(long, env = "PROBE_POD_LISTEN", default_value = "::")]
    listen: IpAddr,
    /// Port for TCP echo, UDP echo and HTTP.
    #[arg(long, env = "PROBE_POD_PORT", default_value_t = DEFAULT_AGENT_PORT)]
    port: u16,
    /// Sniff for crafted VXLAN probes: `auto` when a VXLAN device exists and `CAP_NET_RAW` is held.
    #[arg(long, env = "PROBE_POD_SNIFF", value_enum, default_value_t = Sniff::Auto)]
    sniff: Sniff,
    /// VXLAN UDP ports the sniffer watches.
    #[arg(long = "vxlan-port", env = "PROBE_POD_VXLAN_PORTS", value_delimiter = ',', default_values_t = probe_pod::proto::DEFAULT_VXLAN_PORTS)]
    vxlan_ports: Vec<u16>,
    /// Geneve UDP ports the sniffer watches (a `geneve` probe's port must be one of them to be
    /// seen arriving).
    #[arg(long = "geneve-port", env = "PROBE_POD_GENEVE_PORTS", value_delimiter = ',', default_values_t = [probe_pod::proto::DEFAULT_GENEVE_PORT])]
    geneve_ports: Vec<u16>,
    /// Exit by itself after this long (e.g. 90s, 30m, 2h; 0 = never): a dead-man switch so a
    /// crashed coordinator cannot leave agents running.
    #[arg(long, env = "PROBE_POD_TTL", default_value = "0", value_parser = parse_duration)]
    ttl: Duration,
    /// What the agent does when its TTL expires: `exit`, or `idle`: close every socket and
    /// sniffer and wait, serving nothing, until stopped. Under a `DaemonSet` (restart policy
    /// `Always`, the only one it allows) an agent that exits is started again with a fresh TTL.
    #[arg(long = "on-ttl", env = "PROBE_POD_ON_TTL", value_enum, default_value_t = OnTtl::Exit)]
    on_ttl: OnTtl,
    /// More TCP ports to answer on with echo and HTTP (comma-separated), e.g. to stand in for a
    /// kubelet (10250) where none runs.
    #[arg(
        long = "extra-tcp-port",
        env = "PROBE_POD_EXTRA_TCP_PORTS",
        value_delimiter = ','
    )]
    extra_tcp_ports: Vec<u16>,
    /// UDP ports (comma-separated) a plain socket takes to record crafted VXLAN probes for
    /// `/seen`: the overlay's stand-in on a node that has not joined yet (`prober preflight`).
    #[arg(long = "standin-udp-port", value_delimiter = ',')]
    standin_udp_ports: Vec<u16>,
    /// TCP ports whose arriving SYNs the sniffer records (comma-separated; the agent's own ports
    /// are added), so a failed TCP probe to this node says whether it arrived. The default is the
    /// ports nodes serve each other (docs/design.md, "Ports the cluster needs").
    #[arg(
        long = "receipt-tcp-port",
        env = "PROBE_POD_RECEIPT_TCP_PORTS",
        value_delimiter = ',',
        default_values_t = [6443u16, 10250, 2379, 2380, 179, 5473, 4240, 6783]
    )]
    receipt_tcp_ports: Vec<u16>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Sniff {
    Auto,
    Always,
    Never,
}

#[derive(clap::Args)]
struct ProbeArgs {
    /// Plan file, or `-` for standard input.
    #[arg(long, env = "PROBE_POD_PLAN")]
    plan: PathBuf,
    /// Send nothing: answer every probe at once as a healthy cluster would, each answer marked
    /// `simulated`. For measuring the coordinator at scale on one machine (bench/scale.sh).
    #[arg(long, env = "PROBE_POD_SIMULATE")]
    simulate: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("PROBE_POD_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_ansi(false)
        .init();
    if let Command::Tunnel(t) = &cli.command {
        return tunnel_cmd(t);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("probe-pod: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let (code, idle) = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => serve_cmd(args).await,
            Command::Probe(args) => (probe_cmd(&args).await, false),
            Command::Tunnel(_) => unreachable!("run before the runtime starts"),
        }
    });
    if !idle {
        return code;
    }
    // Dropping the runtime ends every task it spawned (listeners, sniffer, stand-ins), so every
    // port and socket is released; then wait, on a runtime of nothing, to be stopped.
    runtime.shutdown_timeout(Duration::from_secs(1));
    tracing::info!("ttl expired: serving nothing until stopped");
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(idle) => idle.block_on(shutdown_signal()),
        Err(e) => eprintln!("probe-pod: cannot wait idle: {e}"),
    }
    ExitCode::SUCCESS
}

/// Blocking threads, no async runtime: the tunnel only forwards packets.
fn tunnel_cmd(t: &TunnelArgs) -> ExitCode {
    use probe_pod::net::tunnel::{Encap, run};
    let encap = match t.mode {
        TunnelMode::Ipip => Encap::Ipip,
        TunnelMode::Geneve => Encap::Geneve {
            vni: t.vni,
            port: t.port,
        },
    };
    tracing::info!(device = %t.device, peers = t.peers.len(), "tunnel running");
    match run(&t.device, encap, t.peers.clone()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("probe-pod tunnel {}: {e}", t.device);
            ExitCode::from(1)
        }
    }
}

/// The exit code, and whether to stay idle once the runtime is gone (`--on-ttl idle`).
async fn serve_cmd(args: ServeArgs) -> (ExitCode, bool) {
    let on_ttl = args.on_ttl;
    let config = serve::Config {
        listen: args.listen,
        port: args.port,
        sniff: match args.sniff {
            Sniff::Auto => SniffMode::Auto,
            Sniff::Always => SniffMode::Always,
            Sniff::Never => SniffMode::Never,
        },
        vxlan_ports: args.vxlan_ports,
        geneve_ports: args.geneve_ports,
        ttl: (!args.ttl.is_zero()).then_some(args.ttl),
        extra_tcp_ports: args.extra_tcp_ports,
        standin_udp_ports: args.standin_udp_ports,
        receipt_tcp_ports: args.receipt_tcp_ports,
    };
    match serve::run(config, shutdown_signal()).await {
        Ok(Stopped::Signal) => {
            tracing::info!("stopping on signal");
            (ExitCode::SUCCESS, false)
        }
        Ok(Stopped::Ttl) if on_ttl == OnTtl::Idle => (ExitCode::SUCCESS, true),
        Ok(Stopped::Ttl) => {
            tracing::info!("ttl expired; exiting");
            (ExitCode::SUCCESS, false)
        }
        Err(e) => {
            if let Some(event) = e.event() {
                // For the process that started it; nobody reading is no reason to fail louder.
                use std::io::Write;
                let _ = writeln!(std::io::stdout(), "{}", event.to_line());
            }
            eprintln!("probe-pod serve: {e}");
            (ExitCode::from(2), false)
        }
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

fn read_plan(path: &std::path::Path) -> Result<String, String> {
    if path.as_os_str() == "-" {
        return plan_input::read_document(
            std::io::stdin().lock(),
            MAX_PLAN_BYTES,
            "standard input",
        )
        .map_err(|e| e.to_string());
    }
    let from = path.display().to_string();
    let bytes = files::read_capped(path, MAX_PLAN_BYTES as u64, "plan", &from)
        .map_err(|e| e.to_string())?;
    String::from_utf8(bytes).map_err(|_| format!("the plan {from} is not UTF-8 text"))
}

async fn probe_cmd(args: &ProbeArgs) -> ExitCode {
    let text = match read_plan(&args.plan) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("probe-pod probe: {e}");
            return ExitCode::from(2);
        }
    };
    let plan = match parse_plan_lazy(text) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("probe-pod probe: {e}");
            return ExitCode::from(2);
        }
    };
    if args.simulate {
        let code = simulate_cmd(&plan);
        linger(args).await;
        return code;
    }
    // How long this process is kept from running, so a late timer is never read as loss.
    probe_pod::proto::stall::watch();
    let concurrency = engine::effective_concurrency(&plan, engine::fd_budget());
    tracing::debug!(probes = plan.len(), concurrency, "running plan");
    let (tx, mut rx) = tokio::sync::mpsc::channel::<ProbeResult>(1024);
    // One thread writes results as they come, through a buffer flushed whenever no other result
    // is waiting: each result still leaves as soon as it is known, but a burst leaves in one write
    // rather than one blocking write per line.
    let writer = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
        while let Some(r) = rx.blocking_recv() {
            let written = serde_json::to_writer(&mut out, &r)
                .map_err(std::io::Error::from)
                .and_then(|()| out.write_all(b"\n"))
                .and_then(|()| if rx.is_empty() { out.flush() } else { Ok(()) });
            if written.is_err() {
                // The reader went away (the coordinator gave up): nothing left to report to.
                return;
            }
        }
        let _ = out.flush();
    });
    engine::run_plan(plan, concurrency, tx).await;
    let _ = writer.await;
    linger(args).await;
    ExitCode::SUCCESS
}

/// The longest an agent whose plan came on stdin waits, its results written, for its reader to
/// close stdin.
const LINGER: Duration = Duration::from_secs(5);

/// Waits, its results written, until the coordinator closes stdin (it has read every result),
/// at most [`LINGER`]. Over `pods/exec` the kubelet's streaming server ends the connection when
/// the command exits: a reader still behind would lose the last lines and the exit status to
/// the reset. On `v5.channel.k8s.io` the coordinator's close of stdin reaches the agent as its
/// end; on v4 it cannot (closing stdin closes the whole connection), so the wait is bounded.
async fn linger(args: &ProbeArgs) {
    if args.plan.as_os_str() != "-" {
        return;
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    // A thread of its own, not the runtime's: a read that never ends must not hold the exit.
    let reader = std::thread::Builder::new()
        .name("stdin-end".into())
        .spawn(move || {
            use std::io::Read;
            let mut buf = [0u8; 4096];
            let mut stdin = std::io::stdin();
            while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
            let _ = tx.send(());
        });
    if reader.is_ok() {
        let _ = tokio::time::timeout(LINGER, rx).await;
    }
}

/// Prints a simulated answer to every probe of `plan` (`--simulate`): no socket is opened.
fn simulate_cmd(plan: &probe_pod::proto::LazyPlan) -> ExitCode {
    use std::io::Write;
    let now = probe_pod::util::unix_ms();
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    for (i, spec) in plan.probes().enumerate() {
        let r = match spec {
            Ok(s) => simulate::answer(&s, now),
            Err(e) => ProbeResult::new(format!("probes[{i}]"), Outcome::Error, e.to_string()),
        };
        let written = serde_json::to_writer(&mut out, &r)
            .map_err(std::io::Error::from)
            .and_then(|()| out.write_all(b"\n"));
        if written.is_err() {
            // The reader went away: nothing left to report to.
            return ExitCode::SUCCESS;
        }
    }
    let _ = out.flush();
    ExitCode::SUCCESS
}
