//! A starved agent (loopback only, no namespace): a probe whose timer ran out while the agent
//! was stopped (SIGSTOP, as a CPU hog or a throttled cgroup would keep it from running) is run
//! again; a path that stays silent while the agent runs is still a timeout, run once.

mod common;

use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::process::Child;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// `probe-pod probe` on one UDP echo probe to `port`, 400 ms timeout, a deadline of
/// `deadline_ms`.
fn agent(port: u16, deadline_ms: u64) -> Child {
    common::spawn_probe(
        &[],
        &format!(
            r#"{{"deadlineMs":{deadline_ms},"probeTimeoutMs":400,"probes":[{{"id":"u","kind":"udp","address":"127.0.0.1","port":{port}}}]}}"#
        ),
    )
}

fn result(child: &mut Child) -> serde_json::Value {
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(child.wait().unwrap().success());
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
}

/// A responder that answers nothing but what `answer` says to, counting the datagrams.
fn responder() -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

#[test]
fn a_timeout_while_the_agent_was_stopped_is_run_again() {
    let r = responder();
    let mut child = agent(r.local_addr().unwrap().port(), 6000);
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap());
    let mut buf = [0u8; 64];
    // The first datagram goes unanswered, and the agent is stopped past its 400 ms timeout.
    r.recv_from(&mut buf).expect("the first datagram");
    kill(pid, Signal::SIGSTOP).unwrap();
    std::thread::sleep(Duration::from_millis(900));
    kill(pid, Signal::SIGCONT).unwrap();
    // The rerun's datagram is echoed.
    let (n, from) = r.recv_from(&mut buf).expect("a rerun after the stop");
    r.send_to(&buf[..n], from).unwrap();
    let v = result(&mut child);
    assert_eq!(v["outcome"], "ok", "{v}");
}

#[test]
fn a_silent_path_the_agent_ran_through_is_a_timeout_run_once() {
    let r = responder();
    let mut child = agent(r.local_addr().unwrap().port(), 6000);
    let mut buf = [0u8; 64];
    r.recv_from(&mut buf).expect("the datagram");
    let v = result(&mut child);
    assert_eq!(v["outcome"], "timeout", "{v}");
    assert!(v.get("stalledMs").is_none(), "{v}");
    r.set_nonblocking(true).unwrap();
    assert!(r.recv_from(&mut buf).is_err(), "run once, not again");
}

#[test]
fn a_timeout_with_no_time_left_to_rerun_carries_its_stall() {
    let r = responder();
    let mut child = agent(r.local_addr().unwrap().port(), 1200);
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap());
    let mut buf = [0u8; 64];
    r.recv_from(&mut buf).expect("the datagram");
    kill(pid, Signal::SIGSTOP).unwrap();
    std::thread::sleep(Duration::from_millis(900));
    kill(pid, Signal::SIGCONT).unwrap();
    let v = result(&mut child);
    assert_eq!(v["outcome"], "timeout", "{v}");
    let stalled = v["stalledMs"]
        .as_u64()
        .unwrap_or_else(|| panic!("no stalledMs: {v}"));
    assert!((300..5000).contains(&stalled), "{v}");
}
