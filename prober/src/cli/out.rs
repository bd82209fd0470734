//! The commands' standard output. `print!` panics when the reader has gone (`prober matrix |
//! head -1`); here a closed pipe only means nobody reads the rest: what follows is dropped, the
//! command still finishes its work (a lab's teardown, an export) and exits with its own status,
//! without a panic or a message. SIGPIPE stays ignored, as Rust sets it, rather than reset to its
//! default: the coordinator writes plans into its agents' pipes, and a dead agent must be an error
//! it reports, not a signal that kills the whole run.

use std::io::Write;

use super::CliError;

/// Writes `text` to standard output and flushes it, so each line reaches a pager at once.
pub fn print(text: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    written(out.write_all(text.as_bytes()).and_then(|()| out.flush()))
}

/// The outcome of a write to standard output: a closed pipe is no error of ours; any other failure
/// (a full disk behind a redirection) is.
pub fn written(r: std::io::Result<()>) -> Result<(), CliError> {
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(source) => Err(CliError::Write {
            what: "to standard output".into(),
            source,
        }),
        Ok(()) => Ok(()),
    }
}

/// `print!` that returns a `CliError` instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::out::print(&format!($($arg)*))
    };
}

/// `println!` that returns a `CliError` instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cli::out::print(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` through the one sanitiser (`report::safe::message`): a warning or an error of
/// ours may quote a file, a peer or the API server, and no escape sequence of theirs may reach
/// the terminal.
macro_rules! errln {
    ($($arg:tt)*) => {
        eprintln!("{}", prober::report::safe::message(&format!($($arg)*)))
    };
}

pub(crate) use {errln, out, outln};

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Error, ErrorKind};

    #[test]
    fn a_closed_pipe_is_no_error_and_other_failures_are() {
        assert!(written(Err(Error::from(ErrorKind::BrokenPipe))).is_ok());
        let full = written(Err(Error::from(ErrorKind::StorageFull)));
        assert!(
            matches!(full, Err(CliError::Write { what, .. }) if what.contains("standard output"))
        );
    }
}
