//! `prober lab`: build, run, list and remove network-namespace labs.

use super::out::{errln, out, outln};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use prober::lab::{self, Lab, Options, check, scenario::Scenario};
use prober::report::{EXIT_FAILURES, EXIT_OK};
use prober::runtime::local::Local;

use super::CliError;
use super::args::{OutputArgs, ProbeArgs, sibling};
use super::{matrix, signals};

#[derive(clap::Subcommand)]
pub enum Command {
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

#[derive(clap::Args, Clone)]
pub struct CommonArgs {
    /// Where labs keep inventories, certificates, host roots and logs.
    #[arg(long, env = "PROBER_LAB_STATE", default_value = lab::DEFAULT_STATE_ROOT)]
    pub state_dir: PathBuf,
}

#[derive(clap::Args)]
pub struct BuildArgs {
    /// Scenario file (YAML); without it, a healthy cluster.
    #[arg(long, env = "PROBER_LAB_SCENARIO")]
    pub scenario: Option<PathBuf>,
    /// Number of nodes (overrides the scenario's).
    #[arg(long, env = "PROBER_LAB_NODES")]
    pub nodes: Option<usize>,
    /// Lab name (1-10 lowercase letters/digits); namespaces are plab-NAME-*. Random by default.
    #[arg(long, env = "PROBER_LAB_NAME")]
    pub name: Option<String>,
    /// The agent binary to run in every node and pod (default: `probe-pod` next to this program).
    #[arg(long, env = "PROBER_AGENT_BIN")]
    pub agent_bin: Option<PathBuf>,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(clap::Args)]
pub struct UpArgs {
    #[command(flatten)]
    pub build: BuildArgs,
}

#[derive(clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub build: BuildArgs,
    #[command(flatten)]
    pub out: OutputArgs,
    /// Also write the matrix's JSON report to this file.
    #[arg(long)]
    pub save: Option<PathBuf>,
    /// Leave the lab running afterwards (take it down with `prober lab down NAME`).
    #[arg(long)]
    pub keep: bool,
}

#[derive(clap::Args)]
pub struct DownArgs {
    /// Lab names (as printed by `lab up` and `lab status`).
    pub names: Vec<String>,
    /// Remove every lab on this machine, including leftovers of crashed runs and other
    /// people's labs: it first lists each lab it removes.
    #[arg(long)]
    pub all: bool,
    /// Only list the labs that would be removed; remove nothing.
    #[arg(long, env = "PROBER_DRY_RUN")]
    pub dry_run: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(clap::Args)]
pub struct ApiserverArgs {
    #[arg(long)]
    pub listen: std::net::SocketAddr,
    #[arg(long)]
    pub cert: PathBuf,
    #[arg(long)]
    pub key: PathBuf,
    #[arg(long)]
    pub tokens: PathBuf,
    /// Seconds its `Date` header runs ahead of this host's clock (negative: behind).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub clock_skew: i64,
}

pub async fn run(cmd: Command) -> Result<u8, CliError> {
    match cmd {
        Command::Up(a) => up(&a),
        Command::Run(a) => run_scenario(&a).await,
        Command::Down(a) => down(&a),
        Command::Status(a) => status(&a),
        Command::Apiserver(a) => {
            lab::apiserver::serve(a.listen, &a.cert, &a.key, &a.tokens, a.clock_skew)
                .await
                .map(|()| EXIT_OK)
                .map_err(CliError::from)
        }
    }
}

fn load_scenario(b: &BuildArgs) -> Result<Scenario, CliError> {
    let mut s = match &b.scenario {
        Some(path) => Scenario::load(path)?,
        None => Scenario::default(),
    };
    if let Some(n) = b.nodes {
        s.nodes = n;
        s.validate()
            .map_err(|e| CliError::flag(format!("--nodes {n}"), e))?;
    }
    Ok(s)
}

fn build(b: &BuildArgs) -> Result<(Scenario, Lab), CliError> {
    let s = load_scenario(b)?;
    let opts = Options {
        name: b.name.clone(),
        state_root: b.common.state_dir.clone(),
        agent_bin: b.agent_bin.clone().unwrap_or_else(|| sibling("probe-pod")),
        prober_bin: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("prober")),
        verbose: true,
    };
    lab::preflight(&opts)?;
    // The name must be known before building so the signal handler can clean up after it.
    let name = opts.name.clone().unwrap_or_else(lab::unique_name);
    let opts = Options {
        name: Some(name.clone()),
        ..opts
    };
    let prefix = lab::prefix_of(&name);
    let state = opts.state_root.join(prefix.trim_end_matches('-'));
    signals::building(prefix, state);
    let built = Lab::up(&s, &opts)?;
    Ok((s, built))
}

