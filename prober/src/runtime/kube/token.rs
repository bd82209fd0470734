//! Bearer tokens checked before a client is built: kube puts a token in the `Authorization`
//! header as it is and panics on one that cannot be a header value.

/// Why a token cannot be sent as `Authorization: Bearer <token>`. Never holds the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadToken {
    #[error("it holds a line break (CR or LF)")]
    LineBreak,
    #[error("it holds a control character")]
    Control,
    #[error("it holds a character outside visible ASCII")]
    NotAscii,
    #[error("it starts or ends with a space or tab, which HTTP drops")]
    Padded,
}

/// Whether `token` can follow `Bearer ` in a header: visible ASCII (0x21-0x7e), with spaces
/// and tabs only inside it (HTTP drops them at either end, so the server would see another
/// token).
pub fn check(token: &str) -> Result<(), BadToken> {
    for b in token.bytes() {
        match b {
            b'\r' | b'\n' => return Err(BadToken::LineBreak),
            b' ' | b'\t' | 0x21..=0x7e => {}
            0x00..=0x1f | 0x7f => return Err(BadToken::Control),
            _ => return Err(BadToken::NotAscii),
        }
    }
    if token.starts_with([' ', '\t']) || token.ends_with([' ', '\t']) {
        return Err(BadToken::Padded);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_a_header_can_carry_is_a_token() {
        let cases: &[(&str, Result<(), BadToken>)] = &[
            ("eyJhbGciOi.J9-_~+/=", Ok(())),
            ("k8s-aws-v1.aHR0cHM6", Ok(())),
            ("a b\tc", Ok(())),
            ("", Ok(())),
            ("x\n", Err(BadToken::LineBreak)),
            ("x\r\ny", Err(BadToken::LineBreak)),
            ("x\u{7f}", Err(BadToken::Control)),
            ("x\0", Err(BadToken::Control)),
            ("x\u{1b}[0m", Err(BadToken::Control)),
            ("tökén", Err(BadToken::NotAscii)),
            (" x", Err(BadToken::Padded)),
            ("x\t", Err(BadToken::Padded)),
        ];
        for (token, want) in cases {
            assert_eq!(check(token), *want, "{token:?}");
            // What is refused is what the header would refuse (kube's panic).
            let header = http::HeaderValue::from_str(&format!("Bearer {token}"));
            if want.is_ok() {
                assert!(header.is_ok(), "{token:?}");
            }
        }
    }
}
