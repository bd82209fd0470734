//! `prober`: tells Kubernetes operators which network paths of their cluster fail, and why.
//! This file only parses, dispatches and turns the outcome into an exit code.

mod cli;

use std::path::Path;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser};
use cli::{Cli, Command, lab};

fn parse() -> Cli {
    // Installed as `kubectl-probe`, it is a kubectl plugin: `kubectl probe matrix`.
    let invoked = std::env::args_os().next();
    let plugin = invoked
        .as_deref()
        .map(Path::new)
        .and_then(Path::file_name)
        .is_some_and(|n| n == "kubectl-probe");
    if plugin {
        cli::invoked_as("kubectl probe");
        let matches = Cli::command().bin_name("kubectl probe").get_matches();
        Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
    } else {
        Cli::parse()
    }
}

/// One malloc arena for the whole coordinator: its two workers gain nothing from an arena each,
/// and a large matrix's freed memory is not left stranded in several (about 4 MB of peak RSS on a
/// 150-node matrix). glibc only; set before any thread starts.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn one_malloc_arena() {
    // SAFETY: mallopt only sets an allocator parameter; called before any other thread exists.
    #[allow(unsafe_code)]
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn one_malloc_arena() {}

fn main() -> ExitCode {
    one_malloc_arena();
    let cli = parse();
    // A lab under construction is torn down by a signal thread; the mask must be set before the
    // runtime starts its threads so that they inherit it.
    if matches!(&cli.command, Command::Lab(c) if !matches!(c, lab::Command::Apiserver(_))) {
        cli::signals::install_lab_teardown();
    }
    let name = cli::name(&cli);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{name}: cannot start the async runtime: {e}");
            return ExitCode::from(prober::report::EXIT_USAGE);
        }
    };
    match runtime.block_on(cli::dispatch(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            // An error may quote its input (a field path, a value serde did not expect).
            let said = cli::with_causes(&e);
            eprintln!("{name}: {}", prober::report::safe::message(&said));
            ExitCode::from(e.exit_code())
        }
    }
}
