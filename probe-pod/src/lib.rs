//! The prober agent: wire types (`proto`, always built) and, behind the `engine` feature, the probe
//! engine, the responders and the raw-socket code.

pub mod proto;
pub mod util;

#[cfg(feature = "engine")]
pub mod engine;
#[cfg(feature = "engine")]
pub mod net;
#[cfg(feature = "engine")]
pub mod probe;
#[cfg(feature = "engine")]
pub mod serve;
