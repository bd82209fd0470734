//! The caps on the coordinator's input files; the reader is `probe_proto::files::read_capped`.

/// The largest inventory read (a 5,000-node inventory is a few MiB).
pub const MAX_INVENTORY_BYTES: u64 = 64 << 20;
/// The largest scenario read.
pub const MAX_SCENARIO_BYTES: u64 = 1 << 20;
/// The largest saved report read.
pub const MAX_REPORT_BYTES: u64 = 1 << 30;
