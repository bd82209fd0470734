//! `prober matrix`: plan the full path matrix, run it on the agents, diagnose, report.

use super::out::errln;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

use prober::inventory::Inventory;
use prober::model::AgentStatus;
use prober::report::Report;
use prober::report::remembered::Changes;
use prober::run::{Phase, Progress, RunConfig};
use prober::runtime::Runtime;
use prober::runtime::kube::{deploy, exec::KubeExec};
use prober::runtime::local::Local;

use super::CliError;
use super::args::{
    AgentArgs, ExportArgs, KubeArgs, OutputArgs, ProbeArgs, RememberArgs, SampleSize,
};
use super::signals;

#[derive(clap::Args)]
pub struct Args {
    /// Inventory file (YAML or JSON; docs/design.md, "Contracts"), e.g. the one `prober lab up`
    /// writes. Without it, the cluster is discovered through the Kubernetes API.
    #[arg(long, env = "PROBER_INVENTORY")]
    pub inventory: Option<PathBuf>,
    #[command(flatten)]
    pub kube: KubeArgs,
    #[command(flatten)]
    pub agents: AgentArgs,
    #[command(flatten)]
    pub probe: ProbeArgs,
    #[command(flatten)]
    pub out: OutputArgs,
    #[command(flatten)]
    pub export: ExportArgs,
    #[command(flatten)]
    pub memory: RememberArgs,
}

pub async fn run(args: &Args) -> Result<u8, CliError> {
    let (report, finished, changes) = match &args.inventory {
        None => kube_matrix(args).await?,
        Some(_) if args.memory.remember => {
            return Err(CliError::Usage(super::remember::NEEDS_KUBE.into()));
        }
        Some(path) => {
            let inv = Inventory::load(path)?;
            let runtime = Arc::new(Local::new(&inv, args.probe.agent_bin(&inv)));
            let report = run_matrix(
                &inv,
                runtime,
                &args.probe,
                Vec::new(),
                0,
                signals::interrupted(),
            )
            .await?;
            (report, super::export::now(), None)
        }
    };
    super::out::written(
        args.out
            .write_finished(&report, finished, std::io::stdout().lock()),
    )?;
    let changes = changes.as_ref();
    Ok(args
        .export
        .finish(&super::command("matrix"), &report, finished, changes)
        .await)
}

/// A progress bar on stderr when it is a terminal; it ticks on its own so the clock never
/// stops while probes wait on their timeouts.
struct Bar(indicatif::ProgressBar);

impl Bar {
    fn new(enabled: bool) -> Option<Self> {
        if !enabled || !std::io::stderr().is_terminal() {
            return None;
        }
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} {msg} {pos}/{len} [{bar:40}] {elapsed}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        Some(Self(bar))
    }
}

/// Each phase has a bar of its own: the probes planned, then each retry round's probes, then
/// the receivers asked, so the bar never sits full while work goes on.
impl Progress for Bar {
    fn phase(&self, phase: Phase, steps: u64) {
        self.0.set_message(phase.to_string());
        self.0.set_length(steps);
        self.0.set_position(0);
    }
    fn done(&self, probes: u64) {
        self.0.inc(probes);
    }
}

/// Every agent's own responder, as the inventory gives it: each agent checks its own first.
fn responders(
    inv: &Inventory,
) -> std::collections::BTreeMap<prober::model::AgentRef, std::net::SocketAddr> {
    use prober::model::{AgentKind, AgentRef};
    let mut out = std::collections::BTreeMap::new();
    for n in &inv.nodes {
        for (agent, a) in [
            (AgentKind::Host, &n.agents.host),
            (AgentKind::Pod, &n.agents.pod),
        ] {
            if let Some((a, ip)) = a.as_ref().and_then(|a| Some((a, a.first_ip()?))) {
                let at = AgentRef {
                    node: n.name.clone(),
                    agent,
                };
                out.insert(at, std::net::SocketAddr::new(ip, a.port.get()));
            }
        }
    }
    out
}

