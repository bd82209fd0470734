//! The Kubernetes runtime: discovery, the agents as `DaemonSets`, and (next) probing through
//! `pods/exec`, which works while the pod network, `ClusterIPs` and DNS are broken.

pub mod deploy;
pub mod discover;
pub mod events;
pub mod exec;
pub mod kustomize;
pub mod manifests;
pub mod memory;
pub mod plugin;
pub mod proxy;
pub mod refresh;
pub mod token;
pub mod words;

use std::path::Path;
use std::time::Duration;

use kube::config::{Config, KubeConfigOptions, Kubeconfig};

/// Connecting gives up after this: a cluster that cannot be reached is reported within seconds.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Each single API request (a get, a list page, a create, a delete, opening a watch or an
/// exec session) gives up after this; the client itself has no read timeout.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// The largest `--kubeconfig` read: one with hundreds of contexts and embedded certificates is
/// well under a MiB.
pub const MAX_KUBECONFIG_BYTES: u64 = 16 << 20;

/// The largest file a kubeconfig points to that is read (a CA bundle, a client certificate or
/// key, a token): a CA bundle with every public root is about 200 KiB.
pub const MAX_REFERENCED_BYTES: u64 = 1 << 20;

/// A `--kubeconfig` file that could not be read or parsed.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigReadError {
    #[error(transparent)]
    Read(#[from] probe_proto::files::ReadError),
    #[error("{}: {source}", path.display())]
    Parse {
        path: std::path::PathBuf,
        source: kube::config::KubeconfigError,
    },
    #[error("{}: cannot merge it into the kubeconfigs before it in KUBECONFIG: {source}", path.display())]
    Merge {
        path: std::path::PathBuf,
        source: kube::config::KubeconfigError,
    },
    #[error("{source_name}: the {field} of {entry}: {source}")]
    Referenced {
        source_name: String,
        entry: String,
        field: &'static str,
        source: probe_proto::files::ReadError,
    },
    /// A token kube would panic on: named by where it came from, never shown.
    #[error("{source_name}: the token of {entry} cannot be sent in an HTTP header: {reason}")]
    Token {
        source_name: String,
        entry: String,
        reason: token::BadToken,
    },
    #[error(
        "{source_name}: the tokenFile {path} of {entry} cannot be sent in an HTTP header: {reason}"
    )]
    TokenFile {
        source_name: String,
        entry: String,
        path: String,
        reason: token::BadToken,
    },
}

