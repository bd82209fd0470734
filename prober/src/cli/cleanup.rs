//! `prober cleanup`: remove what crashed runs left behind (found by their run label, and past
//! their expiry, so a run still going elsewhere keeps its agents); a permanent install from
//! deploy/ carries none and is never touched.

use super::out::outln;
use prober::runtime::kube::manifests::DEFAULT_NAMESPACE;

use super::CliError;
use super::args::KubeArgs;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub kube: KubeArgs,
    /// Namespace of the agents.
    #[arg(long, short = 'n', env = "PROBER_NAMESPACE", default_value = DEFAULT_NAMESPACE)]
    pub namespace: String,
    /// Also remove runs that have not expired yet (their `prober.io/expires`): a run still
    /// going loses its agents. Without it, only expired runs' objects are removed.
    #[arg(long, env = "PROBER_CLEANUP_ALL")]
    pub all: bool,
}

pub async fn run(args: &Args) -> Result<u8, CliError> {
    let env = |e: &dyn std::fmt::Display| CliError::Environment(e.to_string());
    let (client, _, _) = prober::runtime::kube::client(
        args.kube.kubeconfig.as_deref(),
        args.kube.context.as_deref(),
    )
    .await
    .map_err(|e| env(&e))?;
    let (deleted, kept) =
        prober::runtime::kube::deploy::cleanup_leftovers(&client, &args.namespace, args.all)
            .await
            .map_err(|e| env(&e))?;
    if deleted.is_empty() && kept.is_empty() {
        outln!("nothing left behind by a run in {}", args.namespace)?;
    }
    for d in deleted {
        outln!("deleted {d} ({})", args.namespace)?;
    }
    for run in kept {
        outln!(
            "kept run {run} in {}: it has not expired and may still be going (--all removes it)",
            args.namespace
        )?;
    }
    Ok(prober::report::EXIT_OK)
}
