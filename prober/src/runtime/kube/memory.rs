//! The memory of the scheduled mode: the last run's remembered report, kept in a `ConfigMap` in
//! the agents' namespace so that the next run can say what changed. The bytes are opaque here
//! (the report layer compresses and bounds them); this module reads and writes them, refusing
//! anything near the API server's 1 MiB object limit.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

/// The `ConfigMap` holding the last report.
pub const CONFIGMAP: &str = "prober-last-report";
/// Its key in `binaryData`: gzip-compressed JSON.
pub const KEY: &str = "report.json.gz";
/// Its key in `data`: a few lines a person can read with `kubectl get cm -o yaml`.
pub const SUMMARY_KEY: &str = "summary.json";
/// The most this module writes: the API server refuses objects over 1 MiB, and base64 in
/// `binaryData` takes a third more than the bytes.
pub const MAX_BYTES: usize = 512 * 1024;
/// Each request gives up after this.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error("cannot read the ConfigMap {namespace}/{CONFIGMAP}: {source}")]
    Read {
        namespace: String,
        source: kube::Error,
    },
    #[error("cannot write the ConfigMap {namespace}/{CONFIGMAP}: {source}")]
    Write {
        namespace: String,
        source: kube::Error,
    },
    #[error("the ConfigMap {namespace}/{CONFIGMAP}: no answer within {secs} s")]
    Deadline { namespace: String, secs: u64 },
    #[error(
        "the remembered report is {bytes} bytes, more than the {MAX_BYTES} this ConfigMap may hold"
    )]
    TooLarge { bytes: usize },
}

async fn timed<T>(
    namespace: &str,
    f: impl std::future::Future<Output = Result<T, MemoryError>>,
) -> Result<T, MemoryError> {
    tokio::time::timeout(REQUEST_TIMEOUT, f)
        .await
        .unwrap_or_else(|_| {
            Err(MemoryError::Deadline {
                namespace: namespace.to_string(),
                secs: REQUEST_TIMEOUT.as_secs(),
            })
        })
}

/// The remembered bytes, or `None` on the first run (no `ConfigMap`, or no key in it).
pub async fn load(client: &kube::Client, namespace: &str) -> Result<Option<Vec<u8>>, MemoryError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let cm = timed(namespace, async {
        api.get_opt(CONFIGMAP)
            .await
            .map_err(|source| MemoryError::Read {
                namespace: namespace.to_string(),
                source,
            })
    })
    .await?;
    Ok(cm
        .and_then(|cm| cm.binary_data)
        .and_then(|mut d| d.remove(KEY))
        .map(|b| b.0))
}

fn configmap(namespace: &str, bytes: Vec<u8>, summary: String) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(CONFIGMAP.to_string()),
            namespace: Some(namespace.to_string()),
            labels: Some(BTreeMap::from([
                ("app.kubernetes.io/name".to_string(), "prober".to_string()),
                (
                    "app.kubernetes.io/component".to_string(),
                    "memory".to_string(),
                ),
                (
                    "app.kubernetes.io/managed-by".to_string(),
                    "prober".to_string(),
                ),
            ])),
            ..ObjectMeta::default()
        },
        binary_data: Some(BTreeMap::from([(KEY.to_string(), ByteString(bytes))])),
        data: Some(BTreeMap::from([(SUMMARY_KEY.to_string(), summary)])),
        ..ConfigMap::default()
    }
}

/// Writes the remembered bytes and a readable summary: replaces the `ConfigMap`, or creates it
/// when there is none yet (the first run). Needs `update` and `create` on it, nothing more.
pub async fn store(
    client: &kube::Client,
    namespace: &str,
    bytes: Vec<u8>,
    summary: String,
) -> Result<(), MemoryError> {
    if bytes.len() + summary.len() > MAX_BYTES {
        return Err(MemoryError::TooLarge {
            bytes: bytes.len() + summary.len(),
        });
    }
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let cm = configmap(namespace, bytes, summary);
    let write = |source| MemoryError::Write {
        namespace: namespace.to_string(),
        source,
    };
    // Unconditional replace (no resourceVersion): runs never overlap (the CronJob forbids it),
    // and the last run's word is the one to keep.
    let replaced = timed(namespace, async {
        match api.replace(CONFIGMAP, &PostParams::default(), &cm).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(false),
            Err(e) => Err(write(e)),
        }
    })
    .await?;
    if !replaced {
        timed(namespace, async {
            api.create(&PostParams::default(), &cm)
                .await
                .map(|_| ())
                .map_err(write)
        })
        .await?;
    }
    Ok(())
}
