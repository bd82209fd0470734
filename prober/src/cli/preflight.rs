//! `prober preflight`: before a node joins, every port it will need, both directions. Stand-ins
//! on the candidate take the ports it will serve; the existing nodes' host agents and the
//! candidate probe each other; the report leads with a checklist.

use super::out::{errln, out};
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::Arc;

use prober::diagnose::preflight::PortConflict;
use prober::diagnose::{Severity, preflight_candidate};
use prober::inventory::Inventory;
use prober::plan::preflight::{Candidate, Role, preflight, with_candidate};
use prober::report::{EXIT_FAILURES, EXIT_INTERRUPTED, Preflight, Report};
use prober::run::preflight::{CLEANUP_DEADLINE, RUN_TTL, through_api};
use prober::run::{RunConfig, RunOutput};
use prober::runtime::local::Local;
use prober::runtime::standins::{self, STANDIN_AGENT_PORT};

/// The stand-in agent's port, as the plan types it.
const STANDIN_AGENT: probe_proto::Port =
    probe_proto::Port::new(STANDIN_AGENT_PORT).expect("non-zero");

use super::CliError;
use super::args::{AgentArgs, KubeArgs, OutputArgs, ProbeArgs};
use super::signals;

#[derive(Clone, Copy, clap::ValueEnum, PartialEq, Eq)]
pub enum RoleArg {
    Worker,
    ControlPlane,
}

#[derive(clap::Args)]
pub struct Args {
    /// Inventory of the existing cluster (as `matrix` takes it). Without it, the cluster is
    /// discovered through the Kubernetes API and its nodes probed by their host agents through
    /// `pods/exec`, as `matrix` does; the candidate is reached through --candidate-exec only.
    #[arg(long, env = "PROBER_INVENTORY")]
    pub inventory: Option<PathBuf>,
    /// The joining node's name (default: this machine's hostname).
    #[arg(long)]
    pub candidate: Option<String>,
    /// The address the joining node will use (default: the source address the kernel picks
    /// toward the first API endpoint, with an empty exec prefix only).
    #[arg(long)]
    pub candidate_address: Option<Ipv4Addr>,
    /// A command prefix that runs a program on the joining node, split on whitespace
    /// (`ip netns exec NS`, `ssh root@10.0.0.7`); empty: this machine.
    #[arg(long, default_value = "")]
    pub candidate_exec: String,
    /// The joining node's `/` as the prefix sees it, for its node checks (resolv.conf,
    /// kubelet.conf, CNI kubeconfigs). The agent runs through the prefix, so `/` is the
    /// candidate's own root with or without --candidate-exec.
    #[arg(long, default_value = "/")]
    pub candidate_host_root: PathBuf,
    #[arg(long, value_enum, default_value_t = RoleArg::Worker)]
    pub role: RoleArg,
    #[command(flatten)]
    pub kube: KubeArgs,
    #[command(flatten)]
    pub agents: AgentArgs,
    #[command(flatten)]
    pub probe: ProbeArgs,
    #[command(flatten)]
    pub out: OutputArgs,
}

pub async fn run(args: &Args) -> Result<u8, CliError> {
    refuse_filters(&args.probe)?;
    let report = match &args.inventory {
        Some(path) => {
            let inv = Inventory::load(path)?;
            let candidate = candidate(args, &inv)?;
            run_preflight(&inv, &candidate, &args.probe).await?
        }
        None => kube_preflight(args).await?,
    };
    out!("{}", args.out.render(&report))?;
    Ok(report.summary.exit_code)
}

/// A join needs every required port both ways: a filtered preflight would pass a join that
/// fails, so the matrix's filters are refused rather than ignored.
fn refuse_filters(probe: &ProbeArgs) -> Result<(), CliError> {
    let f = &probe.filter;
    let given: Vec<&str> = [
        (!f.paths.is_empty(), "--paths"),
        (!f.skip_paths.is_empty(), "--skip-paths"),
        (!f.nodes.is_empty(), "--nodes"),
    ]
    .into_iter()
    .filter_map(|(set, flag)| set.then_some(flag))
    .collect();
    if given.is_empty() {
        return Ok(());
    }
    Err(CliError::Usage(format!(
        "{} cannot narrow a preflight: a join needs every required port to every node, both ways, so it always probes them all (use `prober matrix` to probe a subset)",
        given.join(", ")
    )))
}

/// The candidate the flags describe, joining the cluster `inv`.
fn candidate(args: &Args, inv: &Inventory) -> Result<Candidate, CliError> {
    let usage = |s: String| CliError::Usage(s);
    let exec: Vec<String> = args
        .candidate_exec
        .split_whitespace()
        .map(String::from)
        .collect();
    let name = match &args.candidate {
        Some(n) => n.clone(),
        // A kernel-made file of at most 64 bytes, never a FIFO or a user path.
        #[allow(clippy::disallowed_methods)]
        None => std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .map_err(|source| CliError::Local {
                what: "--candidate: cannot read the hostname".into(),
                source,
            })?,
    };
    if inv.nodes.iter().any(|n| n.name == name) {
        return Err(usage(format!(
            "--candidate: {name} is already a node of the cluster"
        )));
    }
    let address = match (args.candidate_address, exec.is_empty()) {
        (Some(a), _) => a,
        (None, true) => source_address(inv)?,
        (None, false) => {
            return Err(usage(
                "--candidate-address is required with --candidate-exec".into(),
            ));
        }
    };
    let role = match args.role {
        RoleArg::Worker => Role::Worker,
        RoleArg::ControlPlane => Role::ControlPlane,
    };
    Ok(Candidate {
        name,
        address,
        exec,
        role,
        agent_port: STANDIN_AGENT,
        host_root: Some(args.candidate_host_root.clone()),
    })
}

