//! Time and nonces, shared by the agent and the coordinator (always built).

/// Current Unix time in milliseconds.
#[must_use]
pub fn unix_ms() -> u64 {
    #[allow(clippy::disallowed_methods)] // the one read of the wall clock: the run's clock
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

/// Cuts `s` to at most `max` bytes, back to a character boundary (text from a peer may hold any
/// UTF-8, and `String::truncate` panics inside a character).
pub fn truncate_at_char(s: &mut String, max: usize) {
    let mut cut = s.len().min(max);
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    s.truncate(cut);
}

#[cfg(test)]
mod truncate_tests {
    #[test]
    fn never_cuts_inside_a_character() {
        let mut s = "aé".repeat(100);
        super::truncate_at_char(&mut s, 200);
        assert!(s.len() <= 200 && s.len() >= 199, "{}", s.len());
        let mut short = "é".to_string();
        super::truncate_at_char(&mut short, 1);
        assert_eq!(short, "");
    }
}
