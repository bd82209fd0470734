//! One probe's result with where it went, and whether it is known at all.

use std::net::IpAddr;

use probe_proto::{Outcome, ProbeResult};
use serde::{Deserialize, Serialize};

use super::{AgentKind, AgentRef, Family, PathClass, Protocol};

/// Where a probe goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentKind>,
    /// `kubernetes`, `kube-dns`, `apiserver`, `dns-pod`, `vtep`, or a DNS name asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    pub address: IpAddr,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    pub protocol: Protocol,
}

impl Target {
    /// The IP family the probe went over: its address's.
    #[must_use]
    pub fn family(&self) -> Family {
        Family::of(self.address)
    }
}

/// Why a planned probe has no real result: it is not known to fail, and is never evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Unknown {
    /// Its agent could not be started or reached.
    AgentFailed,
    /// Its agent ran but returned nothing for it.
    NoResult,
    /// The run was interrupted before it finished.
    Interrupted,
    /// It failed on every attempt while its agent was kept from running (`stalledMs`: a CPU
    /// hog, a throttled cgroup): its timer measured the scheduler, not the network.
    Starved,
}

/// One probe's result, with where it went: the report's `results[]` entry. Written with its
/// `family` (read from `to.address`, so never stored and ignored when read back).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResultRecord {
    pub path: PathClass,
    pub from: AgentRef,
    pub to: Target,
    /// Set when the probe never ran; `outcome` is then `error` and `detail` says why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown: Option<Unknown>,
    #[serde(flatten)]
    pub result: ProbeResult,
}

impl Serialize for ResultRecord {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Wire<'a> {
            path: PathClass,
            from: &'a AgentRef,
            to: &'a Target,
            family: Family,
            #[serde(skip_serializing_if = "Option::is_none")]
            unknown: Option<Unknown>,
            #[serde(flatten)]
            result: &'a ProbeResult,
        }
        Wire {
            path: self.path,
            from: &self.from,
            to: &self.to,
            family: self.to.family(),
            unknown: self.unknown,
            result: &self.result,
        }
        .serialize(s)
    }
}

impl ResultRecord {
    /// A result for a probe that never ran.
    #[must_use]
    pub fn unknown(
        path: PathClass,
        from: AgentRef,
        to: Target,
        id: String,
        why: Unknown,
        detail: String,
    ) -> Self {
        Self {
            path,
            from,
            to,
            unknown: Some(why),
            result: ProbeResult::new(id, Outcome::Error, detail),
        }
    }

    /// The probe never ran: not known to fail.
    #[must_use]
    pub fn is_unknown(&self) -> bool {
        self.unknown.is_some()
    }

    /// The probe ran and the path failed.
    #[must_use]
    pub fn is_failed(&self) -> bool {
        !self.result.outcome.is_ok() && !self.is_unknown()
    }
}
