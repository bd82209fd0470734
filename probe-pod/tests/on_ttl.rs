//! What the agent does when its TTL expires (`serve --ttl`), on loopback only: with
//! `--on-ttl idle` (a `DaemonSet`'s agents, which would be restarted if they exited) it closes
//! every socket and stays alive serving nothing until stopped; by default it exits.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const LOOPBACK: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// A loopback port free for TCP and UDP just now.
fn free_port() -> u16 {
    loop {
        let tcp = std::net::TcpListener::bind((LOOPBACK, 0)).unwrap();
        let port = tcp.local_addr().unwrap().port();
        if UdpSocket::bind((LOOPBACK, port)).is_ok() {
            return port;
        }
    }
}

fn serve(port: u16, extra: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_probe-pod"))
        .args(["serve", "--listen", "127.0.0.1", "--sniff", "never"])
        .args(["--port", &port.to_string(), "--ttl", "2s"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The agent's `/healthz` answer on `port`, or why there was none.
fn healthz(port: u16) -> Result<String, std::io::Error> {
    let addr = SocketAddr::from((LOOPBACK, port));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    s.write_all(b"GET /healthz HTTP/1.0\r\nHost: x\r\n\r\n")?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

/// Waits until `done` holds, or fails with `what` after `secs`.
fn within(secs: u64, what: &str, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(Instant::now() < until, "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A guard that kills the agent however the test ends.
struct Agent(Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn on_ttl_idle_stops_serving_and_stays_alive_until_stopped() {
    let port = free_port();
    let mut agent = Agent(serve(port, &["--on-ttl", "idle"]));
    within(10, "the agent never answered /healthz", || {
        healthz(port).is_ok_and(|r| r.contains(" 200 "))
    });
    // Past the TTL: its TCP port refuses connections and its UDP port is free again ...
    within(10, "the agent still serves after its TTL", || {
        healthz(port).is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionRefused)
    });
    assert!(
        UdpSocket::bind((LOOPBACK, port)).is_ok(),
        "the UDP port is still held"
    );
    // ... while the process lives on (a DaemonSet would restart one that exited).
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        agent.0.try_wait().unwrap().is_none(),
        "the idle agent exited"
    );
    assert!(healthz(port).is_err(), "it serves again");
    // Stopped (the kubelet's SIGTERM): it exits, successfully.
    let pid = nix::unistd::Pid::from_raw(i32::try_from(agent.0.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let mut status = None;
    within(5, "the idle agent ignored SIGTERM", || {
        status = agent.0.try_wait().unwrap();
        status.is_some()
    });
    assert!(status.unwrap().success(), "{status:?}");
}

#[test]
fn without_on_ttl_idle_the_agent_exits_at_its_ttl() {
    let port = free_port();
    let started = Instant::now();
    let mut agent = Agent(serve(port, &[]));
    within(10, "the agent never answered /healthz", || {
        healthz(port).is_ok()
    });
    let mut status = None;
    within(10, "the agent did not exit at its TTL", || {
        status = agent.0.try_wait().unwrap();
        status.is_some()
    });
    assert!(status.unwrap().success(), "{status:?}");
    assert!(started.elapsed() >= Duration::from_secs(2));
}
