//! The prober coordinator: the cluster model, the lab, and (as they land) planning, running,
//! diagnosis and reports.

pub mod diagnose;
pub mod inventory;
pub mod lab;
pub mod model;
pub mod plan;
pub mod report;
pub mod run;
pub mod runtime;
#[cfg(test)]
pub(crate) mod testutil;
