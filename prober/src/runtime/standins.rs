//! The preflight's stand-ins: `probe-pod serve` started on the candidate through its exec
//! prefix, holding the ports the candidate will serve once joined, so the cluster's agents can
//! probe them. A port already taken there is a conflict, found here and left out.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::inventory::Inventory;
use crate::model::Protocol;
use crate::plan::preflight::{Candidate, PortConflict, standin_tcp_ports, standin_udp_ports};

/// The stand-in agent's own port on the candidate (echo, `/seen`).
pub const STANDIN_AGENT_PORT: u16 = 9917;
/// How long the stand-ins may take to start (an ssh prefix included).
const START_DEADLINE: Duration = Duration::from_secs(15);

/// The running stand-ins: killed when dropped, and by their TTL if this process dies.
#[derive(Debug)]
pub struct Standins {
    child: Child,
}

/// The stand-ins could not be started on the candidate.
#[derive(Debug, thiserror::Error)]
pub enum StandinError {
    #[error("stand-ins on {node}: `{command}`: {problem}")]
    Start {
        node: String,
        command: String,
        #[source]
        problem: Problem,
    },
    #[error("stand-ins on {node}: could not start")]
    GaveUp { node: String },
}

/// What went wrong starting the stand-ins' command.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    #[error(transparent)]
    Spawn(std::io::Error),
    #[error("no stderr")]
    NoStderr,
    #[error("no stdout")]
    NoStdout,
    #[error("not serving within {} s", .0.as_secs())]
    NotServing(Duration),
    /// It exited, saying this on its stderr.
    #[error("{0}")]
    Said(String),
}

/// Starts the stand-ins on the candidate. A port that cannot be bound is a conflict: it is
/// left out and the stand-ins start again without it. Returns the running stand-ins (killed when
/// dropped, and by their TTL if this process dies) and the conflicts.
pub async fn start(
    inv: &Inventory,
    c: &Candidate,
    agent_bin: &str,
) -> Result<(Standins, Vec<PortConflict>), StandinError> {
    let mut tcp = standin_tcp_ports(inv, c.role);
    let mut udp = standin_udp_ports(inv);
    let mut conflicts = Vec::new();
    // Each round either starts or drops one port, so this ends.
    for _ in 0..=tcp.len() + udp.len() {
        let mut argv: Vec<String> = c.exec.clone();
        argv.extend([
            agent_bin.to_string(),
            "serve".into(),
            "--listen".into(),
            "0.0.0.0".into(),
            "--port".into(),
            c.agent_port.to_string(),
            // Where it may (CAP_NET_RAW), the sniffer witnesses what reaches the candidate:
            // the SYNs of a failed TCP probe and the overlay datagrams on its NIC, so a gap says
            // whether the candidate's own firewall dropped them. Without it, `auto` goes on.
            "--sniff".into(),
            "auto".into(),
            "--ttl".into(),
            "10m".into(),
        ]);
        if let Some(crate::inventory::Overlay::Vxlan { port, .. }) = inv.cluster.overlay {
            argv.push(format!("--vxlan-port={port}"));
        }
        if !tcp.is_empty() {
            argv.push(format!("--extra-tcp-port={}", join(&tcp)));
        }
        if !udp.is_empty() {
            argv.push(format!("--standin-udp-port={}", join(&udp)));
        }
        let command = argv.join(" ");
        let env = |problem: Problem| StandinError::Start {
            node: c.name.clone(),
            command: command.clone(),
            problem,
        };
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .env("PROBE_POD_LOG", "info")
            .stdin(Stdio::null())
            // Its typed lines (`probe_proto::ServeEvent`): the port it could not take.
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| env(Problem::Spawn(e)))?;
        let stderr = child.stderr.take().ok_or_else(|| env(Problem::NoStderr))?;
        let stdout = child.stdout.take().ok_or_else(|| env(Problem::NoStdout))?;
        let mut lines = BufReader::new(stderr).lines();
        let mut said = String::new();
        let ready = tokio::time::timeout(START_DEADLINE, async {
            while let Ok(Some(line)) = lines.next_line().await {
                if line.contains(" serving") {
                    return true;
                }
                said.push_str(&line);
                said.push('\n');
            }
            false
        })
        .await
        .map_err(|_| env(Problem::NotServing(START_DEADLINE)))?;
        if ready {
            // Keep draining its log so it never blocks on a full pipe.
            tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
            let mut events = BufReader::new(stdout).lines();
            tokio::spawn(async move { while let Ok(Some(_)) = events.next_line().await {} });
            return Ok((Standins { child }, conflicts));
        }
        let _ = child.wait().await;
        let mut events = String::new();
        let _ = tokio::time::timeout(
            Duration::from_secs(5),
            stdout.take(MAX_EVENTS_BYTES).read_to_string(&mut events),
        )
        .await;
        let Some((protocol, port)) = taken(&events) else {
            return Err(env(Problem::Said(said.trim().to_string())));
        };
        let list = if protocol == Protocol::Tcp {
            &mut tcp
        } else {
            &mut udp
        };
        if !list.contains(&port) {
            // The stand-in agent's own port: nothing to leave out.
            return Err(env(Problem::Said(said.trim().to_string())));
        }
        list.retain(|p| *p != port);
        let process = holder(&c.exec, protocol, port).await;
        conflicts.push(PortConflict {
            protocol,
            port,
            process,
        });
    }
    Err(StandinError::GaveUp {
        node: c.name.clone(),
    })
}

