//! HTTP/1.1 heads by hand for the agent's and the coordinator's few plain exchanges: a capped writer and parser.

use std::fmt::Write as _;

/// The blank line that ends a head.
const END: &[u8] = b"\r\n\r\n";

/// The largest head either side writes or reads.
pub const MAX_HEAD: usize = 16 * 1024;

/// A head that cannot be written: a field that would break the head's framing, or too much.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    #[error("the HTTP {what} holds a line break, a control character or a space where none may be")]
    Unsafe { what: &'static str },
    #[error("the HTTP head would be larger than {MAX_HEAD} bytes")]
    TooLarge,
}

/// Whether `value` may stand in a head as the `what` (a header value: no control characters;
/// a token such as a method or target: no space either).
fn check(value: &str, what: &'static str, token: bool) -> Result<(), HeadError> {
    if value.chars().any(|c| c.is_control() || (token && c == ' ')) {
        return Err(HeadError::Unsafe { what });
    }
    Ok(())
}

/// Writes the headers and the blank line after the start line in `head`, refusing any value
/// that would end a line, and any head over [`MAX_HEAD`].
fn finish(mut head: String, headers: &[(&str, &str)]) -> Result<Vec<u8>, HeadError> {
    for (name, value) in headers {
        check(name, "header name", true)?;
        check(value, "header value", false)?;
        let _ = write!(head, "{name}: {value}\r\n");
    }
    head.push_str("\r\n");
    if head.len() > MAX_HEAD {
        return Err(HeadError::TooLarge);
    }
    Ok(head.into_bytes())
}

/// A request head: `METHOD TARGET HTTP/1.1`, the headers, the blank line.
pub fn request(method: &str, target: &str, headers: &[(&str, &str)]) -> Result<Vec<u8>, HeadError> {
    check(method, "method", true)?;
    check(target, "request target", true)?;
    finish(format!("{method} {target} HTTP/1.1\r\n"), headers)
}

/// A response head: `HTTP/1.1 STATUS REASON`, the headers, the blank line.
pub fn response(status: u16, headers: &[(&str, &str)]) -> Result<Vec<u8>, HeadError> {
    finish(format!("HTTP/1.1 {status} {}\r\n", reason(status)), headers)
}

/// The reason phrase of the statuses these exchanges use.
#[must_use]
pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        _ => "Other",
    }
}

/// Where the head in `buf` ends (just past its blank line), once it is complete.
#[must_use]
pub fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(END.len())
        .position(|w| w == END)
        .map(|i| i + END.len())
}

/// A message split into its head (without the blank line) and its body; `None` when the head is
/// incomplete.
#[must_use]
pub fn split(message: &[u8]) -> Option<(&[u8], &[u8])> {
    let end = head_end(message)?;
    Some((&message[..end - END.len()], &message[end..]))
}

/// The first line of a head, when it is UTF-8.
fn start_line(head: &[u8]) -> Option<&str> {
    let end = head
        .iter()
        .position(|&b| b == b'\r' || b == b'\n')
        .unwrap_or(head.len());
    std::str::from_utf8(&head[..end]).ok()
}

/// The parts of a request line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLine<'a> {
    pub method: &'a str,
    pub target: &'a str,
}

/// The request line of `head`: exactly a method, a target and an `HTTP/1.x` version, one space
/// apart; anything else is `None`.
#[must_use]
pub fn request_line(head: &[u8]) -> Option<RequestLine<'_>> {
    let mut parts = start_line(head)?.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    version
        .starts_with("HTTP/1.")
        .then_some(RequestLine { method, target })
}

/// The status line of a response head (trimmed), `""` when there is none.
#[must_use]
pub fn status_line(head: &[u8]) -> &str {
    start_line(head).unwrap_or("").trim()
}

/// The status code of an `HTTP/1.x` response head: three digits, 100-599.
#[must_use]
pub fn status(head: &[u8]) -> Option<u16> {
    let mut parts = start_line(head)?.split(' ');
    if !parts.next()?.starts_with("HTTP/1.") {
        return None;
    }
    let code = parts.next()?;
    if code.len() != 3 {
        return None;
    }
    code.parse().ok().filter(|c| (100..600).contains(c))
}

/// The value of the header `name` (any case) in `head`, trimmed; the first when repeated.
#[must_use]
pub fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_heads_read_back() {
        let req = request("GET", "/seen?since=1", &[("Host", "localhost")]).unwrap();
        assert_eq!(
            req,
            b"GET /seen?since=1 HTTP/1.1\r\nHost: localhost\r\n\r\n"
        );
        assert_eq!(head_end(&req), Some(req.len()));
        let line = request_line(&req).unwrap();
        assert_eq!((line.method, line.target), ("GET", "/seen?since=1"));
        let text = std::str::from_utf8(&req).unwrap();
        assert_eq!(header(text, "host"), Some("localhost"));
        assert_eq!(header(text, "authorization"), None);
        let mut resp = response(404, &[("Content-Length", "3")]).unwrap();
        resp.extend_from_slice(b"no\n");
        assert_eq!(status(&resp), Some(404));
        assert_eq!(status_line(&resp), "HTTP/1.1 404 Not Found");
        assert_eq!(split(&resp).unwrap().1, b"no\n");
    }

    #[test]
    fn the_writer_refuses_what_would_break_the_framing() {
        for (what, got) in [
            (
                "header value",
                request("GET", "/", &[("X", "a\r\nEvil: 1")]),
            ),
            ("header name", request("GET", "/", &[("X Y", "a")])),
            ("request target", request("GET", "/ HTTP/1.0\r\n", &[])),
            ("method", request("G T", "/", &[])),
        ] {
            assert_eq!(got, Err(HeadError::Unsafe { what }));
        }
        let big = "x".repeat(MAX_HEAD);
        assert_eq!(
            request("GET", "/", &[("X", &big)]),
            Err(HeadError::TooLarge)
        );
    }

    #[test]
    fn the_parser_refuses_what_is_not_http_1() {
        assert_eq!(status(b"HTTP/1.1 200 OK\r\n\r\n"), Some(200));
        assert_eq!(status(b"HTTP/1.0 401 Unauthorized\r\n"), Some(401));
        for bad in [
            &b"HTTP/2 200"[..],
            b"HTTP/1.1 abc",
            b"HTTP/1.1 99 x",
            b"SSH-2.0",
        ] {
            assert_eq!(status(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        for bad in [
            &b"GET\r\n\r\n"[..],
            b"GET /healthz\r\n\r\n",
            b"\xff\xfe /x HTTP/1.1\r\n\r\n",
            b"GET / x HTTP/1.1\r\n\r\n",
            b"GET / SPDY/3\r\n\r\n",
        ] {
            assert_eq!(request_line(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n"), None);
        assert_eq!(split(b"HTTP/1.1 200 OK\r\n"), None);
        assert_eq!(status_line(b""), "");
    }
}
