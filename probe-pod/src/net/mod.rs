//! The only place with raw sockets, error-queue parsing, packet crafting and `unsafe`.

pub mod bpf;
pub mod errqueue;
pub mod icmp;
pub mod packet;
pub mod sniff;

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

/// Registers an owned socket with the tokio reactor.
pub fn async_fd(
    sock: socket2::Socket,
    interest: tokio::io::Interest,
) -> std::io::Result<tokio::io::unix::AsyncFd<socket2::Socket>> {
    // Safety: `socket2::Socket` owns its descriptor: it stays open and unchanged until the Socket
    // is dropped, which only happens when the AsyncFd drops it or hands it back via `into_inner`.
    #[allow(unsafe_code)]
    let fd = unsafe { tokio::io::unix::AsyncFd::register_with_interest(sock, interest) };
    Ok(fd?)
}