fn join(ports: &[u16]) -> String {
    ports
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The most of the stand-ins' standard output read after they exit (a few typed lines).
const MAX_EVENTS_BYTES: u64 = 64 << 10;

/// The port `probe-pod serve` could not listen on, from the typed line it prints on its
/// standard output (`probe_proto::ServeEvent::PortInUse`).
fn taken(stdout: &str) -> Option<(Protocol, u16)> {
    stdout
        .lines()
        .find_map(|line| match probe_proto::ServeEvent::parse(line)? {
            probe_proto::ServeEvent::PortInUse { protocol, port } => Some((
                match protocol {
                    probe_proto::Transport::Tcp => Protocol::Tcp,
                    probe_proto::Transport::Udp => Protocol::Udp,
                },
                port,
            )),
        })
}

/// What holds a port on the candidate, as `ss -p` names it; `None` when it cannot be read.
async fn holder(exec: &[String], protocol: Protocol, port: u16) -> Option<String> {
    let mut argv: Vec<String> = exec.to_vec();
    let flags = if protocol == Protocol::Tcp {
        "-Hltnp"
    } else {
        "-Hlunp"
    };
    argv.extend(["ss".into(), flags.into(), format!("sport = :{port}")]);
    let out = tokio::time::timeout(
        Duration::from_secs(5),
        Command::new(&argv[0])
            .args(&argv[1..])
            .kill_on_drop(true)
            .output(),
    )
    .await
    .ok()?
    .ok()?;
    holders(&String::from_utf8_lossy(&out.stdout))
}

/// The processes in `ss -p` output (`users:(("nc",pid=42,fd=9),("nc",pid=43,fd=3))`, a line per
/// socket) for a person: `nc (pid 42), nc (pid 43)`, each process once; `None` when none is named.
fn holders(ss: &str) -> Option<String> {
    let mut seen: Vec<String> = Vec::new();
    for line in ss.lines() {
        let Some(at) = line.find("users:(") else {
            continue;
        };
        // Each user is `("NAME",pid=N,fd=M)`; the name is quoted and may hold any character.
        let mut rest = &line[at + "users:(".len()..];
        while let Some(open) = rest.find("(\"") {
            let after = &rest[open + 2..];
            let Some(end) = after.find("\",pid=") else {
                break;
            };
            let name = &after[..end];
            let digits: String = after[end + "\",pid=".len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            let one = if digits.is_empty() {
                name.to_string()
            } else {
                format!("{name} (pid {digits})")
            };
            if !seen.contains(&one) {
                seen.push(one);
            }
            rest = &after[end..];
        }
    }
    (!seen.is_empty()).then(|| seen.join(", "))
}

impl Standins {
    /// Stops the stand-ins (their TTL covers a prefix that does not pass the signal on).
    pub async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_taken_port_is_the_agents_typed_line_not_its_wording() {
        let line = |protocol, port| probe_proto::ServeEvent::PortInUse { protocol, port }.to_line();
        let out = format!("{}\n", line(probe_proto::Transport::Tcp, 10250));
        assert_eq!(taken(&out), Some((Protocol::Tcp, 10250)));
        let out = format!("noise\n{}", line(probe_proto::Transport::Udp, 8472));
        assert_eq!(taken(&out), Some((Protocol::Udp, 8472)));
        // The log's wording is no contract: an error text alone names no port.
        assert_eq!(
            taken(
                "probe-pod serve: cannot listen on tcp 0.0.0.0:10250: Address in use (os error 98)"
            ),
            None
        );
    }

    #[test]
    fn the_holder_reads_as_a_process_and_its_pid() {
        let one = "tcp LISTEN 0 1 0.0.0.0:10250 0.0.0.0:* users:((\"nc\",pid=42,fd=9))\n";
        assert_eq!(holders(one).as_deref(), Some("nc (pid 42)"));
        // Two processes on one socket, and the same one again on its IPv6 socket: each once.
        let many = concat!(
            "tcp LISTEN 0 1 0.0.0.0:10250 0.0.0.0:* users:((\"nc\",pid=42,fd=9),(\"probe-pod\",pid=26388,fd=3))\n",
            "tcp LISTEN 0 1 [::]:10250 [::]:* users:((\"nc\",pid=42,fd=10))\n",
        );
        assert_eq!(
            holders(many).as_deref(),
            Some("nc (pid 42), probe-pod (pid 26388)")
        );
        // No `-p` details (another user's socket without root): nothing to name.
        assert_eq!(holders("tcp LISTEN 0 1 0.0.0.0:10250 0.0.0.0:*\n"), None);
        assert_eq!(holders(""), None);
    }
}