fn name_of(layout: &lab::build::Layout) -> String {
    layout
        .prefix
        .trim_start_matches(lab::NS_PREFIX)
        .trim_end_matches('-')
        .to_string()
}

fn up(args: &UpArgs) -> Result<u8, CliError> {
    let (s, lab) = build(&args.build)?;
    let inventory = lab.inventory_path.clone();
    let layout = lab.detach();
    let name = name_of(&layout);
    let faults = s.faults.len();
    outln!(
        "lab {name} is up: {} nodes ({}), {faults} fault{}",
        s.nodes,
        s.name,
        if faults == 1 { "" } else { "s" }
    )?;
    outln!("inventory: {}", inventory.display())?;
    for n in &layout.nodes {
        outln!(
            "  {:<4} {:<15} pod {:<13} ip netns exec {}",
            n.name,
            n.address.to_string(),
            n.pods[0].address.to_string(),
            n.ns
        )?;
    }
    outln!(
        "probe it with: prober matrix --inventory {}",
        inventory.display()
    )?;
    if let Some(c) = super::preflight::lab_candidate(&s, &layout) {
        for line in candidate_lines(&c, &inventory) {
            outln!("{line}")?;
        }
    }
    outln!("take it down with: prober lab down {name}")?;
    Ok(EXIT_OK)
}

/// What a preflight scenario's `lab up` says of its candidate: its name, address, exec prefix and
/// host root, and the `prober preflight` line that checks its join, ready to paste.
fn candidate_lines(c: &prober::plan::preflight::Candidate, inventory: &Path) -> Vec<String> {
    let exec = c.exec.join(" ");
    let root = c.host_root.as_deref().unwrap_or(Path::new("/"));
    let control_plane = c.role == prober::plan::preflight::Role::ControlPlane;
    let mut check = format!(
        "{} --inventory {} --candidate {} --candidate-address {} --candidate-exec {} --candidate-host-root {}",
        super::command("preflight"),
        quoted(&inventory.display().to_string()),
        c.name,
        c.address,
        quoted(&exec),
        quoted(&root.display().to_string()),
    );
    if control_plane {
        check.push_str(" --role control-plane");
    }
    vec![
        format!(
            "candidate: {} {} ({}), not joined",
            c.name,
            c.address,
            if control_plane {
                "control-plane"
            } else {
                "worker"
            }
        ),
        format!("  exec prefix: {exec}"),
        format!("  host root:   {}", root.display()),
        format!("check its join with: {check}"),
    ]
}

