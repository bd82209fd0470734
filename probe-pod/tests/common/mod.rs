//! Test hosts in network namespaces. Every namespace carries the `ppt-` prefix, the run's tag
//! (`PROBER_TEST_RUN`, set by `scripts/test`, which removes its own leftovers by it) and this test
//! process's id, and is deleted (after its processes are killed) when the guard drops — on pass,
//! failure or panic. Nothing is ever added to the root namespace.

// A test: it reads fixtures and the clock freely (clippy.toml bans them in shipped code).
#![allow(clippy::disallowed_methods)]
#![allow(dead_code, clippy::missing_panics_doc)]

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use probe_pod::proto::{Outcome, ProbeResult};

pub mod tls_server;

/// Prefix of every namespace these tests create; a run's own leftovers start with
/// `ppt-$PROBER_TEST_RUN-` (`scripts/cleanup-netns`).
pub const PREFIX: &str = "ppt-";

/// `ppt-RUN-` under `scripts/test`, else `ppt-`: the run's tag is letters and digits only.
fn prefix() -> String {
    match std::env::var("PROBER_TEST_RUN") {
        Ok(run) if !run.is_empty() && run.bytes().all(|b| b.is_ascii_alphanumeric()) => {
            format!("{PREFIX}{run}-")
        }
        _ => PREFIX.to_string(),
    }
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

pub fn agent_bin() -> &'static str {
    env!("CARGO_BIN_EXE_probe-pod")
}

/// Whether this test may build network namespaces: one `SKIP` line without root, a failure
/// under `PROBER_REQUIRE_NETNS=1` (`scripts/test`).
pub use test_kit::skip::require_root;

