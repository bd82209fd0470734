//! Argument groups shared by several commands, flattened into each.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;
use prober::inventory::Inventory;
use prober::model::PathClass;
use prober::plan::Filter;
use prober::report::{self, Report};
use prober::runtime::kube::Discovered;
use prober::runtime::kube::deploy::Session;
use prober::runtime::kube::manifests::{DEFAULT_IMAGE, DEFAULT_NAMESPACE};

/// A duration flag: `500ms`, `2s`, `5m`; more than zero and at most a day.
pub fn duration(s: &str) -> Result<Duration, String> {
    let d = probe_proto::parse_duration(s)?;
    if d.is_zero() {
        return Err("must be more than zero".into());
    }
    if d > Duration::from_secs(86_400) {
        return Err(format!("{s:?} is more than a day"));
    }
    Ok(d)
}

/// The shortest per-probe timeout. Below it the answers are the prober's own impatience, not
/// the network's: `--timeout 1ms` once reported an active bootstrap cycle, overlay and DNS
/// errors on a healthy lab (a TLS handshake or a DNS answer across zones takes longer).
pub const MIN_PROBE_TIMEOUT: Duration = Duration::from_millis(100);

/// A per-probe timeout: a duration within what the agents accept, and long enough that a
/// timeout says something about the network.
pub fn probe_timeout(s: &str) -> Result<Duration, String> {
    let d = duration(s)?;
    if d < MIN_PROBE_TIMEOUT {
        return Err(format!(
            "{s:?} is shorter than {} ms: a probe that short times out on a healthy network, and \
             its result would be the prober's, not the network's",
            MIN_PROBE_TIMEOUT.as_millis()
        ));
    }
    let max = Duration::from_millis(probe_proto::MAX_PROBE_TIMEOUT_MS);
    if d > max {
        return Err(format!(
            "{s:?} is more than the agents accept ({} s)",
            max.as_secs()
        ));
    }
    Ok(d)
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Output {
    Table,
    Json,
    Junit,
    /// Prometheus text exposition (metrics of the run; labels: path class, outcome, finding
    /// kind, severity, node at most).
    Prometheus,
    /// One self-contained HTML page: findings, a heatmap per path class, failures, the run.
    Html,
}

#[derive(clap::Args)]
pub struct OutputArgs {
    /// Output format.
    #[arg(short, long, env = "PROBER_OUTPUT", value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Width of the table: by default $COLUMNS, else the terminal's width, else 100 columns.
    /// Long lines are wrapped, never cut.
    #[arg(long, env = "PROBER_WIDTH", value_parser = clap::value_parser!(u16).range(40..))]
    pub width: Option<u16>,
}

/// When stdout is no terminal and nothing says otherwise.
const DEFAULT_WIDTH: usize = 100;

/// The table's width: `--width`, else `COLUMNS` (what shells export), else the terminal's,
/// else [`DEFAULT_WIDTH`]. A `COLUMNS` that is not a number is ignored.
#[must_use]
pub fn table_width(flag: Option<u16>, columns: Option<&str>, tty: Option<u16>) -> usize {
    flag.map(usize::from)
        .or_else(|| {
            columns
                .and_then(|c| c.trim().parse::<usize>().ok())
                .filter(|&c| c >= 20)
        })
        .or(tty.map(usize::from).filter(|&c| c >= 20))
        .unwrap_or(DEFAULT_WIDTH)
}

impl OutputArgs {
    /// The width the table is written for (see [`table_width`]).
    #[must_use]
    pub fn width(&self) -> usize {
        table_width(
            self.width,
            std::env::var("COLUMNS").ok().as_deref(),
            console::Term::stdout().size_checked().map(|(_, cols)| cols),
        )
    }

    /// The report in the chosen format, of a run that just finished.
    #[must_use]
    pub fn render(&self, report: &Report) -> String {
        self.render_finished(report, super::export::now())
    }

    /// Writes the report in the chosen format to `out`; JSON is streamed as it is serialised, not
    /// built in memory first.
    pub fn write_finished(
        &self,
        report: &Report,
        finished: u64,
        out: impl std::io::Write,
    ) -> std::io::Result<()> {
        if let Output::Json = self.output {
            return report.write_json(out);
        }
        let mut out = out;
        out.write_all(self.render_finished(report, finished).as_bytes())?;
        out.flush()
    }

    /// The report in the chosen format, of a run that finished at `finished` (seconds since the
    /// epoch; the report itself carries no clock).
    #[must_use]
    pub fn render_finished(&self, report: &Report, finished: u64) -> String {
        match self.output {
            Output::Table => {
                let color = std::io::stdout().is_terminal()
                    && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
                report::table(
                    report,
                    report::Style {
                        color,
                        width: self.width(),
                    },
                )
            }
            Output::Json => report.to_json() + "\n",
            Output::Junit => report::junit(report),
            Output::Prometheus => report::prometheus::render(report, finished),
            Output::Html => report::html(report, finished),
        }
    }
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum LogFormat {
    /// Messages for a person on stderr.
    Text,
    /// Also one JSON line on stderr with the run's summary, for a Job's log collector.
    Json,
}

/// Where the run's metrics and summary go besides stdout: suited to a `CronJob`.
#[derive(clap::Args, Clone)]
pub struct ExportArgs {
    /// Push the run's Prometheus metrics to this Pushgateway (`http://HOST:PORT`), replacing the
    /// group `job="prober"` (PUT to URL/metrics/job/prober). Plain HTTP only.
    #[arg(long, env = "PROBER_PUSHGATEWAY", value_name = "URL", value_parser = super::export::push_url)]
    pub pushgateway: Option<super::export::PushUrl>,
    /// Deadline of the push (connect, send, answer).
    #[arg(long, env = "PROBER_PUSHGATEWAY_TIMEOUT", default_value = "10s", value_parser = duration)]
    pub pushgateway_timeout: Duration,
    /// `json`: one JSON line on stderr with the run's summary when it ends.
    #[arg(long, env = "PROBER_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// The scheduled mode's memory between runs.
#[derive(clap::Args, Clone)]
pub struct RememberArgs {
    /// Compare with the run remembered in the cluster (the `ConfigMap` `prober-last-report` in the
    /// agents' namespace), emit a Kubernetes Event per new and resolved finding there, and
    /// remember this run in its place. Needs the Kubernetes runtime (not --inventory).
    #[arg(long, env = "PROBER_REMEMBER")]
    pub remember: bool,
}

#[derive(clap::Args, Clone)]
pub struct KubeArgs {
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or the in-cluster service account).
    #[arg(long, env = "PROBER_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use.
    #[arg(long, env = "PROBER_CONTEXT")]
    pub context: Option<String>,
}

impl KubeArgs {
    /// Discovers the cluster for agents in `agents_namespace` (the policies that can select
    /// them are that namespace's), saying on stderr (as `command`) what discovery could not
    /// read or had to guess.
    pub async fn discover(
        &self,
        command: &str,
        agents_namespace: &str,
    ) -> Result<Discovered, super::CliError> {
        let found = prober::runtime::kube::discover(
            self.kubeconfig.as_deref(),
            self.context.as_deref(),
            agents_namespace,
        )
        .await?;
        super::discover::warn_discovered(command, &found);
        Ok(found)
    }
}

#[derive(clap::Args, Clone)]
pub struct AgentArgs {
    /// Namespace of the agents.
    #[arg(long, short = 'n', env = "PROBER_NAMESPACE", default_value = DEFAULT_NAMESPACE)]
    pub namespace: String,
    /// Agent image.
    #[arg(long, env = "PROBER_IMAGE", default_value = DEFAULT_IMAGE)]
    pub image: String,
    /// Leave the agents running afterwards (remove them with `prober cleanup`).
    #[arg(long, env = "PROBER_KEEP_AGENTS")]
    pub keep_agents: bool,
    /// Use agents already installed from deploy/ (the scheduled mode): create and remove nothing.
    /// Chosen by itself when they are installed; with the flag, their absence is an error.
    #[arg(long, env = "PROBER_USE_EXISTING")]
    pub use_existing: bool,
    /// How long to wait for the agents to become ready before probing with those that are.
    #[arg(long, env = "PROBER_AGENT_WAIT", default_value = "90s", value_parser = duration)]
    pub agent_wait: Duration,
    /// A Secret (in the agents' namespace) the kubelet pulls the agents' image with, for a
    /// private registry; repeat it for more.
    #[arg(
        long = "image-pull-secret",
        env = "PROBER_IMAGE_PULL_SECRETS",
        value_delimiter = ','
    )]
    pub image_pull_secrets: Vec<String>,
    /// The port this run's own host agents serve on (TCP and UDP, on each node's host
    /// network). Default: 9917, or, when other live prober host agents (another run's, or
    /// deploy/base's) hold it, the next port none of them holds. Where a firewall guards the
    /// nodes, it must be open to the pod range for the pod-to-node probes.
    #[arg(long, env = "PROBER_HOST_AGENT_PORT", value_parser = clap::value_parser!(u16).range(1..), conflicts_with = "use_existing")]
    pub host_agent_port: Option<u16>,
}

