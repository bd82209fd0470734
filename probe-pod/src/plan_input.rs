//! Reads one plan document from a stream that may never end: over `pods/exec` stdin may stay open
//! (clusters without the v5 stream protocol cannot signal EOF on stdin alone), so reading stops
//! where the first JSON object or array closes. Only brackets and strings are tracked here; the
//! plan parser judges everything else.

use std::io::Read;

/// Why no plan text could be read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("cannot read the plan from {from}: {source}")]
    Io {
        from: &'static str,
        source: std::io::Error,
    },
    #[error("the plan from {from} is larger than {limit} bytes")]
    TooLarge { from: &'static str, limit: usize },
    #[error("plan is not valid JSON at line 1, column 0: {from} held no plan")]
    Empty { from: &'static str },
    #[error("the plan from {from} is not UTF-8 text")]
    NotUtf8 { from: &'static str },
}

/// Where the scanner is in the document.
#[derive(Debug, Default)]
struct Scan {
    depth: usize,
    started: bool,
    in_string: bool,
    escaped: bool,
}

impl Scan {
    /// Feeds `bytes`; returns how many belong to the document when it ended within them.
    fn feed(&mut self, bytes: &[u8]) -> Option<usize> {
        for (i, &b) in bytes.iter().enumerate() {
            if !self.started {
                match b {
                    b' ' | b'\t' | b'\r' | b'\n' => continue,
                    b'{' | b'[' => {
                        self.started = true;
                        self.depth = 1;
                        continue;
                    }
                    // Not an object: hand over what came so far, the parser names the problem.
                    _ => return Some(i + 1),
                }
            }
            if self.in_string {
                match (self.escaped, b) {
                    (true, _) => self.escaped = false,
                    (false, b'\\') => self.escaped = true,
                    (false, b'"') => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        return Some(i + 1);
                    }
                }
                _ => {}
            }
        }
        None
    }
}

/// Reads the first JSON document of `input`, at most `limit` bytes; `from` names the source.
pub fn read_document(
    mut input: impl Read,
    limit: usize,
    from: &'static str,
) -> Result<String, InputError> {
    let mut text = Vec::new();
    let mut scan = Scan::default();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match input.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(source) => return Err(InputError::Io { from, source }),
        };
        let end = scan.feed(&chunk[..n]);
        text.extend_from_slice(&chunk[..end.unwrap_or(n)]);
        if text.len() > limit {
            return Err(InputError::TooLarge { from, limit });
        }
        if end.is_some() {
            break;
        }
    }
    if text.iter().all(u8::is_ascii_whitespace) {
        return Err(InputError::Empty { from });
    }
    String::from_utf8(text).map_err(|_| InputError::NotUtf8 { from })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(s: &[u8]) -> Result<String, InputError> {
        read_document(s, 1024, "standard input")
    }

    #[test]
    fn stops_where_the_document_ends() {
        assert_eq!(
            read(b" {\"a\":[1,{\"b\":\"}]\\\"\"}]} trailing").unwrap(),
            " {\"a\":[1,{\"b\":\"}]\\\"\"}]}"
        );
        assert_eq!(read(b"[1,2] [3]").unwrap(), "[1,2]");
        assert_eq!(read(b"nope").unwrap(), "n", "the parser says what is wrong");
        assert_eq!(
            read(b"{\"open\": ").unwrap(),
            "{\"open\": ",
            "cut short: the parser says EOF"
        );
        assert!(matches!(read(b"  \n"), Err(InputError::Empty { .. })));
        assert!(matches!(
            read(&[b' '; 2000]),
            Err(InputError::TooLarge { .. })
        ));
        assert!(matches!(
            read(b"[\"\xff\"]"),
            Err(InputError::NotUtf8 { .. })
        ));
    }

    #[test]
    fn does_not_wait_for_more_after_the_document() {
        /// A reader that fails the test if asked for more after the first chunk.
        struct Once(bool);
        impl Read for Once {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                assert!(!self.0, "read again after the document ended");
                self.0 = true;
                let doc = b"{\"deadlineMs\":1}";
                buf[..doc.len()].copy_from_slice(doc);
                Ok(doc.len())
            }
        }
        assert_eq!(
            read_document(Once(false), 1024, "x").unwrap(),
            "{\"deadlineMs\":1}"
        );
    }
}