fn cmd_ok(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A network namespace, deleted on drop with everything spawned in it.
pub struct Ns {
    pub name: String,
    children: Vec<Child>,
}

impl Ns {
    pub fn new(tag: &str) -> Self {
        // A test that forgot its `require_root()` guard fails here rather than half-running.
        assert!(
            require_root(),
            "this test builds network namespaces: start it with `if !common::require_root() {{ return; }}`"
        );
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("{}{}-{n}-{tag}", prefix(), std::process::id());
        cmd_ok(Command::new("ip").args(["netns", "add", &name]));
        let ns = Self {
            name,
            children: Vec::new(),
        };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// `ip -n NS ARGS...`
    pub fn ip(&self, args: &[&str]) -> String {
        cmd_ok(Command::new("ip").arg("-n").arg(&self.name).args(args))
    }

    /// Runs a command inside the namespace and returns its stdout; panics on failure.
    pub fn exec(&self, args: &[&str]) -> String {
        cmd_ok(
            Command::new("ip")
                .args(["netns", "exec", &self.name])
                .args(args),
        )
    }

    pub fn sysctl(&self, key: &str, value: &str) {
        self.exec(&["sysctl", "-qw", &format!("{key}={value}")]);
    }

    /// Turns IPv6 on in the namespace, on every interface it has and will have (a host booted
    /// with it off, or a distribution's default, must not make the IPv6 tests skip silently),
    /// without duplicate address detection: call it before the links are made, so their
    /// link-local addresses (which neighbour discovery needs) are usable at once, not tentative
    /// for a second.
    pub fn enable_ipv6(&self) {
        for scope in ["all", "default"] {
            self.sysctl(&format!("net.ipv6.conf.{scope}.disable_ipv6"), "0");
            self.sysctl(&format!("net.ipv6.conf.{scope}.accept_dad"), "0");
        }
    }

    /// Adds an IPv6 address (CIDR) to `dev`, usable at once: no duplicate address detection.
    pub fn addr6(&self, dev: &str, cidr: &str) {
        self.ip(&["-6", "addr", "add", cidr, "dev", dev, "nodad"]);
    }

    /// Loads an nftables ruleset into the namespace.
    pub fn nft(&self, ruleset: &str) {
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.name, "nft", "-f", "-"])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn nft");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(ruleset.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "nft failed: {}\n{ruleset}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Adds a base chain on `hook` with `rules` (separated by `;`) in its own table.
    pub fn nft_chain(&self, table: &str, hook: &str, rules: &str) {
        let rules: Vec<&str> = rules
            .split(';')
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .collect();
        self.nft(&format!(
            "table inet {table} {{\n  chain c {{\n    type filter hook {hook} priority 0; policy accept;\n    {}\n  }}\n}}\n",
            rules.join("\n    ")
        ));
    }

    /// Starts a long-running process in the namespace; it is killed when the namespace drops.
    pub fn spawn(&mut self, args: &[&str]) {
        let child = Command::new("ip")
            .args(["netns", "exec", &self.name])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {args:?}: {e}"));
        self.children.push(child);
    }

    /// Starts `probe-pod serve` and waits until it listens.
    pub fn serve(&mut self, extra: &[&str]) {
        let mut args = vec![agent_bin(), "serve"];
        args.extend_from_slice(extra);
        self.spawn(&args);
        self.wait_listening("tcp", 9917);
    }

    /// Starts dnsmasq on port 53 of `listen`, authoritative for `cluster.local` with one
    /// `--host-record` (`NAME,ADDRESS[,ADDRESS]`), and waits until it listens.
    pub fn dnsmasq(&mut self, listen: &[&str], host_record: &str) {
        let mut args = vec![
            "dnsmasq",
            "-k",
            "--no-resolv",
            "--no-hosts",
            "--conf-file=/dev/null",
        ];
        for a in listen {
            args.extend(["--listen-address", a]);
        }
        args.extend([
            "--bind-interfaces",
            "--port",
            "53",
            "--local=/cluster.local/",
            "--host-record",
            host_record,
            "--pid-file=",
            "--user=root",
            "--log-facility=-",
        ]);
        self.spawn(&args);
        self.wait_listening("udp", 53);
        self.wait_listening("tcp", 53);
    }

    /// Waits until something listens on `port` (tcp or udp) in the namespace.
    pub fn wait_listening(&self, proto: &str, port: u16) {
        let flag = if proto == "tcp" { "-Hltn" } else { "-Hlun" };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let out = self.exec(&["ss", flag, &format!("sport = :{port}")]);
            if !out.trim().is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "nothing listens on {proto}/{port} in {}",
                self.name
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Runs a plan with `probe-pod probe --plan -` in this namespace; results by id.
    pub fn probe(&self, plan: &serde_json::Value) -> HashMap<String, ProbeResult> {
        let (code, stdout, stderr) = self.probe_raw(&plan.to_string());
        assert_eq!(code, Some(0), "probe-pod probe failed: {stderr}");
        let mut out = HashMap::new();
        for line in stdout.lines() {
            let r: ProbeResult = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("bad result line {line:?}: {e}"));
            assert!(
                out.insert(r.id.clone(), r).is_none(),
                "two results for one id"
            );
        }
        out
    }

    /// Runs `probe-pod probe --plan -` with raw text; returns (exit code, stdout, stderr).
    pub fn probe_raw(&self, plan: &str) -> (Option<i32>, String, String) {
        probe_with(&["ip", "netns", "exec", &self.name], plan)
    }

    /// Opens this namespace's handle, for `setns` from a test thread.
    pub fn path(&self) -> PathBuf {
        PathBuf::from("/run/netns").join(&self.name)
    }

    /// Runs `f` on a thread inside this namespace (sockets it opens live there).
    pub fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        let ns = std::fs::File::open(self.path()).expect("open netns");
        std::thread::spawn(move || {
            nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
            f()
        })
    }

    /// The process ids running in this namespace.
    pub fn pids(&self) -> Vec<u32> {
        let out = Command::new("ip")
            .args(["netns", "pids", &self.name])
            .output()
            .expect("ip netns pids");
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    }
}

/// Raises this process's open-file limit to the hard limit (tests that hold thousands of sockets).
pub fn raise_nofile() -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard).unwrap();
    hard
}

/// A process's resident set size and its peak, in KiB, from /proc.
pub fn rss_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

