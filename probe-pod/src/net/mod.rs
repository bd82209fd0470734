//! The only place with raw sockets, error-queue parsing, packet crafting and `unsafe`.

pub mod bpf;
pub mod encap;
pub mod errqueue;
pub mod flow;
pub mod icmp;
pub mod packet;
pub mod sniff;
pub mod tunnel;

pub use crate::util::{random_u32, unix_ms};

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
