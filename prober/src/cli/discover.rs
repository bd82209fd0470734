//! `prober discover`: what the prober believes about a cluster, as an inventory.

use super::out::{errln, out, outln};
use clap::ValueEnum;

use super::CliError;
use super::args::KubeArgs;

#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    Yaml,
    Json,
}

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub kube: KubeArgs,
    /// Output format.
    #[arg(short, long, env = "PROBER_OUTPUT", value_enum, default_value_t = Format::Yaml)]
    pub output: Format,
}

/// Says on stderr what discovery was not allowed to read (the inventory is partial there) and
/// what it had to guess.
pub fn warn_discovered(command: &str, found: &prober::runtime::kube::Discovered) {
    for what in &found.forbidden {
        errln!(
            "{command}: warning: not allowed to {what}; the inventory leaves it out (grant it as deploy/base/rbac.yaml describes)"
        );
    }
    for what in &found.warnings {
        errln!("{command}: warning: {what}");
    }
}

pub async fn run(args: &Args) -> Result<u8, CliError> {
    let found = args
        .kube
        .discover(
            &super::command("discover"),
            prober::runtime::kube::manifests::DEFAULT_NAMESPACE,
        )
        .await?;
    let inv = found.inventory;
    match args.output {
        Format::Yaml => out!("{}", inv.to_yaml())?,
        Format::Json => outln!(
            "{}",
            serde_json::to_string_pretty(&inv).map_err(CliError::Json)?
        )?,
    }
    Ok(prober::report::EXIT_OK)
}
