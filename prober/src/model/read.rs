//! Reading input files with a cap: a path that names a device, a FIFO or a huge file fails at once
//! with an error naming it, instead of reading until memory runs out.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// An input file that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not a regular file", path.display())]
    NotAFile { path: PathBuf },
    #[error("{} is larger than {max} bytes, more than a {what} can be", path.display())]
    TooLarge {
        path: PathBuf,
        max: u64,
        what: &'static str,
    },
    #[error("{} is not UTF-8 text", path.display())]
    NotText { path: PathBuf },
}

/// The largest inventory read (a 5,000-node inventory is a few MiB).
pub const MAX_INVENTORY_BYTES: u64 = 64 << 20;
/// The largest scenario read.
pub const MAX_SCENARIO_BYTES: u64 = 1 << 20;
/// The largest saved report read.
pub const MAX_REPORT_BYTES: u64 = 1 << 30;

/// Reads a regular file of at most `max` bytes as text.
pub fn read_capped(path: &Path, max: u64, what: &'static str) -> Result<String, ReadError> {
    let bytes = read_capped_bytes(path, max, what)?;
    String::from_utf8(bytes).map_err(|_| ReadError::NotText { path: path.into() })
}

/// Reads a regular file of at most `max` bytes (a certificate, a key, a token file).
pub fn read_capped_bytes(path: &Path, max: u64, what: &'static str) -> Result<Vec<u8>, ReadError> {
    let io = |source| ReadError::Io {
        path: path.into(),
        source,
    };
    // O_NONBLOCK: opening a FIFO waits for a writer; this way the open returns at once and the
    // check below refuses it. A regular file reads the same either way.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(ReadError::NotAFile { path: path.into() });
    }
    if meta.len() > max {
        return Err(ReadError::TooLarge {
            path: path.into(),
            max,
            what,
        });
    }
    let mut bytes = Vec::new();
    // The file may grow between the check and the read: never read more than the cap + 1.
    file.take(max + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > max {
        return Err(ReadError::TooLarge {
            path: path.into(),
            max,
            what,
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_and_oversized_files_fail_naming_the_file() {
        let e = read_capped(Path::new("/dev/zero"), 1024, "test").unwrap_err();
        assert!(matches!(e, ReadError::NotAFile { .. }), "{e}");
        assert!(e.to_string().contains("/dev/zero"));
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.yaml");
        std::fs::write(&big, vec![b'a'; 2048]).unwrap();
        let e = read_capped(&big, 1024, "scenario").unwrap_err();
        assert!(matches!(e, ReadError::TooLarge { max: 1024, .. }), "{e}");
        assert!(e.to_string().contains("big.yaml") && e.to_string().contains("scenario"));
        std::fs::write(&big, "ok").unwrap();
        assert_eq!(read_capped(&big, 1024, "scenario").unwrap(), "ok");
        std::fs::write(&big, [0xff, 0xfe]).unwrap();
        assert!(matches!(
            read_capped(&big, 1024, "scenario"),
            Err(ReadError::NotText { .. })
        ));
        assert_eq!(read_capped_bytes(&big, 1024, "key").unwrap(), [0xff, 0xfe]);
    }

    #[test]
    fn a_fifo_fails_at_once_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("inventory.yaml");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        // Opened without O_NONBLOCK, a FIFO with no writer blocks forever: read on a thread, so
        // a regression fails this test instead of hanging it.
        let (tx, rx) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || {
            let _ = tx.send(read_capped(&path, 1024, "inventory").map_err(|e| e.to_string()));
        });
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("reading a FIFO must not block");
        let e = got.unwrap_err();
        assert!(
            e.contains("inventory.yaml") && e.contains("not a regular file"),
            "{e}"
        );
    }
}
