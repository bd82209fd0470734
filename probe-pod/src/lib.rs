//! The prober agent: the probe engine, the responders and the raw-socket code. The wire types it
//! speaks live in `probe-proto`, re-exported here as `proto`, `util` and `files`.

pub use probe_proto as proto;
pub use probe_proto::{files, util};

pub mod engine;
pub mod net;
pub mod plan_input;
pub mod probe;
pub mod serve;
pub mod simulate;
