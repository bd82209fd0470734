//! `prober`: the coordinator. For now it only knows the agent's wire contract; the lab, the matrix
//! and the diagnosis land in their own changes.

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "prober",
    version,
    about = "Tells Kubernetes operators which network paths of their cluster fail, and why."
)]
struct Cli {}

fn main() {
    let _ = Cli::parse();
    // The coordinator depends on the agent's wire types only (no raw-socket code).
    let _ = probe_pod::proto::Outcome::ALL;
    eprintln!("prober: nothing to do yet; see `probe-pod --help` for the agent");
}
