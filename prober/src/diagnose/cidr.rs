//! Address sets summarised as CIDRs, for fix lines at scale: the 99 node addresses of a /24 are
//! one `192.168.56.0/24`-style block wherever they fill it, not 99 literals; IPv6 sets the same
//! way, written compressed (`fd00:56::12/127`). Exact: a block is written only when every
//! address in it is in the set.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The fewest CIDR blocks covering exactly `addrs` (duplicates ignored), in address order; a
/// single address is written without `/32`.
#[must_use]
pub fn summarise(addrs: &[Ipv4Addr]) -> Vec<String> {
    let v = addrs.iter().map(|a| u128::from(u32::from(*a))).collect();
    written(v, 32, |a| {
        Ipv4Addr::from(u32::try_from(a).unwrap_or(u32::MAX)).to_string()
    })
}

/// [`summarise`] for IPv6: the blocks written compressed (RFC 5952, `fd00:10:244::/64`), a
/// single address without `/128`.
#[must_use]
pub fn summarise_v6(addrs: &[Ipv6Addr]) -> Vec<String> {
    let v = addrs.iter().map(|a| u128::from(*a)).collect();
    written(v, 128, |a| Ipv6Addr::from(a).to_string())
}

/// The blocks of the `width`-bit values `v`, each start written by `show`, a single address
/// without its prefix length.
fn written(v: Vec<u128>, width: u32, show: impl Fn(u128) -> String) -> Vec<String> {
    blocks(v, width)
        .into_iter()
        .map(|(start, len)| {
            if len == width {
                show(start)
            } else {
                format!("{}/{len}", show(start))
            }
        })
        .collect()
}

/// Both families' blocks, IPv4 first.
#[must_use]
pub fn summarise_any(addrs: &[IpAddr]) -> Vec<String> {
    let (mut v4, mut v6) = (Vec::new(), Vec::new());
    for a in addrs {
        match a {
            IpAddr::V4(a) => v4.push(*a),
            IpAddr::V6(a) => v6.push(*a),
        }
    }
    let mut out = summarise(&v4);
    out.extend(summarise_v6(&v6));
    out
}

/// The aligned blocks (start, prefix length) covering exactly the `width`-bit values `v`.
fn blocks(mut v: Vec<u128>, width: u32) -> Vec<(u128, u32)> {
    v.sort_unstable();
    v.dedup();
    let mut out = Vec::new();
    let mut i = 0;
    while i < v.len() {
        // Grow the block at v[i] while it stays aligned and every address in it is present
        // (the run of consecutive addresses starting at v[i] is long enough).
        let start = v[i];
        let mut run = 1usize;
        while i + run < v.len() && v[i + run].checked_sub(start) == Some(run as u128) {
            run += 1;
        }
        let mut bits = 0u32;
        while bits < width {
            let size = 1u128 << (bits + 1);
            if !start.is_multiple_of(size) || size > run as u128 {
                break;
            }
            bits += 1;
        }
        out.push((start, width - bits));
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

    fn ips6(range: std::ops::Range<u128>, base: &str) -> Vec<Ipv6Addr> {
        let base = u128::from(base.parse::<Ipv6Addr>().unwrap());
        range.map(|k| Ipv6Addr::from(base + k)).collect()
    }

    #[test]
    fn summarises_ipv6_exactly_and_compressed() {
        let cases: Vec<(Vec<Ipv6Addr>, Vec<&str>)> = vec![
            (ips6(0..1, "fd00:10:244:0:0:0:0:5"), vec!["fd00:10:244::5"]),
            (ips6(0..256, "fd00:10:244:1::"), vec!["fd00:10:244:1::/120"]),
            // ::11 to ::13 of a node network: an odd start, then a /127.
            (
                ips6(0x11..0x14, "fd00:56::"),
                vec!["fd00:56::11", "fd00:56::12/127"],
            ),
            (
                ips6(0..2, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe"),
                vec!["ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe/127"],
            ),
        ];
        for (input, want) in cases {
            assert_eq!(summarise_v6(&input), want, "{input:?}");
        }
        let mixed: Vec<IpAddr> = vec![
            "fd00:56::12".parse().unwrap(),
            "192.168.56.11".parse().unwrap(),
            "192.168.56.10".parse().unwrap(),
        ];
        assert_eq!(summarise_any(&mixed), ["192.168.56.10/31", "fd00:56::12"]);
    }
}