/// The kubeconfig `Kubeconfig::read` would load when no `--kubeconfig` is given, read through
/// [`read_kubeconfig`] so every file is capped: each file of `KUBECONFIG` (`kubeconfig_env`, a
/// path list) merged in order, as kube merges them, else `~/.kube/config` under `home`. `None`
/// when neither names a file that exists (the in-cluster service account is the next choice).
pub fn read_default_kubeconfig(
    kubeconfig_env: Option<&std::ffi::OsStr>,
    home: Option<&Path>,
) -> Result<Option<(Kubeconfig, String)>, KubeconfigReadError> {
    let paths: Vec<std::path::PathBuf> = kubeconfig_env
        .map(|v| {
            std::env::split_paths(v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default();
    if paths.is_empty() {
        let Some(path) = home.map(|h| h.join(".kube/config")).filter(|p| p.exists()) else {
            return Ok(None);
        };
        let kc = read_kubeconfig(&path)?;
        return Ok(Some((kc, path.display().to_string())));
    }
    let mut merged = Kubeconfig::default();
    for path in &paths {
        let next = read_kubeconfig(path)?;
        merged = merged
            .merge(next)
            .map_err(|source| KubeconfigReadError::Merge {
                path: path.clone(),
                source,
            })?;
    }
    let name = std::env::join_paths(&paths).map_or_else(
        |_| paths[0].display().to_string(),
        |v| v.to_string_lossy().into_owned(),
    );
    Ok(Some((merged, name)))
}

/// The kubeconfig at `path`, read once and capped, with its relative file references (CA,
/// client certificate and key, token file, an exec command with a path) made relative to its
/// directory, as `Kubeconfig::read_from` and kubectl resolve them.
pub fn read_kubeconfig(path: &Path) -> Result<Kubeconfig, KubeconfigReadError> {
    let text = probe_proto::files::read_text_capped(
        path,
        MAX_KUBECONFIG_BYTES,
        "kubeconfig",
        path.display(),
    )?;
    let mut kc = Kubeconfig::from_yaml(&text).map_err(|source| KubeconfigReadError::Parse {
        path: path.into(),
        source,
    })?;
    let Some(dir) = path.parent() else {
        return Ok(kc);
    };
    let absolute = |file: &mut Option<String>| {
        if let Some(f) = file.as_deref().filter(|f| Path::new(f).is_relative())
            && let Some(abs) = dir.join(f).to_str()
        {
            *file = Some(abs.to_string());
        }
    };
    for c in kc.clusters.iter_mut().filter_map(|n| n.cluster.as_mut()) {
        absolute(&mut c.certificate_authority);
    }
    for a in kc
        .auth_infos
        .iter_mut()
        .filter_map(|n| n.auth_info.as_mut())
    {
        absolute(&mut a.client_certificate);
        absolute(&mut a.client_key);
        absolute(&mut a.token_file);
        // A bare command (`aws`) is looked up in PATH, as client-go does; only a path is fixed.
        if let Some(exec) = a.exec.as_mut()
            && exec
                .command
                .as_deref()
                .is_some_and(|c| c.contains(std::path::MAIN_SEPARATOR))
        {
            absolute(&mut exec.command);
        }
    }
    Ok(kc)
}

/// The credentials of the kubeconfig's `context`, ready for kube: the files it points to read
/// capped ([`inline_files`]), its exec plugin run under its bounds ([`plugin::run_plugin`]):
/// that plugin and its token when it hands out tokens.
async fn credentials(
    kc: &mut Kubeconfig,
    context: Option<&str>,
    source_name: &str,
) -> Result<Option<Plugged>, Box<dyn std::error::Error + Send + Sync>> {
    inline_files(kc, context, source_name)?;
    Ok(plugin::run_plugin(kc, context, source_name, plugin::PLUGIN_TIMEOUT).await?)
}

/// An exec plugin and the token it handed out.
type Plugged = (plugin::Plugin, refresh::Token);

/// The client for `config`; with a plugin's token, that token is put on each request by
/// [`refresh::RefreshLayer`] (and fetched again) instead of by kube, which would keep it.
fn build(mut config: Config, plugged: Option<Plugged>) -> Result<kube::Client, kube::Error> {
    let Some((plugin, first)) = plugged else {
        return kube::Client::try_from(config);
    };
    config.auth_info.token = None;
    let plugin = std::sync::Arc::new(plugin);
    let fetch: refresh::Fetch = std::sync::Arc::new(move || {
        let plugin = plugin.clone();
        Box::pin(async move { plugin.token().await.map_err(Into::into) })
    });
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&refresh::RefreshLayer::new(first, fetch))
        .build())
}

/// The kubeconfig's `context`, else its current one; `None` when it names none that exists
/// (kube then says so itself).
#[must_use]
pub fn context_of(kc: &Kubeconfig, context: Option<&str>) -> Option<kube::config::Context> {
    let name = context.or(kc.current_context.as_deref())?;
    kc.contexts
        .iter()
        .find(|c| c.name == name)
        .and_then(|c| c.context.clone())
}

/// Reads the files the kubeconfig's `context` (else its current one) points to (its cluster's
/// CA, its user's client certificate, key and token file) through the same capped,
/// regular-file-only reader as the kubeconfig itself, and puts their contents in their place
/// (`*-data`, `token`): kube would read them whole, and `/dev/zero` there would take all the
/// memory there is. Other contexts' files are not read. A token file is read once: a run lasts
/// minutes, far less than any rotation.
pub fn inline_files(
    kc: &mut Kubeconfig,
    context: Option<&str>,
    source_name: &str,
) -> Result<(), KubeconfigReadError> {
    use base64::Engine as _;
    let Some(ctx) = context_of(kc, context) else {
        return Ok(());
    };
    let read = |file: &str, entry: &str, field: &'static str| {
        probe_proto::files::read_text_capped(Path::new(file), MAX_REFERENCED_BYTES, field, file)
            .map_err(|source| KubeconfigReadError::Referenced {
                source_name: source_name.to_string(),
                entry: entry.to_string(),
                field,
                source,
            })
    };
    let b64 = |text: String| base64::engine::general_purpose::STANDARD.encode(text);
    for n in kc.clusters.iter_mut().filter(|n| n.name == ctx.cluster) {
        let entry = format!("cluster {}", n.name);
        let Some(c) = n.cluster.as_mut() else {
            continue;
        };
        if let Some(f) = c.certificate_authority.take()
            && c.certificate_authority_data.is_none()
        {
            c.certificate_authority_data = Some(b64(read(&f, &entry, "certificate-authority")?));
        }
    }
    let user = ctx.user.unwrap_or_default();
    for n in kc.auth_infos.iter_mut().filter(|n| n.name == user) {
        let entry = format!("user {}", n.name);
        let Some(a) = n.auth_info.as_mut() else {
            continue;
        };
        if let Some(f) = a.client_certificate.take()
            && a.client_certificate_data.is_none()
        {
            a.client_certificate_data = Some(b64(read(&f, &entry, "client-certificate")?));
        }
        if let Some(f) = a.client_key.take()
            && a.client_key_data.is_none()
        {
            a.client_key_data = Some(b64(read(&f, &entry, "client-key")?).into());
        }
        // `token` wins over `tokenFile`, as kube and client-go read them. A file's token is
        // trimmed of surrounding whitespace (its final newline), as client-go's
        // `fileTokenSource` does; what is left must be a header value, like any token.
        if let Some(f) = a.token_file.take()
            && a.token.is_none()
        {
            let text = read(&f, &entry, "tokenFile")?;
            let t = text.trim();
            token::check(t).map_err(|reason| KubeconfigReadError::TokenFile {
                source_name: source_name.to_string(),
                entry: entry.clone(),
                path: f.clone(),
                reason,
            })?;
            a.token = Some(t.to_string().into());
        } else if let Some(t) = a.token.as_ref() {
            use secrecy::ExposeSecret as _;
            token::check(t.expose_secret()).map_err(|reason| KubeconfigReadError::Token {
                source_name: source_name.to_string(),
                entry: entry.clone(),
                reason,
            })?;
        }
    }
    Ok(())
}

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
    /// Said by scheme, host and port alone: the URL may hold a password.
    #[error("cannot use the proxy {proxy} (from {source_name}): {reason}")]
    Proxy {
        proxy: String,
        source_name: String,
        reason: proxy::ProxyError,
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
    /// Discovery read values the agents would refuse (the same limits as an inventory file).
    #[error(
        "the cluster at {server} (from {source_name}) describes itself in values prober cannot probe: {source}"
    )]
    Invalid {
        server: String,
        source_name: String,
        source: crate::inventory::InvalidInventory,
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
    let mut plugged = None;
    let (config, source_name) = if let Some(path) = kubeconfig {
        let source_name = path.display().to_string();
        let err = config_err(&source_name);
        let mut kc = read_kubeconfig(path).map_err(|e| err(&e))?;
        plugged = prepare(&mut kc, context, &source_name).await?;
        (
            Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(|e| err(&e))?,
            source_name,
        )
    } else {
        // KUBECONFIG's files or ~/.kube/config, read capped here rather than by kube.
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        let found =
            read_default_kubeconfig(std::env::var_os("KUBECONFIG").as_deref(), home.as_deref());
        match found {
            Ok(Some((mut kc, source_name))) => {
                let err = config_err(&source_name);
                let p = prepare(&mut kc, context, &source_name).await?;
                match Config::from_custom_kubeconfig(kc, &options).await {
                    Ok(config) => {
                        plugged = p;
                        (config, source_name)
                    }
                    // As `Config::infer`: a kubeconfig that cannot be used falls back to the
                    // in-cluster service account, unless a context was asked for.
                    Err(e) if context.is_some() => return Err(err(&e)),
                    Err(e) => (Config::incluster().map_err(|_| err(&e))?, source_name),
                }
            }
            Err(e) => {
                let source_name =
                    std::env::var("KUBECONFIG").unwrap_or_else(|_| "~/.kube/config".into());
                let err = config_err(&source_name);
                if context.is_some() {
                    return Err(err(&e));
                }
                (Config::incluster().map_err(|_| err(&e))?, source_name)
            }
            Ok(None) => {
                let source_name = if context.is_some() {
                    "~/.kube/config".to_string()
                } else {
                    "~/.kube/config or the in-cluster service account".into()
                };
                // None at all (no KUBECONFIG, no ~/.kube/config, not in a pod) is the new
                // user's case: say the ways forward. The files were looked for just now (capped):
                // what is left to try is the pod's own service account, and only without a
                // context, which names a kubeconfig entry.
                let none = |message: String| ConnectError::NoKubeconfig {
                    source_name: source_name.clone(),
                    message,
                };
                if context.is_some() {
                    return Err(none("no kubeconfig file was found".into()));
                }
                let config = Config::incluster().map_err(|e| none(e.to_string()))?;
                (config, source_name)
            }
        }
    };
    let mut config = config;
    configure(&mut config);
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    route(
        &mut config,
        env("HTTPS_PROXY").or_else(|| env("https_proxy")).as_deref(),
        env("NO_PROXY").or_else(|| env("no_proxy")).as_deref(),
    );
    let server = match &config.proxy_url {
        Some(p) => format!(
            "{} (through the proxy {})",
            config.cluster_url,
            proxy::shown(&p.to_string())
        ),
        None => config.cluster_url.to_string(),
    };
    let client = build(config, plugged).map_err(|e| ConnectError::Unreachable {
        server: server.clone(),
        source_name: source_name.clone(),
        // kube's own words for these quote the proxy URL whole, password and all.
        message: match e {
            kube::Error::ProxyProtocolUnsupported { .. } => {
                "the proxy's scheme is not one prober can use (http, https, socks5)".into()
            }
            kube::Error::ProxyProtocolDisabled {
                protocol_feature, ..
            } => format!("the proxy needs kube's {protocol_feature} feature, not in this build"),
            e => e.to_string(),
        },
    })?;
    Ok((client, server, source_name))
}

