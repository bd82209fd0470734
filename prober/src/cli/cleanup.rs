//! `prober cleanup`: remove what crashed runs left behind (found by their run label, and past
//! their expiry, so a run still going elsewhere keeps its agents); a permanent install from
//! deploy/ carries none and is never touched.

use super::out::outln;
use prober::runtime::kube::ConnectError;
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
    let (client, _, _) = prober::runtime::kube::client(
        args.kube.kubeconfig.as_deref(),
        args.kube.context.as_deref(),
    )
    .await
    .map_err(no_cluster)?;
    let (deleted, kept) =
        prober::runtime::kube::deploy::cleanup_leftovers(&client, &args.namespace, args.all)
            .await?;
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

/// Without a kubeconfig there is nothing to clean: say how to name the cluster, and only with
/// the flags `cleanup` takes (the generic message offers `matrix`'s --inventory).
fn no_cluster(e: ConnectError) -> CliError {
    match e {
        ConnectError::NoKubeconfig {
            source_name,
            message,
        } => CliError::Environment(format!(
            "no kubeconfig here ({source_name}): pass --kubeconfig FILE (or set KUBECONFIG) to \
             name the cluster whose leftover agents to remove [{message}]"
        )),
        e => e.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn without_a_kubeconfig_it_suggests_only_flags_cleanup_takes() {
        let e = no_cluster(ConnectError::NoKubeconfig {
            source_name: "~/.kube/config".into(),
            message: "not found".into(),
        })
        .to_string();
        assert!(e.contains("--kubeconfig FILE"), "{e}");
        assert!(!e.contains("--inventory"), "{e}");
        let takes: Vec<String> = crate::cli::Cli::command()
            .find_subcommand("cleanup")
            .map(|c| {
                c.get_arguments()
                    .filter_map(|a| a.get_long())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default();
        for flag in e.split_whitespace().filter(|w| w.starts_with("--")) {
            assert!(
                takes.iter().any(|t| flag == format!("--{t}")),
                "{flag} in {e}"
            );
        }
    }
}
