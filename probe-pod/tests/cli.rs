//! The agent's command line: bad plans exit 2 with a message naming the problem; no network used.

mod common;

use std::process::Command;

fn probe(plan: &str) -> (Option<i32>, String, String) {
    common::probe_with(&[], plan)
}

#[test]
fn bad_plans_exit_2_naming_the_problem() {
    let cases = [
        (
            r#"{"deadlineMs":1000,"probes":[{"id":"a","kind":"telnet","address":"127.0.0.1"}]}"#,
            "telnet",
        ),
        (
            r#"{"deadlineMs":1000,"probes":[{"id":"a","kind":"tcp","address":"127.0.0.1"}]}"#,
            "missing field `port`",
        ),
        (
            r#"{"deadlineMs":1000,"probes":[{"id":"a","kind":"udp","address":"127.0.0.1","port":0}]}"#,
            "`probes[0]`: port 0 is not a port",
        ),
        (
            r#"{"deadlineMs":0,"probes":[{"id":"a","kind":"icmp","address":"127.0.0.1"}]}"#,
            "deadlineMs",
        ),
        (
            r#"{"deadlineMs":1000,"probes":[{"id":"a","kind":"icmp""#,
            "not valid JSON",
        ),
        ("not json at all", "not valid JSON at line 1"),
    ];
    for (plan, want) in cases {
        let (code, stdout, stderr) = probe(plan);
        assert_eq!(code, Some(2), "plan {plan}: stderr {stderr}");
        assert!(
            stderr.contains(want),
            "plan {plan}\nstderr {stderr}\nwanted {want}"
        );
        assert!(stdout.is_empty(), "no results for a bad plan: {stdout}");
    }
}

#[test]
fn missing_plan_file_is_named() {
    let out = Command::new(env!("CARGO_BIN_EXE_probe-pod"))
        .args(["probe", "--plan", "/nonexistent/plan.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/plan.json"), "{err}");
}

#[test]
fn loopback_plan_runs_and_prints_one_line_per_probe() {
    // Loopback only: a closed port answers RST without any namespace.
    let (code, stdout, stderr) = probe(
        r#"{"deadlineMs":3000,"probes":[{"id":"a","kind":"tcp","address":"127.0.0.1","port":1},{"id":"b","kind":"udp","address":"127.0.0.1","port":1}]}"#,
    );
    assert_eq!(code, Some(0), "{stderr}");
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    for l in &lines {
        assert_eq!(l["outcome"], "refused", "{l}");
    }
}

#[test]
fn help_explains_the_commands() {
    let out = Command::new(env!("CARGO_BIN_EXE_probe-pod"))
        .arg("--help")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(text.contains("serve") && text.contains("probe"), "{text}");
    let bad = Command::new(env!("CARGO_BIN_EXE_probe-pod"))
        .arg("serve")
        .arg("--ttl")
        .arg("soon")
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--ttl"));
}

#[test]
fn the_plan_is_read_without_waiting_for_end_of_input() {
    // Over pods/exec stdin may stay open: the agent stops reading after one JSON document and
    // answers at once; it exits when the coordinator closes stdin (all results read) or, where
    // stdin cannot be closed alone (exec v4), after a bounded linger.
    use std::io::{BufRead, Write};
    let plan =
        br#"{"deadlineMs":2000,"probes":[{"id":"a","kind":"tcp","address":"127.0.0.1","port":1}]}"#;
    for close_stdin in [true, false] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_probe-pod"))
            .args(["probe", "--plan", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(plan).unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.contains("\"outcome\":\"refused\""), "{line}");
        if close_stdin {
            drop(stdin);
            assert!(child.wait().unwrap().success());
        } else {
            // Still open: the agent ends by itself all the same.
            assert!(child.wait().unwrap().success());
            drop(stdin);
        }
    }
}

/// Peak resident memory of this test's children so far, in KiB (the largest one).
fn children_peak_kib() -> i64 {
    use nix::sys::resource::{UsageWho, getrusage};
    getrusage(UsageWho::RUSAGE_CHILDREN).unwrap().max_rss()
}

fn loopback_plan(n: usize) -> String {
    let probes: Vec<String> = (0..n)
        .map(|i| format!(r#"{{"id":"p{i}","kind":"tcp","address":"127.0.0.1","port":1}}"#))
        .collect();
    format!(
        r#"{{"deadlineMs":600000,"probeTimeoutMs":2000,"concurrency":1024,"probes":[{}]}}"#,
        probes.join(",")
    )
}

#[test]
fn memory_follows_the_concurrency_not_the_plan() {
    // Loopback only: a closed port answers RST at once, so 100,000 probes are quick.
    let (code, stdout, stderr) = probe(&loopback_plan(1000));
    assert_eq!((code, stdout.lines().count()), (Some(0), 1000), "{stderr}");
    let small = children_peak_kib();
    let (code, stdout, stderr) = probe(&loopback_plan(100_000));
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout.lines().count(), 100_000, "one result per probe");
    assert!(stdout.lines().all(|l| l.contains(r#""outcome":"refused""#)));
    let large = children_peak_kib();
    eprintln!("peak RSS: 1,000 probes {small} KiB; 100,000 probes {large} KiB");
    // The plan's text (~7 MB here) and one span per probe are all that grow with its length.
    assert!(
        large < small + 48 * 1024,
        "100,000 probes took {large} KiB against {small} KiB for 1,000"
    );
}

#[test]
fn oversized_and_device_plans_fail_fast_naming_the_source() {
    let started = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_probe-pod"))
        .args(["probe", "--plan", "/dev/zero"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/dev/zero is a character device"), "{err}");
    // Standard input that never ends a document: cut at the plan limit, not read forever.
    let mut child = Command::new(env!("CARGO_BIN_EXE_probe-pod"))
        .args(["probe", "--plan", "-"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let spaces = vec![b' '; 64 * 1024];
        while std::io::Write::write_all(&mut stdin, &spaces).is_ok() {}
    });
    let status = child.wait().unwrap();
    feeder.join().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(
        err.contains("the plan from standard input is larger than 67108864 bytes"),
        "{err}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

/// A reader that goes away at once (`probe-pod probe ... | head -0`) ends the result stream
/// quietly: status 0, no panic, with and without `--simulate`.
#[test]
fn a_closed_stdout_ends_the_result_stream_quietly() {
    use std::io::Write;
    use std::process::Stdio;
    for extra in [&[][..], &["--simulate"][..]] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let mut child = Command::new(env!("CARGO_BIN_EXE_probe-pod"))
            .args(["probe", "--plan", "-"])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(writer)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(loopback_plan(50).as_bytes()).unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{extra:?}: {err}");
        assert_eq!(out.status.code(), Some(0), "{extra:?}: {err}");
    }
}

#[test]
fn a_port_held_by_another_process_is_a_typed_line_on_stdout() {
    // Loopback only; the agent binds its TCP port first, so a held TCP port fails before
    // anything else is bound, and a held UDP port right after the TCP one.
    let held_tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let held_udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for (port, protocol) in [
        (held_tcp.local_addr().unwrap().port(), "tcp"),
        (held_udp.local_addr().unwrap().port(), "udp"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_probe-pod"))
            .args(["serve", "--listen", "127.0.0.1", "--sniff", "never"])
            .args(["--ttl", "20s", "--port", &port.to_string()])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(2), "{stdout}");
        assert_eq!(
            stdout.trim(),
            format!(r#"{{"event":"portInUse","protocol":"{protocol}","port":{port}}}"#),
            "stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