/// Preflight against a cluster reached through the Kubernetes API: discover it, start the
/// stand-ins on the candidate, probe with the existing nodes' host agents (the permanent ones,
/// or this run's own, removed afterwards), stop the stand-ins.
async fn kube_preflight(args: &Args) -> Result<Report, CliError> {
    let command = super::command("preflight");
    let found = args.kube.discover(&command, &args.agents.namespace).await?;
    let candidate = candidate(args, &found.inventory)?;
    let agent_bin = args.probe.agent_bin(&found.inventory);
    let (standins, conflicts) = standins::start(&found.inventory, &candidate, &agent_bin).await?;
    let on_candidate = Local::new(&with_candidate(&found.inventory, &candidate), agent_bin);
    let session = args.agents.session(RUN_TTL, CLEANUP_DEADLINE);
    let ran = through_api(
        &found.client,
        found.inventory,
        &candidate,
        on_candidate,
        &session,
        &run_config(&args.probe),
        signals::interrupted,
    )
    .await;
    standins.stop().await;
    let ran = ran?;
    for n in &ran.notes {
        errln!("{command}: {n}");
    }
    finish(ran.out, &ran.inventory, &candidate, &conflicts, &args.probe)
}

/// The candidate of a lab scenario: its namespace through `ip netns exec`, as an operator would.
#[must_use]
pub fn lab_candidate(
    s: &prober::lab::scenario::Scenario,
    l: &prober::lab::build::Layout,
) -> Option<Candidate> {
    let (spec, c) = (s.candidate.as_ref()?, l.candidate.as_ref()?);
    Some(Candidate {
        name: c.name.clone(),
        address: c.address,
        exec: ["ip", "netns", "exec", c.ns.as_str()]
            .map(String::from)
            .to_vec(),
        role: if spec.role == "control-plane" {
            Role::ControlPlane
        } else {
            Role::Worker
        },
        agent_port: STANDIN_AGENT,
        // The lab writes the candidate's resolv.conf there, as a machine of the site has one.
        host_root: Some(c.root.clone()),
    })
}

/// Starts the stand-ins, runs every preflight probe, stops the stand-ins, diagnoses (port
/// conflicts included). Writes `--save` whatever the outcome.
pub async fn run_preflight(
    inv: &Inventory,
    candidate: &Candidate,
    probe: &ProbeArgs,
) -> Result<Report, CliError> {
    let agent_bin = probe.agent_bin(inv);
    let (standins, conflicts) = standins::start(inv, candidate, &agent_bin).await?;
    let full = with_candidate(inv, candidate);
    let planned = preflight(inv, candidate);
    let runtime = Arc::new(Local::new(&full, agent_bin));
    let out = prober::run::run_owned(
        planned,
        runtime,
        &run_config(probe),
        &(),
        signals::interrupted(),
    )
    .await;
    standins.stop().await;
    finish(out, &full, candidate, &conflicts, probe)
}

fn run_config(probe: &ProbeArgs) -> RunConfig {
    RunConfig {
        probe_timeout: probe.timeout,
        concurrency: probe.concurrency.map_or_else(
            || prober::run::width::default_width(usize::MAX),
            usize::from,
        ),
        ..RunConfig::default()
    }
}

/// The report: the diagnosis of what ran, the port conflicts first. Writes `--save`.
fn finish(
    out: RunOutput,
    full: &Inventory,
    candidate: &Candidate,
    conflicts: &[PortConflict],
    probe: &ProbeArgs,
) -> Result<Report, CliError> {
    let mut report = Report::new(out, full);
    let found = preflight_candidate(
        &candidate.name,
        full,
        &report.results,
        &report.findings,
        conflicts,
    );
    if found.iter().any(|f| f.severity == Severity::Error)
        && report.summary.exit_code != EXIT_INTERRUPTED
    {
        report.summary.exit_code = EXIT_FAILURES;
    }
    report.findings.splice(0..0, found);
    report.preflight = Some(Preflight {
        candidate: candidate.name.clone(),
        role: match candidate.role {
            Role::Worker => "worker".into(),
            Role::ControlPlane => "control-plane".into(),
        },
    });
    if let Some(path) = &probe.save {
        report
            .save_json(path)
            .map_err(|e| CliError::save(path, e))?;
    }
    Ok(report)
}

/// The source address the kernel picks toward the first API endpoint (no packet is sent).
fn source_address(inv: &Inventory) -> Result<Ipv4Addr, CliError> {
    let flag = "--candidate-address";
    let local = |what: String| {
        move |source| CliError::Local {
            what: format!("{flag}: {what}"),
            source,
        }
    };
    let ep = inv.cluster.api.endpoints.first().ok_or_else(|| {
        CliError::Environment(format!(
            "{flag}: the inventory names no API endpoint to route toward"
        ))
    })?;
    let sock =
        std::net::UdpSocket::bind("0.0.0.0:0").map_err(local("cannot open a UDP socket".into()))?;
    sock.connect(ep)
        .map_err(local(format!("no route to {ep}")))?;
    match sock
        .local_addr()
        .map_err(local("no source address".into()))?
        .ip()
    {
        IpAddr::V4(a) => Ok(a),
        IpAddr::V6(a) => Err(CliError::Environment(format!("{flag}: {a} is not IPv4"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_and_node_filters_are_refused_by_name() {
        let mut probe = ProbeArgs::with_agent("probe-pod".into(), None);
        assert!(refuse_filters(&probe).is_ok());
        probe.filter.nodes = vec!["n1".into()];
        probe.filter.paths = vec![prober::model::PathClass::Overlay];
        let e = refuse_filters(&probe).unwrap_err().to_string();
        assert!(e.contains("--paths, --nodes cannot narrow"), "{e}");
    }
}