impl AgentArgs {
    /// The agents' session as these flags ask for it: this run's own objects (named by a fresh
    /// run id) exit by themselves after `ttl`, and removing them may take `cleanup_deadline`.
    pub fn session(&self, ttl: &str, cleanup_deadline: Duration) -> Session {
        Session {
            namespace: self.namespace.clone(),
            image: self.image.clone(),
            use_existing: self.use_existing,
            keep_agents: self.keep_agents,
            wait: self.agent_wait,
            run_id: run_id(),
            ttl: ttl.into(),
            cleanup_deadline,
            image_pull_secrets: self.image_pull_secrets.clone(),
            host_port: self.host_agent_port,
        }
    }
}

/// A run id: unique enough that two runs (from two machines) never share objects, short
/// enough for object names.
fn run_id() -> String {
    let secs = probe_proto::util::unix_secs();
    format!(
        "r{:06x}{:04x}",
        secs & 0xff_ffff,
        std::process::id() & 0xffff
    )
}

/// Which paths and nodes to probe.
#[derive(clap::Args, Clone, Default)]
pub struct FilterArgs {
    /// Only these path classes (comma-separated).
    #[arg(long, env = "PROBER_PATHS", value_enum, value_delimiter = ',')]
    pub paths: Vec<PathClass>,
    /// Skip these path classes (comma-separated).
    #[arg(long, env = "PROBER_SKIP_PATHS", value_enum, value_delimiter = ',')]
    pub skip_paths: Vec<PathClass>,
    /// Only probes from or to these nodes (comma-separated).
    #[arg(long, env = "PROBER_NODES", value_delimiter = ',')]
    pub nodes: Vec<String>,
}

