//! `prober report`: re-render a saved JSON report.

use std::path::PathBuf;

use prober::report::Report;

use super::CliError;
use super::args::OutputArgs;

#[derive(clap::Args)]
pub struct Args {
    /// A JSON report saved by `prober matrix -o json` or `--save`.
    pub file: PathBuf,
    #[command(flatten)]
    pub out: OutputArgs,
}

pub fn run(args: &Args) -> Result<u8, CliError> {
    let file = args.file.display();
    let text = std::fs::read_to_string(&args.file)
        .map_err(|e| CliError::Usage(format!("cannot read {file}: {e}")))?;
    let report = Report::from_json(&text).map_err(|e| CliError::Usage(format!("{file}: {e}")))?;
    print!("{}", args.out.render(&report));
    Ok(report.summary.exit_code)
}
