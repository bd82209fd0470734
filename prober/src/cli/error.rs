//! Why a command could not do its job: the layers' own errors kept whole (their causes reachable
//! through `source()`), the exit code chosen in one `match`, and the message with its chain of
//! causes as the user reads it.

use std::error::Error;
use std::path::PathBuf;

use probe_proto::files::ReadError;
use prober::inventory::InventoryError;
use prober::lab::LabError;
use prober::lab::apiserver::ApiServerError;
use prober::lab::scenario::ScenarioError;
use prober::report::{EXIT_INTERRUPTED, EXIT_USAGE, ReportError};
use prober::runtime::kube::ConnectError;
use prober::runtime::kube::deploy::{DeployError, SessionError};
use prober::runtime::standins::StandinError;

/// Why a command could not do its job. Every variant has its exit code in
/// [`CliError::exit_code`]; the message names the file, flag or peer.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Flags the command refuses, in its own words (the message names the flag).
    #[error("{0}")]
    Usage(String),
    /// A flag whose value a layer refused: the flag, then the layer's error as the cause.
    #[error("{flag}")]
    Flag {
        flag: String,
        #[source]
        source: Box<dyn Error + Send + Sync>,
    },
    /// The environment does not allow the job, in the command's own words.
    #[error("{0}")]
    Environment(String),
    /// A file or stream the command writes (`--save`, standard output).
    #[error("cannot write {what}")]
    Write {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// Something the command needs from this machine (its hostname, a route).
    #[error("{what}")]
    Local {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// An input file that cannot be read.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A saved report that is not one.
    #[error("{}", path.display())]
    SavedReport {
        path: PathBuf,
        #[source]
        source: ReportError,
    },
    #[error(transparent)]
    Inventory(Box<InventoryError>),
    #[error(transparent)]
    Scenario(Box<ScenarioError>),
    /// No cluster to reach, or it cannot be read.
    #[error(transparent)]
    Connect(Box<ConnectError>),
    #[error(transparent)]
    Deploy(Box<DeployError>),
    /// SIGINT or SIGTERM while the agents were being created or waited for: nothing to report.
    #[error("interrupted while creating or waiting for the agents")]
    Interrupted,
    #[error(transparent)]
    Standins(Box<StandinError>),
    #[error(transparent)]
    Lab(Box<LabError>),
    #[error(transparent)]
    ApiServer(Box<ApiServerError>),
    /// The scheduled mode's manifests could not be rendered from deploy/.
    #[error("--scheduled: {0}")]
    Kustomize(String),
    /// The inventory could not be written as JSON.
    #[error("cannot write the inventory as JSON")]
    Json(#[source] serde_json::Error),
}

impl CliError {
    /// The process's exit code (docs/design.md, "Contracts"): 130 when interrupted, else 2
    /// (usage or environment).
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Interrupted => EXIT_INTERRUPTED,
            Self::Usage(_)
            | Self::Flag { .. }
            | Self::Read(_)
            | Self::SavedReport { .. }
            | Self::Inventory(_)
            | Self::Scenario(_)
            | Self::Environment(_)
            | Self::Write { .. }
            | Self::Local { .. }
            | Self::Connect(_)
            | Self::Deploy(_)
            | Self::Standins(_)
            | Self::Lab(_)
            | Self::ApiServer(_)
            | Self::Kustomize(_)
            | Self::Json(_) => EXIT_USAGE,
        }
    }

    /// A flag's value refused by a layer.
    pub fn flag(flag: impl Into<String>, source: impl Error + Send + Sync + 'static) -> Self {
        Self::Flag {
            flag: flag.into(),
            source: Box::new(source),
        }
    }

    /// `--save` could not write `path`.
    #[must_use]
    pub fn save(path: &std::path::Path, source: std::io::Error) -> Self {
        Self::Write {
            what: format!("--save {}", path.display()),
            source,
        }
    }
}

/// An agent session's end without the body's answer; the body's own error as it is.
impl<E> From<SessionError<E>> for CliError
where
    CliError: From<E>,
{
    fn from(e: SessionError<E>) -> Self {
        match e {
            SessionError::Deploy(d) => d.into(),
            SessionError::Interrupted => Self::Interrupted,
            SessionError::Body(b) => b.into(),
        }
    }
}