impl FilterArgs {
    #[must_use]
    pub fn filter(&self) -> Filter {
        Filter {
            paths: self.paths.clone(),
            skip_paths: self.skip_paths.clone(),
            nodes: self.nodes.clone(),
            sample: None,
        }
    }
}

/// How the probes run.
#[derive(clap::Args, Clone)]
pub struct ProbeArgs {
    /// The agent binary as each exec prefix sees it (default: `probe-pod` next to this program,
    /// else on the PATH).
    #[arg(long, env = "PROBER_AGENT_BIN")]
    pub agent_bin: Option<String>,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Deadline of each probe (e.g. 2s, 500ms; at least 100ms, at most 10m, the agents' limit).
    #[arg(long, env = "PROBER_TIMEOUT", default_value = "2s", value_parser = probe_timeout)]
    pub timeout: Duration,
    /// Agents probing at once (default: every agent, up to 512 and to what the open-file limit
    /// allows).
    #[arg(long, env = "PROBER_CONCURRENCY",
          value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrency: Option<u16>,
    /// Also write the JSON report to this file.
    #[arg(long, env = "PROBER_SAVE")]
    pub save: Option<PathBuf>,
    /// No progress bar, even on a terminal.
    #[arg(long, env = "PROBER_NO_PROGRESS")]
    pub no_progress: bool,
    /// For very large clusters: probe between nodes only a sample, every node to and from at
    /// least K peers, with every pair of zones (`topology.kubernetes.io/zone`, else the /24
    /// subnet) covered; every node still probes every API and DNS endpoint. `auto`: as many
    /// peers as --memory-budget allows (the whole matrix when it fits). The report says what was
    /// sampled; with --remember, successive runs rotate through every node pair.
    #[arg(long, env = "PROBER_SAMPLE", value_name = "K|auto", value_parser = sample_size)]
    pub sample: Option<SampleSize>,
    /// The memory `--sample auto` sizes the run to, in MiB (the scheduled `CronJob` passes its
    /// own memory limit). Default: the least of this container's cgroup limit, the address-space
    /// limit and the memory available.
    #[arg(long, env = "PROBER_MEMORY_BUDGET", value_name = "MiB",
          value_parser = clap::value_parser!(u32).range(32..))]
    pub memory_budget: Option<u32>,
}

