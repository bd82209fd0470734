//! Time and nonces, shared by the agent and the coordinator (always built).

/// Current Unix time in milliseconds.
#[must_use]
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A random nonce. Nonces only need to be unlikely to collide, not secret: std's per-process
/// random hash keys, mixed with the clock and a counter, are enough and need no RNG crate.
#[must_use]
pub fn random_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::hash::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u64(unix_ms());
    let v = h.finish();
    #[allow(clippy::cast_possible_truncation)]
    let folded = (v ^ (v >> 32)) as u32;
    folded
}

/// Current Unix time in seconds.
#[must_use]
pub fn unix_secs() -> u64 {
    unix_ms() / 1000
}
