//! External tools the scheduled-mode and monitoring tests drive: a real Pushgateway on
//! loopback, promtool, Chromium.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// An external tool, or `None` after one SKIP line; with `PROBER_REQUIRE_TOOLS` set a missing
/// tool fails the test instead (`scripts/install-sched-test-deps` installs them).
/// What installs the scheduled mode's test tools (promtool, a Pushgateway, chromium).
pub const SCHED_DEPS: &str = "scripts/install-sched-test-deps";

/// A Pushgateway on a free loopback port with its own persistence file, stopped on drop.
pub struct Pushgateway {
    child: std::process::Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl Pushgateway {
    pub fn start(bin: &Path) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = tempfile::Builder::new()
            .prefix("prober-pgw-")
            .tempdir()
            .unwrap();
        let child = Command::new(bin)
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg(format!(
                "--persistence.file={}",
                dir.path().join("metrics").display()
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let gw = Self {
            child,
            port,
            _dir: dir,
        };
        let started = Instant::now();
        while get(port, "/-/ready").is_none_or(|r| !r.starts_with("HTTP/1.1 200")) {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "the Pushgateway did not become ready on 127.0.0.1:{port}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        gw
    }
}

impl Drop for Pushgateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plain HTTP GET on loopback, under a deadline.
pub fn get(port: u16, path: &str) -> Option<String> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}
