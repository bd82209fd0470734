//! `prober cleanup`: remove agents left behind by crashed runs.

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
}

pub async fn run(args: &Args) -> Result<u8, CliError> {
    let env = |e: &dyn std::fmt::Display| CliError::Environment(e.to_string());
    let (client, _, _) = prober::runtime::kube::client(
        args.kube.kubeconfig.as_deref(),
        args.kube.context.as_deref(),
    )
    .await
    .map_err(|e| env(&e))?;
    let n = prober::runtime::kube::deploy::cleanup_leftovers(&client, &args.namespace)
        .await
        .map_err(|e| env(&e))?;
    println!("removed {n} agent DaemonSet(s) from {}", args.namespace);
    Ok(prober::report::EXIT_OK)
}
