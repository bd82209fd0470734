//! The matrix's memory, estimated before it is planned: a cluster whose full matrix cannot fit in
//! the memory this process may use is refused with the `--sample` that would fit, instead of
//! heading for the OOM killer.

/// Probes per ordered pair of nodes in a full matrix (pod and host agents both ways, the
/// cluster's ports, the overlay): 7.0 at 1,000 nodes, 7.1 at 150 (bench/scale.sh).
const PROBES_PER_PAIR: u64 = 7;
/// Probes per node that do not depend on the other nodes (API endpoints, DNS, node checks).
const PROBES_PER_NODE: u64 = 40;
/// The coordinator's peak per probe: 104 B at 1,000 nodes (696 MiB for 7,013,009 results),
/// rounded up.
const BYTES_PER_PROBE: u64 = 110;
/// The coordinator's peak per probe as the scheduled `CronJob` runs (`--sample auto`, the table
/// rendered): 160 B at 1,000 nodes (566 MiB for 3,294,408 probes, `bench/cronjob-scale.sh`),
/// rounded up. `--sample auto` sizes to this, not to the JSON path's figure above.
const AUTO_BYTES_PER_PROBE: u64 = 170;
/// What the coordinator takes besides the probes.
const BASE_BYTES: u64 = 64 << 20;
/// The share of the budget `--sample auto` plans for, in fifths: the rest is the estimate's
/// margin (the allocator's slack, the table's grid, the report's JSON line, the memory written).
const AUTO_SHARE_FIFTHS: u64 = 4;
/// The sample `--sample` suggests.
const SUGGESTED_SAMPLE: u16 = 3;

/// The probes of a matrix of `nodes` nodes, every pair or (`sample`) each node to and from at
/// least K peers, and the memory the coordinator needs for them.
#[must_use]
pub fn estimate(nodes: usize, sample: Option<u16>) -> (u64, u64) {
    let n = nodes as u64;
    let peers = n.saturating_sub(1);
    let per_node = match sample {
        // To and from K peers, and the zone pairs' extra few.
        Some(k) => (2 * u64::from(k) + 2).min(peers),
        None => peers,
    };
    let probes = n
        .saturating_mul(per_node)
        .saturating_mul(PROBES_PER_PAIR)
        .saturating_add(n.saturating_mul(PROBES_PER_NODE));
    (
        probes,
        BASE_BYTES.saturating_add(probes.saturating_mul(BYTES_PER_PROBE)),
    )
}

/// The memory this process may use: the least of what the machine has available, its
/// address-space limit and its cgroup's limit (a `CronJob`'s container); `None` when none is
/// known.
#[must_use]
// /proc and cgroup files are small kernel-made files, never FIFOs or user paths.
#[allow(clippy::disallowed_methods)]
pub fn available() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("MemAvailable:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| kb * 1024)
    });
    let rlimit = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_AS)
        .ok()
        .map(|(soft, _)| soft)
        .filter(|&l| l != nix::sys::resource::RLIM_INFINITY);
    let cgroup = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .find_map(|p| std::fs::read_to_string(p).ok()?.trim().parse::<u64>().ok());
    [meminfo, rlimit, cgroup].into_iter().flatten().min()
}

/// `--sample auto`: the probes a run may plan within `budget` bytes.
#[must_use]
pub fn probes_within(budget: u64) -> usize {
    let room = (budget / 5 * AUTO_SHARE_FIFTHS).saturating_sub(BASE_BYTES);
    usize::try_from(room / AUTO_BYTES_PER_PROBE).unwrap_or(usize::MAX)
}

fn mib(b: u64) -> u64 {
    b >> 20
}

/// Refuses a matrix whose estimate exceeds `budget`, naming the `--sample` that fits; a warning
/// when it takes more than half of it.
pub fn check(
    nodes: usize,
    sample: Option<u16>,
    budget: Option<u64>,
) -> Result<Option<String>, String> {
    let Some(budget) = budget else {
        return Ok(None);
    };
    let (probes, need) = estimate(nodes, sample);
    let what = format!(
        "the matrix of {nodes} nodes{} is about {probes} probes and needs about {} MiB",
        sample.map_or_else(String::new, |k| format!(" at --sample {k}")),
        mib(need)
    );
    if need > budget {
        let (_, sampled) = estimate(nodes, Some(SUGGESTED_SAMPLE));
        let hint = if sample.is_none() && sampled <= budget {
            format!(
                "; run it with --sample {SUGGESTED_SAMPLE} (about {} MiB): every node to and from {SUGGESTED_SAMPLE} peers, every zone pair, the API and DNS in full; or --sample auto: as many peers as fit, rotating through the rest run by run with --remember",
                mib(sampled)
            )
        } else {
            "; run it with a smaller --sample, or on a machine with more memory".into()
        };
        return Err(format!(
            "{what}, more than the {} MiB this process may use{hint}",
            mib(budget)
        ));
    }
    Ok((need > budget / 2).then(|| {
        format!(
            "{what}, more than half of the {} MiB this process may use",
            mib(budget)
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_follows_the_measured_runs() {
        // bench/scale.sh: 1,000 nodes, 7,013,009 results, 696 MiB; 150 nodes 159,459, 35 MiB.
        let (probes, bytes) = estimate(1000, None);
        assert!((6_900_000..7_100_000).contains(&probes), "{probes}");
        assert!((690..=900).contains(&mib(bytes)), "{}", mib(bytes));
        let (probes, _) = estimate(150, None);
        assert!((150_000..170_000).contains(&probes), "{probes}");
        // --sample 3 at 1,000 nodes: 38,037 results.
        let (probes, _) = estimate(1000, Some(3));
        assert!((38_000..100_000).contains(&probes), "{probes}");
    }

    #[test]
    fn auto_plans_what_fits_the_budget_with_a_margin() {
        let probes = probes_within(512 << 20) as u64;
        let need = BASE_BYTES + probes * AUTO_BYTES_PER_PROBE;
        assert!(need <= (512 << 20) / 5 * 4, "{need}");
        assert!(need > (512 << 20) / 5 * 3, "{need}");
        // Less than the base: nothing fits; the sample then probes one peer per node.
        assert_eq!(probes_within(BASE_BYTES), 0);
    }

    #[test]
    fn five_thousand_nodes_without_a_sample_are_refused_with_the_sample_that_fits() {
        let gib = 1 << 30;
        let e = check(5000, None, Some(16 * gib)).unwrap_err();
        assert!(e.contains("--sample 3") && e.contains("5000 nodes"), "{e}");
        assert!(check(5000, Some(3), Some(16 * gib)).unwrap().is_none());
        assert!(check(1000, None, Some(16 * gib)).unwrap().is_none());
        assert!(check(1000, None, Some(gib)).unwrap().is_some(), "a warning");
        assert!(
            check(5000, None, None).unwrap().is_none(),
            "no budget known"
        );
    }
}