impl Drop for Ns {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        // Anything else still inside (a stray child of a child) dies too.
        if let Ok(out) = Command::new("ip")
            .args(["netns", "pids", &self.name])
            .output()
        {
            for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                let _ = Command::new("kill").args(["-9", pid]).status();
            }
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// Runs `<prefix> probe-pod probe --plan -` with `plan` on stdin; returns (exit code, stdout,
/// stderr). An empty prefix runs the agent right here.
pub fn probe_with(prefix: &[&str], plan: &str) -> (Option<i32>, String, String) {
    let out = spawn_probe(prefix, plan).wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `probe-pod probe` on `plan` (given whole on stdin, then closed) behind `prefix`, running,
/// its stdout and stderr piped.
pub fn spawn_probe(prefix: &[&str], plan: &str) -> std::process::Child {
    let mut argv: Vec<&str> = prefix.to_vec();
    argv.extend([agent_bin(), "probe", "--plan", "-"]);
    let mut child = Command::new(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn probe-pod probe");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(plan.as_bytes())
        .unwrap();
    child
}

/// A veth pair between two namespaces, created directly inside them, addresses as CIDR.
pub fn link(a: &Ns, a_if: &str, a_addr: &str, b: &Ns, b_if: &str, b_addr: &str) {
    a.ip(&[
        "link", "add", a_if, "type", "veth", "peer", "name", b_if, "netns", &b.name,
    ]);
    a.ip(&["addr", "add", a_addr, "dev", a_if]);
    b.ip(&["addr", "add", b_addr, "dev", b_if]);
    a.ip(&["link", "set", a_if, "up"]);
    b.ip(&["link", "set", b_if, "up"]);
}

/// client (10.77.1.2) — router (10.77.1.1 | 10.77.2.1) — server (10.77.2.2).
pub struct Routed {
    pub client: Ns,
    pub router: Ns,
    pub server: Ns,
}

pub const CLIENT: &str = "10.77.1.2";
pub const ROUTER: &str = "10.77.1.1";
pub const SERVER: &str = "10.77.2.2";

impl Routed {
    pub fn new() -> Self {
        Self::build(false)
    }

    fn build(ipv6: bool) -> Self {
        let client = Ns::new("cli");
        let router = Ns::new("rtr");
        let server = Ns::new("srv");
        if ipv6 {
            for ns in [&client, &router, &server] {
                ns.enable_ipv6();
            }
        }
        link(
            &client,
            "eth0",
            "10.77.1.2/24",
            &router,
            "r0",
            "10.77.1.1/24",
        );
        link(
            &router,
            "r1",
            "10.77.2.1/24",
            &server,
            "eth0",
            "10.77.2.2/24",
        );
        router.sysctl("net.ipv4.ip_forward", "1");
        // These tests check how each ICMP error is classified, not the kernel's ICMP rate limit
        // (per peer, a burst of 6 then one a second): one plan draws five errors from the router
        // and the server at once, and a limited error would read as a timeout. The coordinator's
        // retry pacing is what copes with the limiter in real runs.
        for ns in [&router, &server] {
            ns.sysctl("net.ipv4.icmp_ratemask", "0");
        }
        client.ip(&["route", "add", "default", "via", ROUTER]);
        server.ip(&["route", "add", "default", "via", "10.77.2.1"]);
        Self {
            client,
            router,
            server,
        }
    }

    /// A forward-chain rule on the router: the "network firewall".
    pub fn router_rule(&self, rule: &str) {
        self.router.nft_chain("network", "forward", rule);
    }
}

/// The IPv6 addresses `Routed::dual_stack` adds: client (`fd77:1::2`) — router (`fd77:1::1` |
/// `fd77:2::1`) — server (`fd77:2::2`).
pub const CLIENT6: &str = "fd77:1::2";
pub const ROUTER6: &str = "fd77:1::1";
pub const SERVER6: &str = "fd77:2::2";

impl Routed {
    /// `Routed::new` with IPv6 as well on every link, the router forwarding both families.
    pub fn dual_stack() -> Self {
        let net = Self::build(true);
        net.client.addr6("eth0", "fd77:1::2/64");
        net.router.addr6("r0", "fd77:1::1/64");
        net.router.addr6("r1", "fd77:2::1/64");
        net.server.addr6("eth0", "fd77:2::2/64");
        net.router.sysctl("net.ipv6.conf.all.forwarding", "1");
        // As for IPv4: every ICMPv6 error is wanted, not the kernel's rate limit.
        for ns in [&net.router, &net.server] {
            ns.sysctl("net.ipv6.icmp.ratelimit", "0");
        }
        net.client
            .ip(&["-6", "route", "add", "default", "via", ROUTER6]);
        net.server
            .ip(&["-6", "route", "add", "default", "via", "fd77:2::1"]);
        net
    }
}

/// The outcome of probe `id`; panics, naming every result, when there is none.
pub fn outcome(results: &HashMap<String, ProbeResult>, id: &str) -> Outcome {
    results
        .get(id)
        .unwrap_or_else(|| panic!("no result for {id}: {results:#?}"))
        .outcome
}

/// Every probe of `want` got its outcome, and nothing else answered.
pub fn assert_outcomes(results: &HashMap<String, ProbeResult>, want: &[(&str, Outcome)]) {
    let mut wrong = Vec::new();
    for (id, o) in want {
        if outcome(results, id) != *o {
            wrong.push(format!("{id}: want {o}, got {:?}", results[*id]));
        }
    }
    assert!(wrong.is_empty(), "wrong outcomes:\n{}", wrong.join("\n"));
    assert_eq!(results.len(), want.len(), "one result per probe");
}

/// Asks the sniffer on `ns` about `flows` and `nonces`: its answer.
pub fn receipts(ns: &Ns, flows: &serde_json::Value, nonces: &[u32]) -> ProbeResult {
    let r = ns.probe(&plan(
        1000,
        serde_json::json!([{"id": "s", "kind": "seen", "flows": flows, "nonces": nonces}]),
    ));
    let s = r["s"].clone();
    assert_eq!(s.outcome, Outcome::Ok, "{s:?}");
    s
}

/// The `reply` flag of each TCP sighting of `flow` (JSON, as a plan gives it) in a `seen`
/// answer: `false` for the SYN arriving, `true` for the SYN-ACK leaving.
pub fn tcp_sightings(seen: &ProbeResult, flow: &serde_json::Value) -> Vec<bool> {
    let f: probe_pod::proto::Flow = serde_json::from_value(flow.clone()).unwrap();
    seen.seen
        .iter()
        .flatten()
        .filter(|x| x.flow == Some(f) && x.kind == probe_pod::proto::SightingKind::Tcp)
        .map(|x| x.reply)
        .collect()
}

/// The same for the UDP sightings of `nonce`: the probe arriving, its echo leaving.
pub fn udp_sightings(seen: &ProbeResult, nonce: u32) -> Vec<bool> {
    seen.seen
        .iter()
        .flatten()
        .filter(|x| x.nonce == nonce && x.kind == probe_pod::proto::SightingKind::Udp)
        .map(|x| x.reply)
        .collect()
}

/// Polls the `seen` probe on `ns` until `nonce` shows up on two interfaces (or 3 s pass): the
/// interfaces it was seen on.
pub fn seen_on(ns: &Ns, nonce: u32) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let r = ns.probe(&plan(
            1000,
            serde_json::json!([{"id": "s", "kind": "seen", "nonces": [nonce]}]),
        ));
        let s = &r["s"];
        assert_eq!(s.outcome, Outcome::Ok, "{s:?}");
        let mut ifaces: Vec<String> = s
            .seen
            .as_ref()
            .unwrap()
            .iter()
            .map(|x| x.interface.clone())
            .collect();
        ifaces.sort();
        ifaces.dedup();
        if ifaces.len() >= 2 || Instant::now() > deadline {
            return ifaces;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Flannel-style VXLAN between two nodes whose `eth0` has the `underlay` addresses (either
/// family): `flannel.1`, VNI 1, UDP 8472, MACs 02:00:00:00:00:01 and :02, VTEPs 10.244.1.0 and
/// 10.244.2.0 with each other's /24 routed through, static fdb/neigh entries.
pub fn flannel_vxlan(n1: &Ns, n2: &Ns, (u1, u2): (&str, &str)) {
    let (mac1, mac2) = ("02:00:00:00:00:01", "02:00:00:00:00:02");
    for (ns, local, mac, vtep, peer_ip, peer_mac, peer_vtep, peer_net) in [
        (
            n1,
            u1,
            mac1,
            "10.244.1.0/32",
            u2,
            mac2,
            "10.244.2.0",
            "10.244.2.0/24",
        ),
        (
            n2,
            u2,
            mac2,
            "10.244.2.0/32",
            u1,
            mac1,
            "10.244.1.0",
            "10.244.1.0/24",
        ),
    ] {
        ns.ip(&[
            "link",
            "add",
            "flannel.1",
            "address",
            mac,
            "type",
            "vxlan",
            "id",
            "1",
            "local",
            local,
            "dev",
            "eth0",
            "dstport",
            "8472",
            "nolearning",
        ]);
        ns.ip(&["addr", "add", vtep, "dev", "flannel.1"]);
        ns.ip(&["link", "set", "flannel.1", "up"]);
        ns.ip(&[
            "route",
            "add",
            peer_net,
            "via",
            peer_vtep,
            "dev",
            "flannel.1",
            "onlink",
        ]);
        ns.ip(&[
            "neigh",
            "add",
            peer_vtep,
            "lladdr",
            peer_mac,
            "dev",
            "flannel.1",
            "nud",
            "permanent",
        ]);
        ns.exec(&[
            "bridge",
            "fdb",
            "append",
            peer_mac,
            "dev",
            "flannel.1",
            "dst",
            peer_ip,
        ]);
    }
}

/// One plan with the given probes, as JSON.
#[allow(clippy::needless_pass_by_value)] // reads best at call sites: plan(800, json!([...]))
pub fn plan(timeout_ms: u64, probes: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"deadlineMs": timeout_ms * 3, "probeTimeoutMs": timeout_ms, "probes": probes})
}
