//! Address sets summarised as CIDRs, for fix lines at scale: the 99 node addresses of a /24 are
//! one `192.168.56.0/24`-style block wherever they fill it, not 99 literals. Exact: a block is
//! written only when every address in it is in the set.

use std::net::Ipv4Addr;

/// The fewest CIDR blocks covering exactly `addrs` (duplicates ignored), in address order; a
/// single address is written without `/32`.
#[must_use]
pub fn summarise(addrs: &[Ipv4Addr]) -> Vec<String> {
    let mut v: Vec<u32> = addrs.iter().map(|a| u32::from(*a)).collect();
    v.sort_unstable();
    v.dedup();
    let mut out = Vec::new();
    let mut i = 0;
    while i < v.len() {
        // Grow the block at v[i] while it stays aligned and every address in it is present
        // (the run of consecutive addresses starting at v[i] is long enough).
        let start = v[i];
        let mut run = 1usize;
        while i + run < v.len() && u64::from(v[i + run]) == u64::from(start) + run as u64 {
            run += 1;
        }
        let mut bits = 0u32;
        while bits < 32 {
            let size = 1u64 << (bits + 1);
            if u64::from(start) % size != 0 || size > run as u64 {
                break;
            }
            bits += 1;
        }
        let len = 32 - bits;
        if len == 32 {
            out.push(Ipv4Addr::from(start).to_string());
        } else {
            out.push(format!("{}/{len}", Ipv4Addr::from(start)));
        }
        i += 1usize << bits;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ips(range: std::ops::Range<u32>, base: [u8; 4]) -> Vec<Ipv4Addr> {
        range
            .map(|k| Ipv4Addr::from(u32::from(Ipv4Addr::from(base)) + k))
            .collect()
    }

    #[test]
    fn summarises_exactly() {
        let cases: Vec<(Vec<Ipv4Addr>, Vec<&str>)> = vec![
            (vec![], vec![]),
            (ips(0..1, [10, 0, 0, 5]), vec!["10.0.0.5"]),
            (ips(0..256, [192, 168, 56, 0]), vec!["192.168.56.0/24"]),
            // .1 to .99: not aligned at the start, and stops short.
            (
                ips(1..100, [192, 168, 56, 0]),
                vec![
                    "192.168.56.1",
                    "192.168.56.2/31",
                    "192.168.56.4/30",
                    "192.168.56.8/29",
                    "192.168.56.16/28",
                    "192.168.56.32/27",
                    "192.168.56.64/27",
                    "192.168.56.96/30",
                ],
            ),
            (
                [
                    ips(0..4, [10, 0, 0, 0]),
                    ips(0..1, [10, 0, 0, 9]),
                    ips(0..2, [10, 0, 0, 0]),
                ]
                .concat(),
                vec!["10.0.0.0/30", "10.0.0.9"],
            ),
            (ips(0..2, [255, 255, 255, 254]), vec!["255.255.255.254/31"]),
        ];
        for (input, want) in cases {
            assert_eq!(summarise(&input), want, "{input:?}");
        }
    }
}