/// The kubeconfig made ready for kube: its proxy checked, then its credentials read
/// ([`credentials`]). The proxy is refused when prober cannot use it or cannot show it without
/// its credentials: checked on the URL as written, since kube's parsed form drops a `#...` and
/// with it what shows that the address was cut inside a password.
async fn prepare(
    kc: &mut Kubeconfig,
    context: Option<&str>,
    source_name: &str,
) -> Result<Option<Plugged>, ConnectError> {
    if let Some((url, var)) = proxy::configured(kc, context, |k| std::env::var(k).ok()) {
        proxy::check(&url).map_err(|reason| ConnectError::Proxy {
            proxy: proxy::shown(&url),
            source_name: var.map_or_else(|| source_name.to_string(), str::to_string),
            reason,
        })?;
    }
    Box::pin(credentials(kc, context, source_name))
        .await
        .map_err(|e| ConnectError::Config {
            source_name: source_name.to_string(),
            message: e.to_string(),
        })
}

/// The client's own timeouts: a connect timeout, and no read timeout. A watch that sees no
/// change for a while (a Pending pod, a slow image pull, a `NotReady` node) and an exec session
/// whose agent is quiet while its probes wait are healthy, and kube leaves the read timeout
/// unset for that reason (kube-rs PR #1945). Each request that can hang carries its own deadline
/// instead ([`REQUEST_TIMEOUT`]), and each watch and exec session an overall one.
pub fn configure(config: &mut Config) {
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = None;
}

