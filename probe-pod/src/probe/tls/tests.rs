//! Tests of the TLS probe: status lines and their verdicts, token and CA files read capped, PEM errors.

use super::*;

#[test]
fn status_lines() {
    assert_eq!(http1::status(b"HTTP/1.1 200 OK\r\n\r\n"), Some(200));
    assert_eq!(http1::status(b"HTTP/1.0 401 Unauthorized\r\n"), Some(401));
    assert_eq!(http1::status(b"SSH-2.0-OpenSSH\r\n"), None);
    assert_eq!(http1::status(b""), None);
    assert_eq!(http1::status(b"HTTP/1.1 abc"), None);
}

#[test]
fn statuses_judged() {
    assert_eq!(judge_status(200, false), Outcome::Ok);
    assert_eq!(judge_status(403, true), Outcome::Ok);
    assert_eq!(judge_status(401, false), Outcome::Ok);
    assert_eq!(judge_status(401, true), Outcome::Unauthorized);
    assert_eq!(judge_status(500, false), Outcome::HttpError);
    assert_eq!(judge_status(302, false), Outcome::HttpError);
}

#[test]
fn token_file_must_hold_one_token() {
    let dir = std::env::temp_dir().join(format!("probe-pod-token-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good");
    std::fs::write(&good, "abc.def.ghi\n").unwrap();
    assert_eq!(read_token(&good).unwrap().expose(), "abc.def.ghi");
    assert_eq!(
        format!("{:?}", read_token(&good).unwrap()),
        "Secret(<redacted>)"
    );
    let bad = dir.join("bad");
    std::fs::write(&bad, "two tokens\n").unwrap();
    let err = read_token(&bad).unwrap_err().to_string();
    assert!(!err.contains("tokens"), "must not echo file content: {err}");
    assert!(
        read_token(&dir.join("missing"))
            .unwrap_err()
            .to_string()
            .contains("missing")
    );
    let forged = dir.join("forged");
    std::fs::write(&forged, "abc\r\nX-Forged: 1\n").unwrap();
    let err = read_token(&forged).unwrap_err().to_string();
    assert!(!err.contains("Forged") && err.contains("forged"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn devices_as_token_or_ca_fail_fast() {
    let started = std::time::Instant::now();
    let err = read_token(Path::new("/dev/zero")).unwrap_err().to_string();
    assert!(
        err.contains("/dev/zero") && err.contains("not a regular file"),
        "{err}"
    );
    let err = verifier(Roots::File(Path::new("/dev/zero")), true).unwrap_err();
    assert!(
        err.contains("/dev/zero") && err.contains("CA bundle"),
        "{err}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
}

#[test]
fn pem_errors_never_quote_the_input() {
    let secret_line = b"-----BEGIN CERTIFICATE-----\nSEKRIT-LINE-abcdefgh\n-----END NOPE-----\n";
    for pem in [&secret_line[..], b"SEKRIT-LINE-abcdefgh", b""] {
        if let Err(e) = pem_certificates(pem, "the CA") {
            let e = e.to_string();
            assert!(!e.contains("SEKRIT") && e.starts_with("the CA "), "{e}");
        }
        let e = pem_private_key(pem, "the key").unwrap_err().to_string();
        assert!(!e.contains("SEKRIT") && e.starts_with("the key "), "{e}");
    }
}
