//! Capped reads of the small files both binaries consult (inventories, tokens, certificates, kubeconfigs).

use std::fmt;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The largest token file: service-account JWTs are 1-2 KiB.
pub const MAX_TOKEN: u64 = 64 * 1024;
/// The largest CA bundle or client certificate/key (a distribution's whole trust store is ~250 KiB).
pub const MAX_PEM: u64 = 1024 * 1024;
/// The largest kubeconfig the agent reads.
pub const MAX_KUBECONFIG: u64 = 1024 * 1024;
/// The largest resolv.conf.
pub const MAX_RESOLV_CONF: u64 = 64 * 1024;

/// Why a file could not be read. The message names the file by `name` (the path itself, or,
/// when the path may be a secret, where it came from) and says what it is for (`what`).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read {what} {name}: {source}")]
    Io {
        what: &'static str,
        name: String,
        source: std::io::Error,
    },
    #[error("{what} {name} is {kind}, not a regular file")]
    NotRegular {
        what: &'static str,
        name: String,
        kind: &'static str,
    },
    #[error("{what} {name} is larger than {limit} bytes")]
    TooLarge {
        what: &'static str,
        name: String,
        limit: u64,
    },
    #[error("{what} {name} is not UTF-8 text")]
    NotText { what: &'static str, name: String },
}

/// What kind of file `meta` describes, for messages.
fn kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else {
        "another kind of file"
    }
}

/// Reads the regular file at `path`, at most `limit` bytes. `what` says what the file is for
/// ("token file"), `name` how to call it in messages (usually the path itself). A device, a FIFO
/// or a runaway file fails at once, naming the file, instead of blocking or filling memory.
pub fn read_capped(
    path: &Path,
    limit: u64,
    what: &'static str,
    name: impl fmt::Display,
) -> Result<Vec<u8>, ReadError> {
    let name = name.to_string();
    let io = |source| ReadError::Io {
        what,
        name: name.clone(),
        source,
    };
    // O_NONBLOCK: opening a FIFO with no writer would wait for one; this way the open returns at
    // once and the check below refuses it. A regular file reads the same either way.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular {
            what,
            name,
            kind: kind(&meta),
        });
    }
    if meta.len() > limit {
        return Err(ReadError::TooLarge { what, name, limit });
    }
    let mut buf = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    // The file may grow between the stat and the read: never take more than the limit + 1.
    file.take(limit.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(io)?;
    if buf.len() as u64 > limit {
        return Err(ReadError::TooLarge { what, name, limit });
    }
    Ok(buf)
}

/// As `read_capped`, for text: invalid UTF-8 is an error naming the file, never content.
pub fn read_text_capped(
    path: &Path,
    limit: u64,
    what: &'static str,
    name: impl fmt::Display,
) -> Result<String, ReadError> {
    let name = name.to_string();
    let bytes = read_capped(path, limit, what, &name)?;
    String::from_utf8(bytes).map_err(|_| ReadError::NotText { what, name })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_fail_fast_naming_the_file() {
        let err = read_capped(Path::new("/dev/zero"), MAX_TOKEN, "token file", "/dev/zero")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "token file /dev/zero is a character device, not a regular file"
        );
    }

    #[test]
    fn a_fifo_without_writer_fails_at_once_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("inventory.yaml");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        // Opened without O_NONBLOCK, a FIFO with no writer blocks forever: read on a thread, so
        // a regression fails this test instead of hanging it.
        let (tx, rx) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || {
            let _ = tx.send(read_text_capped(&path, 1024, "inventory", path.display()));
        });
        let err = rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("reading a FIFO must not block")
            .unwrap_err();
        assert!(
            matches!(err, ReadError::NotRegular { kind: "a FIFO", .. }),
            "{err}"
        );
        assert!(err.to_string().contains("inventory.yaml"), "{err}");
    }

    #[test]
    fn size_limit_text_and_missing_files() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'a'; 11]).unwrap();
        let err = read_capped(&big, 10, "kubeconfig", "big").unwrap_err();
        assert_eq!(err.to_string(), "kubeconfig big is larger than 10 bytes");
        assert_eq!(
            read_capped(&big, 11, "kubeconfig", "big").unwrap().len(),
            11
        );
        let err = read_capped(&dir.path().join("nope"), 10, "token file", "nope").unwrap_err();
        assert!(
            err.to_string().starts_with("cannot read token file nope: "),
            "{err}"
        );
        let err = read_capped(dir.path(), 10, "token file", "dir").unwrap_err();
        assert!(err.to_string().contains("a directory"), "{err}");
        std::fs::write(&big, "ok").unwrap();
        assert_eq!(read_text_capped(&big, 10, "scenario", "big").unwrap(), "ok");
        std::fs::write(&big, [0xff, 0xfe]).unwrap();
        let err = read_text_capped(&big, 10, "resolv.conf", "big").unwrap_err();
        assert_eq!(err.to_string(), "resolv.conf big is not UTF-8 text");
        assert_eq!(read_capped(&big, 10, "key", "big").unwrap(), [0xff, 0xfe]);
    }
}