/// `--sample`: K peers per node, or as many as the memory budget allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleSize {
    Peers(u16),
    Auto,
}

fn sample_size(s: &str) -> Result<SampleSize, String> {
    if s == "auto" {
        return Ok(SampleSize::Auto);
    }
    match s.parse::<u16>() {
        Ok(k) if k >= 1 => Ok(SampleSize::Peers(k)),
        _ => Err(format!(
            "expected `auto` or a number of peers from 1 to {}, not {s:?}",
            u16::MAX
        )),
    }
}

impl ProbeArgs {
    /// Defaults, for commands that run the matrix themselves (`lab run`).
    #[must_use]
    pub fn with_agent(agent_bin: String, save: Option<PathBuf>) -> Self {
        Self {
            agent_bin: Some(agent_bin),
            filter: FilterArgs::default(),
            timeout: Duration::from_secs(2),
            concurrency: None,
            save,
            no_progress: false,
            sample: None,
            memory_budget: None,
        }
    }

    /// The agent binary: the flag, else the inventory's `agentBin`, else `probe-pod` beside this
    /// program when it exists there, else `probe-pod` on the PATH of wherever the exec prefix
    /// runs it.
    #[must_use]
    pub fn agent_bin(&self, inv: &Inventory) -> String {
        let chosen = self.agent_bin.clone().or_else(|| inv.agent_bin.clone());
        chosen.unwrap_or_else(|| {
            let beside = sibling("probe-pod");
            if beside.is_file() {
                beside.display().to_string()
            } else {
                "probe-pod".to_string()
            }
        })
    }
}

/// A program next to this one.
#[must_use]
pub fn sibling(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join(name)))
        .unwrap_or_else(|| PathBuf::from(name))
}

#[cfg(test)]
mod tests {
    use super::{SampleSize, probe_timeout, sample_size, table_width};

    #[test]
    fn sample_is_a_number_of_peers_or_auto() {
        assert_eq!(sample_size("3"), Ok(SampleSize::Peers(3)));
        assert_eq!(sample_size("auto"), Ok(SampleSize::Auto));
        for bad in ["0", "-1", "Auto", "70000", ""] {
            let e = sample_size(bad).unwrap_err();
            assert!(
                e.contains("expected `auto` or a number of peers"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn a_timeout_too_short_to_mean_anything_is_refused() {
        for short in ["1ms", "99ms"] {
            let e = probe_timeout(short).unwrap_err();
            assert!(e.contains("shorter than 100 ms"), "{short}: {e}");
        }
        assert_eq!(
            probe_timeout("100ms").unwrap(),
            std::time::Duration::from_millis(100)
        );
        assert!(probe_timeout("11m").is_err());
    }

    #[test]
    fn width_from_flag_then_columns_then_terminal() {
        assert_eq!(table_width(Some(80), Some("200"), Some(150)), 80);
        assert_eq!(table_width(None, Some("160"), Some(80)), 160);
        assert_eq!(table_width(None, Some("wide"), Some(132)), 132);
        assert_eq!(table_width(None, None, Some(80)), 80);
        assert_eq!(table_width(None, None, None), 100);
    }
}