/// A word for a shell: as it is when plain, else in single quotes.
fn quoted(word: &str) -> String {
    let plain = |ch: char| ch.is_ascii_alphanumeric() || "/._-:=@,+".contains(ch);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

async fn run_scenario(args: &RunArgs) -> Result<u8, CliError> {
    let (s, lab) = build(&args.build)?;
    let width = args.out.width();
    // Everything `lab run` prints fits the terminal as the table does: wrapped, never cut.
    let fit = |text: &str| -> String {
        text.lines()
            .map(|l| prober::report::wrap(l, width, 7) + "\n")
            .collect()
    };
    // With a machine format (-o json, junit, prometheus, html) stdout carries the report alone,
    // for `| jq`, promtool or a browser; the scenario and its checks go to stderr.
    let report_only = !matches!(args.out.output, super::args::Output::Table);
    let say = |text: &str| -> Result<(), CliError> {
        if report_only {
            eprint!("{text}");
            Ok(())
        } else {
            out!("{text}")
        }
    };
    // The description is the file's own text: shown, never obeyed (a clear-screen, a title,
    // SGR 8 hiding everything after it).
    say(&fit(&prober::report::safe::message(&format!(
        "scenario {}: {}",
        s.name,
        s.description.trim()
    ))))?;
    let inv = lab::build::inventory(&s, &lab.layout);
    let agent_bin = lab.agent_bin.display().to_string();
    let mut probe = ProbeArgs::with_agent(agent_bin.clone(), args.save.clone());
    probe.filter.paths.clone_from(&s.paths);
    let runtime = Arc::new(Local::new(&inv, agent_bin));
    // A scenario with a candidate checks a join: preflight instead of the matrix.
    let join = super::preflight::lab_candidate(&s, &lab.layout);
    // A signal now stops the matrix, whose report (and --save) is kept; the lab is torn down
    // below as on any other exit.
    signals::hand_over();
    let matrix = if let Some(c) = &join {
        super::preflight::run_preflight(&inv, c, &probe).await
    } else {
        let stop = signals::interrupted();
        matrix::run_matrix(&inv, runtime, &probe, Vec::new(), 0, stop).await
    };
    match &matrix {
        Ok(r) => out!("{}", args.out.render(r))?,
        Err(e) => errln!("prober lab run: matrix: {e}"),
    }
    if signals::stopped() {
        // Interrupted: the partial report is out; no expectation can be judged on it.
        if args.keep {
            say(&format!(
                "lab kept: prober lab down {}\n",
                name_of(&lab.detach())
            ))?;
        } else {
            tear_down(lab);
        }
        return Ok(prober::report::EXIT_INTERRUPTED);
    }
    say("\nexpectations:\n")?;
    errln!("checking the scenario's reachability expectations...");
    let checked = check::run(&lab).await;
    let (report, reach_ok) = check::render(&checked);
    say(&fit(&report))?;
    // A join also checks its exit code, and that nothing unexpected was found.
    let expected =
        s.expect.findings.len() + s.expect.not_findings.len() + usize::from(join.is_some());
    let (found_text, found_failed) = match &matrix {
        // A join is checked strictly: each fault named once, nothing else called broken.
        Ok(r) if join.is_some() => {
            check::join_findings(&s.expanded_expect(), &r.findings, r.summary.exit_code)
        }
        Ok(r) => check::findings(&s.expanded_expect(), &r.findings),
        // Without a matrix no finding expectation can hold.
        Err(_) => ("FAIL the matrix did not run\n".to_string(), expected.max(1)),
    };
    let found_ok = found_failed == 0;
    say(&fit(&found_text))?;
    let total = checked.len() + expected.max(found_failed);
    let failed = checked.iter().filter(|c| !c.pass).count() + found_failed;
    say(&format!(
        "{} passed, {failed} failed\n",
        total.saturating_sub(failed)
    ))?;
    if args.keep {
        say(&format!(
            "lab kept: prober lab down {}\n",
            name_of(&lab.detach())
        ))?;
    } else {
        tear_down(lab);
    }
    Ok(if reach_ok && found_ok {
        EXIT_OK
    } else {
        EXIT_FAILURES
    })
}

/// Takes the lab down, saying so: teardown takes seconds.
fn tear_down(lab: Lab) {
    let name = name_of(&lab.layout);
    errln!("tearing down lab {name}...");
    match lab.down() {
        Ok(_) => errln!("lab {name} is down"),
        Err(e) => errln!("prober lab: teardown: {e}"),
    }
}

fn down(args: &DownArgs) -> Result<u8, CliError> {
    if args.names.is_empty() && !args.all {
        return Err(CliError::Usage(
            "name the labs to remove, or pass --all (see `prober lab status`)".into(),
        ));
    }
    let labs = lab::list(&args.common.state_dir);
    let unknown: Vec<&String> = args
        .names
        .iter()
        .filter(|n| !labs.iter().any(|l| &l.name == *n))
        .collect();
    let chosen: Vec<&lab::LabSummary> = labs
        .iter()
        .filter(|l| args.all || args.names.contains(&l.name))
        .collect();
    if args.all || args.dry_run {
        // Said before anything is removed: --all reaches every lab on the machine.
        let verb = if args.dry_run {
            "would remove"
        } else {
            "removing"
        };
        outln!(
            "{verb} {} lab{}:",
            chosen.len(),
            if chosen.len() == 1 { "" } else { "s" }
        )?;
        for l in &chosen {
            outln!(
                "  {} ({} nodes, {} namespaces {}*)",
                l.name,
                l.nodes,
                l.namespaces,
                lab::prefix_of(&l.name)
            )?;
        }
    }
    let mut failed = Vec::new();
    for l in chosen.into_iter().filter(|_| !args.dry_run) {
        let state = l.state_dir.clone().unwrap_or_else(|| {
            args.common
                .state_dir
                .join(lab::prefix_of(&l.name).trim_end_matches('-'))
        });
        match lab::teardown(&lab::prefix_of(&l.name), &state) {
            Ok(n) => outln!("removed lab {} ({n} namespaces)", l.name)?,
            Err(e) => failed.push(format!("{}: {e}", l.name)),
        }
    }
    if !unknown.is_empty() {
        let known: Vec<&str> = labs.iter().map(|l| l.name.as_str()).collect();
        let unknown: Vec<&str> = unknown.iter().map(|n| n.as_str()).collect();
        failed.push(format!(
            "no lab named {} (labs here: {})",
            unknown.join(", "),
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        ));
    }
    if failed.is_empty() {
        Ok(EXIT_OK)
    } else {
        Err(CliError::Environment(failed.join("; ")))
    }
}

fn status(args: &CommonArgs) -> Result<u8, CliError> {
    let labs = lab::list(&args.state_dir);
    if labs.is_empty() {
        outln!("no labs")?;
    }
    for l in labs {
        let state = l.state_dir.as_deref().map_or_else(
            || "no state dir".to_string(),
            |p| Path::new(p).display().to_string(),
        );
        outln!(
            "{:<12} {:>3} nodes {:>4} namespaces  {state}",
            l.name,
            l.nodes,
            l.namespaces
        )?;
    }
    Ok(EXIT_OK)
}
