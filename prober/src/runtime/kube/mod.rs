//! The Kubernetes runtime: discovery, the agents as `DaemonSets`, and (next) probing through
//! `pods/exec`, which works while the pod network, `ClusterIPs` and DNS are broken.

pub mod deploy;
pub mod discover;
pub mod events;
pub mod exec;
pub mod manifests;
pub mod memory;
pub mod words;

use std::path::Path;
use std::time::Duration;

use kube::config::{Config, KubeConfigOptions, Kubeconfig};

/// Connecting gives up after this: a cluster that cannot be reached is reported within seconds.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot load the kubeconfig {source_name}: {message}")]
    Config {
        source_name: String,
        message: String,
    },
    #[error(
        "no kubeconfig here ({source_name}): pass --kubeconfig FILE (or set KUBECONFIG) to reach \
         a cluster, --inventory FILE to probe hosts you list, or try it without a cluster: \
         `prober lab up` then `prober matrix --inventory` on what it prints [{message}]"
    )]
    NoKubeconfig {
        source_name: String,
        message: String,
    },
    #[error("cannot reach the cluster at {server} (from {source_name}): {message}")]
    Unreachable {
        server: String,
        source_name: String,
        message: String,
    },
    #[error("cannot use the cluster at {server} (from {source_name}): {source}")]
    Discover {
        server: String,
        source_name: String,
        source: discover::DiscoverError,
    },
}

/// A client from `--kubeconfig`/`--context`, `KUBECONFIG`, `~/.kube/config`, or the in-cluster
/// service account, in that order; and a description of where it came from.
pub async fn client(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<(kube::Client, String, String), ConnectError> {
    let options = KubeConfigOptions {
        context: context.map(String::from),
        ..KubeConfigOptions::default()
    };
    let config_err = |source_name: &str| {
        let source_name = source_name.to_string();
        move |e: &dyn std::fmt::Display| ConnectError::Config {
            source_name: source_name.clone(),
            message: e.to_string(),
        }
    };
    let (config, source_name) = match kubeconfig {
        Some(path) => {
            let source_name = path.display().to_string();
            let err = config_err(&source_name);
            let kc = Kubeconfig::read_from(path).map_err(|e| err(&e))?;
            (
                Config::from_custom_kubeconfig(kc, &options)
                    .await
                    .map_err(|e| err(&e))?,
                source_name,
            )
        }
        None if context.is_some() => {
            let source_name =
                std::env::var("KUBECONFIG").unwrap_or_else(|_| "~/.kube/config".into());
            let err = config_err(&source_name);
            (
                Config::from_kubeconfig(&options)
                    .await
                    .map_err(|e| err(&e))?,
                source_name,
            )
        }
        None => {
            let source_name = std::env::var("KUBECONFIG")
                .unwrap_or_else(|_| "~/.kube/config or the in-cluster service account".into());
            // None at all (no KUBECONFIG, no ~/.kube/config, not in a pod) is the new user's
            // case: say the ways forward. A kubeconfig that exists but is broken says what broke.
            let none = std::env::var_os("KUBECONFIG").is_none()
                && !std::env::var_os("HOME")
                    .is_some_and(|h| Path::new(&h).join(".kube/config").exists());
            let config = Config::infer().await.map_err(|e| {
                if none {
                    ConnectError::NoKubeconfig {
                        source_name: source_name.clone(),
                        message: e.to_string(),
                    }
                } else {
                    config_err(&source_name)(&e)
                }
            })?;
            (config, source_name)
        }
    };
    let mut config = config;
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = Some(Duration::from_secs(30));
    let server = config.cluster_url.to_string();
    let client = kube::Client::try_from(config).map_err(|e| ConnectError::Unreachable {
        server: server.clone(),
        source_name: source_name.clone(),
        message: e.to_string(),
    })?;
    Ok((client, server, source_name))
}

/// What discovery found: the client it used, the inventory, and what it was not allowed to read
/// (the inventory is partial there; say so).
pub struct Discovered {
    pub client: kube::Client,
    pub inventory: crate::inventory::Inventory,
    pub forbidden: Vec<String>,
}

/// Connects and discovers, naming the kubeconfig and server when the cluster cannot be reached
/// or read. Discovery keeps its own deadlines, which grow with the cluster's size.
pub async fn discover(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<Discovered, ConnectError> {
    let (client, server, source_name) = client(kubeconfig, context).await?;
    let read = |e| ConnectError::Discover {
        server: server.clone(),
        source_name: source_name.clone(),
        source: e,
    };
    let raw = discover::read(&client).await.map_err(read)?;
    let inventory = discover::build(&raw).map_err(read)?;
    Ok(Discovered {
        client,
        inventory,
        forbidden: raw.forbidden,
    })
}
