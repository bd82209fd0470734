//! The command line: one module per command, shared argument groups, one error type whose
//! variants map to the exit codes. `main.rs` only parses and dispatches.

pub mod args;
pub mod cleanup;
pub mod diff;
pub mod discover;
mod error;
pub mod export;
pub mod lab;
pub mod manifests;
pub mod matrix;
pub mod memory;
pub mod out;
pub mod preflight;
pub mod remember;
pub mod report;
pub mod signals;

use std::sync::OnceLock;

use clap::{Parser, Subcommand};

pub use error::{CliError, with_causes};

#[derive(Parser)]
#[command(
    name = "prober",
    version,
    about = "Tells Kubernetes operators which network paths of their cluster fail, and why.",
    long_about = "Tells Kubernetes operators which network paths of their cluster fail, and why: \
                  a firewall gap (a port blocked between two hosts, with the rule that would open \
                  it), a circular bootstrap dependency, or something else, named precisely.\n\n\
                  No cluster at hand? `prober lab run --scenario tests/scenarios/flannel-8472.yaml` \
                  builds one in network namespaces (root) and diagnoses it."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Probe the full path matrix and print the diagnosis.
    /// Exit 0: no failures; 1: failures; 2: usage or environment error; 3: agents missing;
    /// 130: interrupted.
    Matrix(Box<matrix::Args>),
    /// Before a node joins: every port it will need, both directions, with stand-ins on it.
    /// Same exit codes as `matrix`.
    Preflight(Box<preflight::Args>),
    /// Re-render a saved JSON report (`matrix -o json` or `--save`) in any output format.
    /// Exit: the saved run's own code (0, 1, 3 or 130), computed again from its results and
    /// findings, not taken from its `summary.exitCode`; 2 when the file is not a readable
    /// report, or when `--pushgateway` fails on an otherwise clean report.
    Report(report::Args),
    /// Compare two saved JSON reports: new, resolved and persisting findings.
    /// Exit 1 when a new finding is an error, else 0.
    Diff(diff::Args),
    /// Read the cluster through the Kubernetes API (read-only) and print what the prober believes
    /// about it, as an inventory you can inspect, edit and pass to `matrix --inventory`.
    Discover(discover::Args),
    /// Remove the agents left behind by crashed runs (found by label).
    Cleanup(cleanup::Args),
    /// Print the objects the prober applies to run its agents (namespace, service account, the
    /// two agent `DaemonSets`); `--rbac`: the RBAC its user needs; `--scheduled`: the `CronJob`
    /// mode. `deploy/base` is the agents and the RBAC together.
    Manifests(manifests::Args),
    /// A multi-node cluster emulator in network namespaces (Linux, root): real kernel VXLAN,
    /// nftables kube-proxy and firewalls, a TLS API server and a DNS server, with injectable faults.
    #[command(subcommand)]
    Lab(lab::Command),
}

/// Runs the command; returns its exit code.
pub async fn dispatch(cli: Cli) -> Result<u8, CliError> {
    let _ = RUNNING.set(name(&cli));
    match cli.command {
        Command::Matrix(a) => matrix::run(&a).await,
        Command::Preflight(a) => preflight::run(&a).await,
        Command::Report(a) => report::run(&a).await,
        Command::Diff(a) => diff::run(&a),
        Command::Discover(a) => discover::run(&a).await,
        Command::Manifests(a) => manifests::run(&a),
        Command::Cleanup(a) => cleanup::run(&a).await,
        Command::Lab(c) => lab::run(c).await,
    }
}

/// The command being run, as the user typed it (set by [`dispatch`]).
static RUNNING: OnceLock<String> = OnceLock::new();

/// The command being run as the user typed it (`prober matrix`, `kubectl probe lab run`), for
/// messages printed outside its error path (a signal's); the program alone before dispatch.
#[must_use]
pub fn running() -> &'static str {
    RUNNING.get().map_or_else(program, String::as_str)
}

/// How the user invoked the program: `prober`, or `kubectl probe` for the kubectl plugin.
static PROGRAM: OnceLock<&'static str> = OnceLock::new();

/// Records how the program was invoked (once, before dispatch).
pub fn invoked_as(program: &'static str) {
    let _ = PROGRAM.set(program);
}

/// The program as the user typed it: `prober`, or `kubectl probe`.
#[must_use]
pub fn program() -> &'static str {
    PROGRAM.get().copied().unwrap_or("prober")
}

/// A command as the user typed it, for its messages (`prober matrix`, `kubectl probe matrix`).
#[must_use]
pub fn command(name: &str) -> String {
    format!("{} {name}", program())
}

/// The command's name for error messages (`prober matrix`, or `kubectl probe matrix`).
#[must_use]
pub fn name(cli: &Cli) -> String {
    command(match &cli.command {
        Command::Matrix(_) => "matrix",
        Command::Preflight(_) => "preflight",
        Command::Report(_) => "report",
        Command::Diff(_) => "diff",
        Command::Discover(_) => "discover",
        Command::Manifests(_) => "manifests",
        Command::Cleanup(_) => "cleanup",
        Command::Lab(_) => "lab",
    })
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    #[test]
    fn reports_help_says_its_exit_code() {
        let mut cli = super::Cli::command();
        let report = cli.find_subcommand_mut("report").unwrap();
        let help = report.render_long_help().to_string();
        assert!(help.contains("Exit: the saved run's own code"), "{help}");
        assert!(help.contains("2 when the file"), "{help}");
    }
}