/// Whether the API server is reached through the proxy kube chose: a proxy taken from
/// `HTTPS_PROXY` (not the kubeconfig's own `proxy-url`, which kubectl always uses) is dropped
/// when `NO_PROXY` covers the server, as kubectl decides it ([`proxy::covers`]).
pub fn route(config: &mut Config, https_proxy: Option<&str>, no_proxy: Option<&str>) {
    let (Some(chosen), Some(from_env), Some(no_proxy)) =
        (config.proxy_url.as_ref(), https_proxy, no_proxy)
    else {
        return;
    };
    let same = chosen.to_string().trim_end_matches('/') == from_env.trim().trim_end_matches('/');
    let url = &config.cluster_url;
    let port = url
        .port_u16()
        .unwrap_or(if url.scheme_str() == Some("http") {
            80
        } else {
            443
        });
    if same && proxy::covers(no_proxy, url.host().unwrap_or_default(), port) {
        config.proxy_url = None;
    }
}

/// What discovery found: the client it used, the inventory, and what it was not allowed to read
/// (the inventory is partial there; say so).
pub struct Discovered {
    pub client: kube::Client,
    pub inventory: crate::inventory::Inventory,
    pub forbidden: Vec<String>,
    /// What the inventory guessed because the cluster did not say it.
    pub warnings: Vec<String>,
}

/// Connects and discovers for agents in `agents_namespace`, naming the kubeconfig and server
/// when the cluster cannot be reached or read. Discovery keeps its own deadlines, which grow
/// with the cluster's size.
pub async fn discover(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
    agents_namespace: &str,
) -> Result<Discovered, ConnectError> {
    let (client, server, source_name) = client(kubeconfig, context).await?;
    let read = |e| ConnectError::Discover {
        server: server.clone(),
        source_name: source_name.clone(),
        source: e,
    };
    let raw = discover::read_for(&client, agents_namespace)
        .await
        .map_err(read)?;
    let inventory = discover::build(&raw).map_err(read)?;
    // A discovered cluster is held to the limits of an inventory file: a VNI or MTU read from a
    // CNI's configuration, or a name past the agents' limits, is refused here in words instead
    // of becoming probes the agents refuse.
    inventory
        .validate()
        .map_err(|source| ConnectError::Invalid {
            server: server.clone(),
            source_name: source_name.clone(),
            source,
        })?;
    Ok(Discovered {
        client,
        warnings: discover::warnings::warnings(&inventory),
        inventory,
        forbidden: raw.forbidden,
    })
}

#[cfg(test)]
mod tests;
