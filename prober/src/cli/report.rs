//! `prober report`: re-render a saved JSON report.

use super::out::out;
use std::path::{Path, PathBuf};

use probe_proto::files::read_text_capped;
use prober::model::read::MAX_REPORT_BYTES;
use prober::report::Report;

use super::CliError;
use super::args::{ExportArgs, OutputArgs};

#[derive(clap::Args)]
pub struct Args {
    /// A JSON report saved by `prober matrix -o json` or `--save`.
    pub file: PathBuf,
    #[command(flatten)]
    pub out: OutputArgs,
    #[command(flatten)]
    pub export: ExportArgs,
}

/// A saved report, read with the cap and checked to be one.
pub fn load(path: &Path) -> Result<Report, CliError> {
    let text = read_text_capped(path, MAX_REPORT_BYTES, "saved report", path.display())?;
    Report::from_json(&text).map_err(|source| CliError::SavedReport {
        path: path.into(),
        source,
    })
}

pub async fn run(args: &Args) -> Result<u8, CliError> {
    let report = load(&args.file)?;
    // The report carries no clock: it finished when it was saved.
    let finished = std::fs::metadata(&args.file)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or_else(super::export::now, |d| d.as_secs());
    out!("{}", args.out.render_finished(&report, finished))?;
    Ok(args
        .export
        .finish(&super::command("report"), &report, finished, None)
        .await)
}
