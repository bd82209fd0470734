//! The host agents' port for a run that creates its agents: the host agents of every run share
//! each node's host network, so a run's host agents must not take a port other live prober
//! host agents (another run's, or `deploy/base`'s permanent ones) hold. They are read from the
//! API ([`holders`]); a collision it cannot see is said per node ([`super::agents`]).

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::Client;
use kube::api::{Api, ListParams};

use super::agents::daemonset_port;
use super::{DeployError, api_code, runs, timed};
use crate::runtime::kube::manifests::DEFAULT_NAMESPACE;

/// How far past the default a run looks for a free port before it gives up.
const SEARCH: u16 = 100;

/// Live prober host agents holding a port on every node they run on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub namespace: String,
    /// Its run; `None` for a permanent install (`deploy/base`), which is always live.
    pub run: Option<String>,
    pub port: u16,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.run {
            Some(run) => write!(f, "prober run {run}'s host agents in {}", self.namespace),
            None => write!(f, "the permanent host agents in {}", self.namespace),
        }
    }
}

/// The port this run's host agents take: `asked` (`--host-agent-port`) unless a holder has it,
/// else the default or, when held, the next one no holder has. `note` says when it is not the
/// default and why.
pub fn choose(
    asked: Option<u16>,
    holders: &[Holder],
    note: &mut dyn FnMut(String),
) -> Result<u16, DeployError> {
    let held_by = |port: u16| holders.iter().find(|h| h.port == port);
    if let Some(port) = asked {
        return match held_by(port) {
            Some(h) => Err(DeployError::PortHeld {
                port,
                by: h.to_string(),
            }),
            None => Ok(port),
        };
    }
    let default = probe_proto::DEFAULT_AGENT_PORT;
    let Some(h) = held_by(default) else {
        return Ok(default);
    };
    let free = (default..=default.saturating_add(SEARCH)).find(|p| held_by(*p).is_none());
    let Some(port) = free else {
        return Err(DeployError::PortHeld {
            port: default,
            by: format!("{h} (and ports up to {} by others)", default + SEARCH),
        });
    };
    note(format!(
        "port {default} is held by {h}: this run's host agents serve on port {port} (TCP and \
         UDP) instead; where a firewall guards the nodes, open it to the pod range, or pass \
         --host-agent-port"
    ));
    Ok(port)
}

/// The live prober host agents other than `own_run`'s. A run in the default namespace (the
/// one `deploy/`'s RBAC grants) looks there only, so it never makes a request that RBAC
/// refuses; a run elsewhere (whose RBAC is the operator's own) looks in every namespace, and
/// when that is refused (403), in its own and the default one.
pub async fn holders(
    client: &Client,
    namespace: &str,
    own_run: Option<&str>,
) -> Result<Vec<Holder>, DeployError> {
    let lp = ListParams::default().labels("app.kubernetes.io/name=prober");
    let everywhere = if namespace == DEFAULT_NAMESPACE {
        None
    } else {
        let all = timed(
            "list the prober DaemonSets in every namespace",
            Api::<DaemonSet>::all(client.clone()).list(&lp),
        )
        .await;
        match all {
            Ok(list) => Some(list.items),
            Err(e) if api_code(&e) == Some(403) => None,
            Err(e) => return Err(e),
        }
    };
    let daemonsets = if let Some(items) = everywhere {
        items
    } else {
        let mut items = Vec::new();
        let mut namespaces = vec![namespace];
        if namespace != DEFAULT_NAMESPACE {
            namespaces.push(DEFAULT_NAMESPACE);
        }
        for ns in namespaces {
            let list = timed(
                format!("list the prober DaemonSets in {ns}"),
                Api::<DaemonSet>::namespaced(client.clone(), ns).list(&lp),
            )
            .await;
            match list {
                Ok(l) => items.extend(l.items),
                // Not this run's to read: the agents there cannot be seen.
                Err(e) if api_code(&e) == Some(403) => {}
                Err(e) => return Err(e),
            }
        }
        items
    };
    Ok(live_host_agents(
        &daemonsets,
        own_run,
        k8s_openapi::jiff::Timestamp::now(),
    ))
}

/// Pure: the live host-agent `DaemonSets` among `daemonsets` (a run's until it expires, a
/// permanent install's always), other than `own_run`'s.
#[must_use]
pub fn live_host_agents(
    daemonsets: &[DaemonSet],
    own_run: Option<&str>,
    now: k8s_openapi::jiff::Timestamp,
) -> Vec<Holder> {
    daemonsets
        .iter()
        .filter(|d| {
            d.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("app.kubernetes.io/component"))
                .is_some_and(|c| c == "host-agent")
        })
        .filter_map(|d| {
            let run = runs::run_of(&d.metadata).map(String::from);
            let live = match run.as_deref() {
                Some(r) => Some(r) != own_run && !runs::stale(&d.metadata, now),
                None => true,
            };
            live.then(|| Holder {
                namespace: d.metadata.namespace.clone().unwrap_or_default(),
                run,
                port: daemonset_port(d),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::kube::manifests::{self, AgentSpec};

    fn host(namespace: &str, run: Option<&str>, expires: &str, port: u16) -> DaemonSet {
        manifests::host_daemonset(&AgentSpec {
            namespace: namespace.into(),
            run: run.map(String::from),
            expires: run.map(|_| expires.into()),
            host_port: port,
            ..AgentSpec::default()
        })
    }

    #[test]
    fn a_run_takes_the_first_port_no_live_host_agents_hold() {
        let now: k8s_openapi::jiff::Timestamp = "2026-12-01T12:00:00Z".parse().unwrap();
        let later = "2026-12-01T14:00:00Z";
        let earlier = "2026-12-01T11:00:00Z";
        let ds = vec![
            host("prober-system", None, "", 9917),
            host("ns-a", Some("ra"), later, 9918),
            host("ns-b", Some("rb"), earlier, 9919),
            manifests::pod_daemonset(&AgentSpec::default()),
        ];
        let held = live_host_agents(&ds, Some("rc"), now);
        assert_eq!(
            held.iter().map(|h| h.port).collect::<Vec<_>>(),
            [9917, 9918],
            "the stale run and the pod agents hold nothing: {held:?}"
        );
        let mut notes = Vec::new();
        assert_eq!(choose(None, &held, &mut |n| notes.push(n)).unwrap(), 9919);
        assert!(
            notes[0].contains("port 9917 is held by the permanent host agents in prober-system")
                && notes[0].contains("port 9919"),
            "{notes:?}"
        );
        // Asked for a held port: refused, naming who holds it; a free one is taken as asked.
        let e = choose(Some(9918), &held, &mut |_| {})
            .unwrap_err()
            .to_string();
        assert!(e.contains("prober run ra's host agents in ns-a"), "{e}");
        assert_eq!(choose(Some(10_000), &held, &mut |_| {}).unwrap(), 10_000);
        // Nothing held: the default, said nowhere.
        let mut notes = Vec::new();
        assert_eq!(choose(None, &[], &mut |n| notes.push(n)).unwrap(), 9917);
        assert!(notes.is_empty());
        // Its own run's agents are not in its way.
        let own = [host("ns-a", Some("ra"), later, 9917)];
        assert!(live_host_agents(&own, Some("ra"), now).is_empty());
    }
}