/// The layers' errors, boxed: some are large, and every command returns this type.
macro_rules! boxed {
    ($($t:ty => $v:ident),* $(,)?) => {$(
        impl From<$t> for CliError {
            fn from(e: $t) -> Self {
                Self::$v(Box::new(e))
            }
        }
    )*};
}

boxed! {
    InventoryError => Inventory,
    ScenarioError => Scenario,
    ConnectError => Connect,
    DeployError => Deploy,
    StandinError => Standins,
    LabError => Lab,
    ApiServerError => ApiServer,
}

impl From<std::convert::Infallible> for CliError {
    fn from(e: std::convert::Infallible) -> Self {
        match e {}
    }
}

/// The message and every cause under it, each once: a cause a message already quotes (most of
/// the layers' messages end with their cause) is not repeated, and a message that already quotes
/// the root cause has said it in its own words (the Kubernetes layer's "the cluster was not
/// reached: connection refused ... [os error]"), so the library layers between are not added.
#[must_use]
pub fn with_causes(e: &(dyn Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut causes = Vec::new();
    let mut cause = e.source();
    while let Some(c) = cause {
        causes.push(c.to_string());
        cause = c.source();
    }
    if causes
        .last()
        .is_some_and(|root| !root.is_empty() && text.contains(root.as_str()))
    {
        return text;
    }
    for said in causes {
        if !said.is_empty() && !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Error as IoError, ErrorKind};

    #[test]
    fn the_cause_is_printed_once_after_the_message() {
        let e = CliError::save(
            std::path::Path::new("/nowhere/r.json"),
            IoError::new(
                ErrorKind::NotFound,
                "No such file or directory (os error 2)",
            ),
        );
        assert_eq!(
            with_causes(&e),
            "cannot write --save /nowhere/r.json: No such file or directory (os error 2)"
        );
        // A layer's message that already ends with its cause is not repeated.
        let e = CliError::from(ReadError::Io {
            what: "inventory",
            name: "/x.yaml".into(),
            source: IoError::new(ErrorKind::PermissionDenied, "Permission denied"),
        });
        assert_eq!(
            with_causes(&e),
            "cannot read inventory /x.yaml: Permission denied"
        );
        let e = CliError::flag(
            "--nodes 0",
            IoError::new(ErrorKind::InvalidInput, "at least 2"),
        );
        assert_eq!(with_causes(&e), "--nodes 0: at least 2");
    }

    /// A link of a cause chain, for the chain tests.
    #[derive(Debug)]
    struct Link(&'static str, Option<Box<Link>>);

    impl std::fmt::Display for Link {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Error for Link {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1.as_deref().map(|l| l as &(dyn Error + 'static))
        }
    }

    #[test]
    fn a_message_quoting_its_root_cause_adds_no_library_layers() {
        let root = Link("Connection refused (os error 111)", None);
        let tcp = Link("tcp connect error", Some(Box::new(root)));
        let hyper = Link("client error (Connect)", Some(Box::new(tcp)));
        let worded = Link(
            "the cluster was not reached: connection refused [Connection refused (os error 111)]",
            Some(Box::new(hyper)),
        );
        assert_eq!(
            with_causes(&worded),
            "the cluster was not reached: connection refused [Connection refused (os error 111)]"
        );
        // Without the root in the message, every layer is said once.
        let root = Link("Connection refused (os error 111)", None);
        let tcp = Link("tcp connect error", Some(Box::new(root)));
        let plain = Link("cannot list nodes", Some(Box::new(tcp)));
        assert_eq!(
            with_causes(&plain),
            "cannot list nodes: tcp connect error: Connection refused (os error 111)"
        );
    }

    #[test]
    fn an_interrupted_session_exits_130_and_a_refused_deploy_2() {
        let interrupted: SessionError<std::convert::Infallible> = SessionError::Interrupted;
        assert_eq!(CliError::from(interrupted).exit_code(), EXIT_INTERRUPTED);
        let refused: SessionError<CliError> = SessionError::Deploy(DeployError::Deadline {
            what: "create the agents".into(),
            secs: 9,
        });
        let e = CliError::from(refused);
        assert!(matches!(e, CliError::Deploy(_)), "{e:?}");
        assert_eq!(e.exit_code(), EXIT_USAGE);
        let body: SessionError<CliError> = SessionError::Body(CliError::Interrupted);
        assert_eq!(CliError::from(body).exit_code(), EXIT_INTERRUPTED);
    }
}
