//! Lab scenarios (YAML): the cluster to build, the faults to inject, and what must be observed.
//!
//! `schema` is the cluster's shape, `fault` what is broken in it, `expect` what must be seen,
//! `validate` what the types cannot check (`families`: what the IP families allow).

mod expect;
mod families;
mod fault;
mod schema;
mod validate;

use std::path::{Path, PathBuf};

pub use expect::{Expect, FindingPattern, Reach, ReachProbe};
pub use fault::{Action, BadPorts, Fault, Place, PolicyDirection, PolicyDrop, PolicyPeers, Ports};
pub use schema::{CandidateSpec, LabOverlay, OverlayMode, Scenario, Zone};
pub use validate::InvalidScenario;

use crate::inventory::from_yaml;

/// A scenario file that cannot be used: the file, then what is wrong in it.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("scenario: {0}")]
    Read(#[source] probe_proto::files::ReadError),
    #[error("scenario {}: {source}", path.display())]
    Invalid {
        path: PathBuf,
        source: InvalidScenario,
    },
}

impl Scenario {
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        use crate::model::read::MAX_SCENARIO_BYTES;
        let text = probe_proto::files::read_text_capped(
            path,
            MAX_SCENARIO_BYTES,
            "scenario",
            path.display(),
        )
        .map_err(ScenarioError::Read)?;
        Self::parse(&text).map_err(|source| ScenarioError::Invalid {
            path: path.into(),
            source,
        })
    }

    pub fn parse(text: &str) -> Result<Self, InvalidScenario> {
        let s: Self = from_yaml(text)?;
        s.validate()?;
        Ok(s)
    }
}

#[cfg(test)]
mod tests;
