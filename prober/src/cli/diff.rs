//! `prober diff OLD NEW`: what changed between two saved reports — new, resolved and persisting
//! findings, matched by kind and subject rather than by id or wording.

use super::out::{out, outln};
use std::path::PathBuf;

use clap::ValueEnum;
use prober::report::diff::diff;

use super::CliError;

#[derive(Clone, Copy, ValueEnum)]
pub enum Output {
    Table,
    Json,
}

#[derive(clap::Args)]
pub struct Args {
    /// The earlier JSON report (`prober matrix -o json` or `--save`).
    pub old: PathBuf,
    /// The later JSON report.
    pub new: PathBuf,
    /// Output format: `json` has the keys `new`, `resolved` and `persisting`, each a list of
    /// findings.
    #[arg(short, long, env = "PROBER_OUTPUT", value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Width of the table: by default $COLUMNS, else the terminal's width, else 100 columns.
    /// Long lines are wrapped, never cut.
    #[arg(long, env = "PROBER_WIDTH", value_parser = clap::value_parser!(u16).range(40..))]
    pub width: Option<u16>,
}

/// Exit 1 when something new is an error, else 0.
pub fn run(args: &Args) -> Result<u8, CliError> {
    let old = super::report::load(&args.old)?;
    let new = super::report::load(&args.new)?;
    let d = diff(&old.findings, &new.findings);
    match args.output {
        Output::Table => {
            let width = super::args::table_width(
                args.width,
                std::env::var("COLUMNS").ok().as_deref(),
                console::Term::stdout().size_checked().map(|(_, cols)| cols),
            );
            out!("{}", d.table(width))?;
        }
        Output::Json => outln!("{}", d.to_json())?,
    }
    Ok(d.exit_code())
}
