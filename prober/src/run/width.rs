//! How many agents a run drives at once unless told: all of them, bounded by the open-file limit and a ceiling.

/// The most agents driven at once by default: each is an exec session the API server holds
/// open (or a child process of the coordinator), so the fan-out stays bounded however large the
/// cluster.
pub const CEILING: usize = 512;
/// The descriptors one agent's session may hold in the coordinator: a connection (an exec's
/// WebSocket), or a child's three pipes and a spare.
const FDS_PER_AGENT: u64 = 4;
/// Descriptors kept for everything else (the API client's pool, watches, files, the runtime).
const RESERVED_FDS: u64 = 128;

/// The fan-out for `agents` agents under an open-file limit of `open_files`: every agent at
/// once when they fit, never more than `CEILING`, at least one.
#[must_use]
pub fn width(agents: usize, open_files: u64) -> usize {
    let by_fds = usize::try_from(open_files.saturating_sub(RESERVED_FDS) / FDS_PER_AGENT)
        .unwrap_or(usize::MAX);
    agents.min(by_fds).clamp(1, CEILING)
}

/// This process's open-file limit (the soft one, what `open` is held to); 1024 when it cannot
/// be read.
#[must_use]
pub fn open_file_limit() -> u64 {
    nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map_or(1024, |(soft, _)| soft)
}

/// `width` under this process's own open-file limit.
#[must_use]
pub fn default_width(agents: usize) -> usize {
    width(agents, open_file_limit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fan_out_follows_the_agents_the_limit_and_the_ceiling() {
        for (agents, open_files, want, why) in [
            (6, 1024, 6, "a small cluster: every agent at once"),
            (2000, 1_048_576, CEILING, "a large cluster: the ceiling"),
            (2000, 1024, 224, "the open-file limit: (1024 - 128) / 4"),
            (
                2000,
                100,
                1,
                "a limit below the reserve: still one at a time",
            ),
            (0, 1024, 1, "no agents: at least one"),
        ] {
            assert_eq!(width(agents, open_files), want, "{why}");
        }
    }
}