/// Plans the matrix over `inv` (with `--sample`, the sample's turn `turn` of its rotation) and
/// runs it on `runtime`'s agents; stops with what was gathered when `stop` resolves (SIGINT,
/// SIGTERM). Writes `--save` whatever happened.
pub async fn run_matrix<R: Runtime + 'static>(
    inv: &Inventory,
    runtime: Arc<R>,
    args: &ProbeArgs,
    missing: Vec<AgentStatus>,
    turn: usize,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<Report, CliError> {
    let unknown: Vec<&str> = args
        .filter
        .nodes
        .iter()
        .filter(|n| !inv.nodes.iter().any(|m| &m.name == *n))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        let known: Vec<&str> = inv.nodes.iter().map(|n| n.name.as_str()).collect();
        return Err(CliError::Usage(format!(
            "--nodes: no node named {} in the inventory (its nodes: {})",
            unknown.join(", "),
            known.join(", ")
        )));
    }
    let f = &args.filter;
    let budget = args
        .memory_budget
        .map(|mib| u64::from(mib) << 20)
        .or_else(super::memory::available);
    let fixed = match args.sample {
        Some(SampleSize::Peers(k)) => Some(k),
        _ => None,
    };
    // A full matrix (no filter narrows it) must fit in the memory this process may use; an
    // automatic sample is sized to it.
    let narrowed = !(f.nodes.is_empty() && f.paths.is_empty() && f.skip_paths.is_empty());
    if args.sample != Some(SampleSize::Auto) && !narrowed {
        let verdict = super::memory::check(inv.nodes.len(), fixed, budget);
        if let Some(warning) = verdict.map_err(CliError::Usage)? {
            errln!("{}: warning: {warning}", super::program());
        }
    }
    let mut filter = args.filter.filter();
    let peers = match (args.sample, budget) {
        (None, _) | (Some(SampleSize::Auto), None) => None,
        (Some(SampleSize::Peers(k)), _) => Some(usize::from(k)),
        (Some(SampleSize::Auto), Some(budget)) => {
            prober::plan::sample::peers_within(inv, &filter, super::memory::probes_within(budget))
        }
    };
    filter.sample = peers.map(|k| prober::plan::sample::sample_turn(inv, k, turn));
    let sampled = filter.sample.as_ref().map(|s| s.describe(inv.nodes.len()));
    let planned = prober::plan::plan(inv, &filter);
    drop(filter);
    if planned.is_empty() {
        return Err(CliError::Usage(
            "nothing to probe: the inventory and filters leave no probe".into(),
        ));
    }
    let cfg = RunConfig {
        probe_timeout: args.timeout,
        concurrency: args.concurrency.map_or_else(
            || prober::run::width::default_width(inv.nodes.len() * 2),
            usize::from,
        ),
        responders: responders(inv),
        ..RunConfig::default()
    };
    let bar = Bar::new(!args.no_progress);
    let progress: &dyn Progress = match &bar {
        Some(b) => b,
        None => &(),
    };
    // This process's own scheduling delay: said when it could have made the run's waits late.
    probe_proto::stall::watch();
    let mut out = prober::run::run_owned(planned, runtime, &cfg, progress, stop).await;
    let longest = probe_proto::stall::longest();
    if longest >= std::time::Duration::from_millis(200) {
        errln!(
            "{}: warning: this coordinator was kept from running for up to {} ms at once during the run (a loaded machine): its own waits ran late; each agent measured its own delay, and no probe counts as failed for it",
            super::program(),
            longest.as_millis()
        );
    }
    // Agents that never started are part of the report: their paths are unknown, not failed.
    out.agents.extend(missing);
    if let Some(b) = bar {
        b.0.finish_and_clear();
    }
    let report = Report::new_sampled(out, inv, sampled);
    if let Some(path) = &args.save {
        report
            .save_json(path)
            .map_err(|e| CliError::save(path, e))?;
    }
    Ok(report)
}

/// The matrix through the Kubernetes API: discover, then (`deploy::with_agents`, as preflight
/// does) use the permanent agents when they are installed or else create this run's own, wait,
/// probe through pods/exec, and remove exactly what this run created (on success, failure, a
/// failed apply, SIGINT and SIGTERM).
async fn kube_matrix(args: &Args) -> Result<(Report, u64, Option<Changes>), CliError> {
    // Before anything is created: a Ctrl-C from here on is caught and cleans up.
    let interrupts = signals::Interrupts::install();
    let command = super::command("matrix");
    let found = args.kube.discover(&command, &args.agents.namespace).await?;
    let (client, mut inv) = (found.client, found.inventory);
    let session = args.agents.session("2h", signals::GRACE);
    let previous = super::remember::recall(args.memory.remember, &client, &session.namespace).await;
    let turn = super::remember::next_turn(previous.as_ref());
    let progress = |ready: usize, wanted: usize| {
        if std::io::stderr().is_terminal() {
            eprint!("\ragents ready: {ready}/{wanted}   ");
        }
    };
    let outcome = deploy::with_agents(
        &client,
        &session,
        &mut inv,
        &mut |n| errln!("{command}: {n}"),
        &progress,
        || interrupts.wait(),
        async |inv: &Inventory, agents: deploy::session::Agents| {
            let runtime = Arc::new(KubeExec::new(
                client.clone(),
                &agents.namespace,
                agents.ready,
            ));
            // The session's own interrupts: a signal that came before the probes started (the
            // wait just ended) is not lost to handlers installed later.
            let stop = interrupts.wait();
            run_matrix(inv, runtime, &args.probe, agents.missing, turn, stop).await
        },
    )
    .await;
    let mut report = outcome?;
    // A signal after the probes (while the agents were being removed): the run was cut short
    // all the same, and a script must know it (130), not read a clean exit.
    if interrupts.fired() && !report.summary.interrupted {
        report.mark_interrupted();
        if let Some(path) = &args.probe.save {
            report
                .save_json(path)
                .map_err(|e| CliError::save(path, e))?;
        }
    }
    let finished = super::export::now();
    let changes =
        super::remember::remember(previous, &client, &session.namespace, &report, finished).await;
    Ok((report, finished, changes))
}
