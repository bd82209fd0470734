//! `--sample K`: the node pairs a sampled matrix probes on a cluster too large for every pair.
//! Every node probes at least K peers and is probed by at least K, and every ordered pair of zones
//! (a node's `zone`, else its /24 subnet) has at least one probed node pair; API, DNS, Service
//! and node-config probes are not sampled (every node still tries every endpoint).
//!
//! `--sample auto` sizes K to a number of probes ([`peers_within`]: the sampled plan's own
//! count), and successive turns of a sample rotate through the node pairs: any
//! [`runs_for_coverage`] consecutive turns probe every ordered pair ([`sample_turn`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::inventory::{Inventory, Node};
use crate::model::PathClass;

/// The node pairs a sampled matrix probes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sample {
    /// Peers asked for per node.
    pub peers: usize,
    /// Node names probed by each node, node to node: the ordered pairs (from, to).
    pub pairs: BTreeMap<String, BTreeSet<String>>,
    /// Every zone, sorted.
    pub zones: Vec<String>,
    /// This sample's turn of the rotation ([`sample_turn`]), reduced modulo `runs`.
    pub turn: usize,
    /// Turns that together probe every ordered node pair: [`runs_for_coverage`].
    pub runs: usize,
}

/// What the report says was sampled (`sample` in the JSON report).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sampled {
    /// Peers each node probes and is probed by, at least.
    pub peers: usize,
    /// Ordered node pairs probed node to node, of `possiblePairs`.
    pub pairs: usize,
    pub possible_pairs: usize,
    /// The zones (label `topology.kubernetes.io/zone`, else the node's /24 subnet); every ordered
    /// pair of them, a zone with itself included when it has two nodes, has a probed node pair.
    pub zones: Vec<String>,
    /// Path classes probed only between sampled pairs; the others were probed in full.
    pub sampled_paths: Vec<PathClass>,
    /// This run's turn of the rotation, from 0; the turn after `runs - 1` is 0 again.
    #[serde(default)]
    pub turn: usize,
    /// Any `runs` successive turns (scheduled runs with `--remember`) probe every ordered node
    /// pair at least once, while the nodes and `peers` stay the same.
    #[serde(default = "one")]
    pub runs: usize,
}

fn one() -> usize {
    1
}

/// The path classes between two nodes, which a sample thins out.
pub const SAMPLED_PATHS: [PathClass; 5] = [
    PathClass::PodToPod,
    PathClass::NodeToPod,
    PathClass::PodToNode,
    PathClass::NodeToNode,
    PathClass::Overlay,
];

/// The zone a node is counted in: its zone label, else its IPv4 /24 subnet (an IPv6-only
/// node's /64).
fn zone_of(n: &Node) -> String {
    n.zone.clone().unwrap_or_else(|| match n.ipv4() {
        Some(v4) => {
            let [a, b, c, _] = v4.octets();
            format!("{a}.{b}.{c}.0/24")
        }
        None => n.ips().next().map_or_else(String::new, |ip| {
            crate::inventory::Cidr { addr: ip, len: 64 }.to_string()
        }),
    })
}

impl Sample {
    /// Whether a probe of `path` from node `from` to node `to` is in the sample. Probes that do
    /// not go from one node to another (no target node, or the node itself) always are.
    #[must_use]
    pub fn keeps(&self, path: PathClass, from: &str, to: Option<&str>) -> bool {
        let Some(to) = to.filter(|t| *t != from) else {
            return true;
        };
        !SAMPLED_PATHS.contains(&path) || self.has(from, to)
    }

    /// How many ordered node pairs are probed.
    #[must_use]
    pub fn pair_count(&self) -> usize {
        self.pairs.values().map(BTreeSet::len).sum()
    }

    /// Whether `from` probes `to` node to node.
    #[must_use]
    pub fn has(&self, from: &str, to: &str) -> bool {
        self.pairs.get(from).is_some_and(|t| t.contains(to))
    }

    /// What the report says about this sample of a cluster of `nodes` nodes.
    #[must_use]
    pub fn describe(&self, nodes: usize) -> Sampled {
        Sampled {
            peers: self.peers,
            pairs: self.pair_count(),
            possible_pairs: nodes * nodes.saturating_sub(1),
            zones: self.zones.clone(),
            sampled_paths: SAMPLED_PATHS.to_vec(),
            turn: self.turn,
            runs: self.runs,
        }
    }
}

/// Turns of the rotation that together probe every ordered pair of `nodes` nodes with `peers`
/// strides a turn: no gap between two of [`sample_turn`]'s strides is wider than
/// `ceil((n - 1) / K)`.
#[must_use]
pub fn runs_for_coverage(nodes: usize, peers: usize) -> usize {
    let others = nodes.saturating_sub(1);
    if peers == 0 || peers >= others {
        1
    } else {
        others.div_ceil(peers)
    }
}

/// `--sample auto`: the most peers per node whose sampled plan holds at most `max_probes`
/// probes, or `None` when the whole matrix does. `filter` is the run's own, without a sample.
/// Sized on the plan's real count: two small samples give the probes per sampled node pair
/// (over every kind of node, as the ring mixes them) and so a first K; K then shrinks by the
/// ratio of its plan's count to the limit until it fits, and grows once by the room left.
/// One peer when even that does not fit.
#[must_use]
pub fn peers_within(inv: &Inventory, filter: &super::Filter, max_probes: usize) -> Option<usize> {
    let n = inv.nodes.len();
    if n < 3 {
        return None;
    }
    let count = |k: usize| {
        let s = sample(inv, k);
        let pairs = s.pair_count();
        let f = super::Filter {
            sample: Some(s),
            ..filter.clone()
        };
        (super::plan(inv, &f).len(), pairs)
    };
    let (low, low_pairs) = count(1);
    if low > max_probes {
        return Some(1);
    }
    let (high, high_pairs) = count(4.min(n - 2));
    let per_pair = if high_pairs > low_pairs {
        ratio(high - low, high_pairs - low_pairs)
    } else {
        1.0
    };
    let fixed = as_f64(low) - per_pair * as_f64(low_pairs);
    // The whole matrix is counted for real only when the estimate says it is about to fit
    // (within half again): a plan no larger than that is affordable to make and drop.
    let whole = fixed + per_pair * as_f64(n * (n - 1));
    if whole <= 1.5 * as_f64(max_probes) && super::plan(inv, filter).len() <= max_probes {
        return None;
    }
    let guess = (as_f64(max_probes) - fixed) / (per_pair * as_f64(n));
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let mut k = (guess.floor().max(1.0) as usize).min(n - 2);
    let mut fits = None;
    loop {
        let (probes, _) = count(k);
        // The peers that would fill `max_probes` at this K's probes per peer.
        let scaled = |k: usize| {
            usize::try_from(k as u128 * max_probes as u128 / probes.max(1) as u128)
                .unwrap_or(usize::MAX)
        };
        if probes <= max_probes {
            let grown = scaled(k).min(n - 2);
            if fits.is_none() && grown > k {
                fits = Some(k);
                k = grown;
                continue;
            }
            return Some(k);
        }
        if let Some(smaller) = fits {
            return Some(smaller);
        }
        if k == 1 {
            return Some(1);
        }
        k = scaled(k).clamp(1, k - 1);
    }
}

#[allow(clippy::cast_precision_loss)]
fn as_f64(v: usize) -> f64 {
    v as f64
}

fn ratio(a: usize, b: usize) -> f64 {
    as_f64(a) / as_f64(b)
}

/// The sample of `inv` with `peers` peers per node: turn 0 of [`sample_turn`].
#[must_use]
pub fn sample(inv: &Inventory, peers: usize) -> Sample {
    sample_turn(inv, peers, 0)
}

/// Turn `turn` of the sample of `inv` with `peers` peers per node. Deterministic: the same
/// inventory and turn give the same pairs. Nodes are ordered round-robin across zones, so that
/// the ring's neighbours are in other zones; each node probes the nodes `s` places further for
/// `peers` strides `s` spread over the ring (so each is probed by exactly as many); a pair of
/// zones still without a probe then gets one. Turn t shifts every stride by t modulo
/// [`runs_for_coverage`]: no gap between two strides is wider than that, so any that many
/// successive turns take every stride from 1 to n - 1, which is every ordered pair of the ring.
#[must_use]
pub fn sample_turn(inv: &Inventory, peers: usize, turn: usize) -> Sample {
    let mut by_zone: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for n in &inv.nodes {
        by_zone.entry(zone_of(n)).or_default().push(&n.name);
    }
    for names in by_zone.values_mut() {
        names.sort_unstable();
    }
    let deepest = by_zone.values().map(Vec::len).max().unwrap_or(0);
    let ring: Vec<&str> = (0..deepest)
        .flat_map(|i| by_zone.values().filter_map(move |z| z.get(i).copied()))
        .collect();
    let n = ring.len();
    let runs = runs_for_coverage(n, peers);
    let shift = turn % runs;
    let mut pairs: BTreeSet<(&str, &str)> = BTreeSet::new();
    if peers >= n.saturating_sub(1) {
        // Asked for as many peers as there are: every pair.
        for a in &ring {
            pairs.extend(ring.iter().filter(|b| *b != a).map(|b| (*a, *b)));
        }
    } else if peers > 0 {
        // Strides 1 + (floor(j (n-1) / K) + shift) mod (n-1), j < K: distinct and in 1..n,
        // since K < n - 1 and the shift moves them all alike.
        let strides: Vec<usize> = (0..peers)
            .map(|j| 1 + (j * (n - 1) / peers + shift) % (n - 1))
            .collect();
        for (i, a) in ring.iter().enumerate() {
            pairs.extend(strides.iter().map(|s| (*a, ring[(i + s) % n])));
        }
    }
    let zone: BTreeMap<&str, &str> = by_zone
        .iter()
        .flat_map(|(z, names)| names.iter().map(move |n| (*n, z.as_str())))
        .collect();
    let covered: BTreeSet<(&str, &str)> = pairs.iter().map(|(a, b)| (zone[a], zone[b])).collect();
    let mut extra = 0;
    for (za, a_nodes) in &by_zone {
        for (zb, b_nodes) in &by_zone {
            if covered.contains(&(za.as_str(), zb.as_str())) {
                continue;
            }
            // Spread the extra probes over the zones' nodes rather than always the first.
            let a = a_nodes[extra % a_nodes.len()];
            let pick = b_nodes
                .iter()
                .cycle()
                .skip(extra)
                .take(b_nodes.len())
                .find(|b| **b != a);
            if let Some(b) = pick {
                pairs.insert((a, *b));
                extra += 1;
            }
        }
    }
    Sample {
        peers,
        pairs: pairs.into_iter().fold(BTreeMap::new(), |mut m, (a, b)| {
            m.entry(a.to_string())
                .or_insert_with(BTreeSet::new)
                .insert(b.to_string());
            m
        }),
        zones: by_zone.into_keys().collect(),
        turn: shift,
        runs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{inventory, zones_round_robin};

    fn degrees(s: &Sample, inv: &Inventory) -> Vec<(usize, usize)> {
        inv.nodes
            .iter()
            .map(|n| {
                let out = s.pairs.get(&n.name).map_or(0, BTreeSet::len);
                let inn = s.pairs.values().filter(|t| t.contains(&n.name)).count();
                (out, inn)
            })
            .collect()
    }

    #[test]
    fn every_node_probes_and_is_probed_by_at_least_k_peers() {
        for (nodes, zones, k) in [(30, 3, 3), (31, 4, 2), (10, 1, 5), (7, 0, 1)] {
            let inv = zones_round_robin(nodes, zones);
            let s = sample(&inv, k);
            for (i, (out, inn)) in degrees(&s, &inv).into_iter().enumerate() {
                assert!(
                    out >= k && inn >= k,
                    "node {i} of {nodes}: {out} out, {inn} in, k {k}"
                );
            }
            assert!(s.pairs.iter().all(|(a, t)| !t.contains(a)));
            // A sample, not the matrix: about K per node, plus a few for the zone pairs.
            assert!(
                s.pair_count() <= nodes * k + zones * zones,
                "{}",
                s.pair_count()
            );
        }
    }

    #[test]
    fn every_ordered_pair_of_zones_is_covered() {
        // Uneven zones: 13 nodes in 7 zones, two in z0..z5 and z6 alone (no pair within it).
        let inv = zones_round_robin(13, 7);
        let s = sample(&inv, 1);
        let zone: BTreeMap<&str, &str> = inv
            .nodes
            .iter()
            .map(|n| (n.name.as_str(), n.zone.as_deref().unwrap()))
            .collect();
        let covered: BTreeSet<(&str, &str)> = s
            .pairs
            .iter()
            .flat_map(|(a, t)| t.iter().map(|b| (zone[a.as_str()], zone[b.as_str()])))
            .collect();
        for za in &s.zones {
            for zb in &s.zones {
                let alone = za == zb
                    && inv
                        .nodes
                        .iter()
                        .filter(|n| n.zone.as_ref() == Some(za))
                        .count()
                        < 2;
                assert!(
                    alone || covered.contains(&(za.as_str(), zb.as_str())),
                    "{za} -> {zb} not covered"
                );
            }
        }
        assert_eq!(s.zones.len(), 7);
    }

    #[test]
    fn without_zone_labels_the_subnet_is_the_zone() {
        let inv = zones_round_robin(5, 0);
        let s = sample(&inv, 2);
        assert_eq!(s.zones, vec!["192.168.56.0/24".to_string()]);
    }

    #[test]
    fn the_same_inventory_gives_the_same_sample_whatever_its_order() {
        let inv = zones_round_robin(40, 3);
        let mut shuffled = inv.clone();
        shuffled.nodes.reverse();
        assert_eq!(sample(&inv, 3), sample(&shuffled, 3));
        assert_ne!(sample(&inv, 3).pairs, sample(&inv, 4).pairs);
    }

    #[test]
    fn asking_for_as_many_peers_as_there_are_is_the_full_matrix() {
        let inv = zones_round_robin(6, 2);
        assert_eq!(sample(&inv, 5).pair_count(), 30);
        assert_eq!(sample(&inv, 50).pair_count(), 30);
    }

    #[test]
    fn only_node_pairs_are_thinned_out() {
        let inv = zones_round_robin(10, 2);
        let s = sample(&inv, 1);
        let (a, t) = s.pairs.iter().next().unwrap();
        let b = t.iter().next().unwrap();
        let missing = inv
            .nodes
            .iter()
            .find(|n| n.name != *a && !s.has(a, &n.name))
            .unwrap();
        assert!(s.keeps(PathClass::PodToPod, a, Some(b)));
        assert!(!s.keeps(PathClass::PodToPod, a, Some(&missing.name)));
        assert!(!s.keeps(PathClass::Overlay, a, Some(&missing.name)));
        assert!(s.keeps(PathClass::NodeToApiserver, a, Some(&missing.name)));
        assert!(s.keeps(PathClass::Dns, a, None));
        assert!(s.keeps(PathClass::PodToNode, a, Some(a)));
    }

    #[test]
    fn a_sampled_plan_keeps_every_api_dns_and_node_probe() {
        let inv = zones_round_robin(12, 3);
        let full = crate::plan::plan(&inv, &crate::plan::Filter::default()).to_vec();
        let filter = crate::plan::Filter {
            sample: Some(sample(&inv, 2)),
            ..crate::plan::Filter::default()
        };
        let thin = crate::plan::plan(&inv, &filter).to_vec();
        assert!(
            thin.len() < full.len() / 2,
            "{} of {}",
            thin.len(),
            full.len()
        );
        for p in &full {
            let kept = thin.iter().any(|t| t.id == p.id);
            let between = p.to.node.as_deref().is_some_and(|t| t != p.from.node);
            if !SAMPLED_PATHS.contains(&p.path) || !between {
                assert!(kept, "{} dropped", p.id);
            }
        }
        for class in [
            PathClass::NodeToApiserver,
            PathClass::PodToApiserver,
            PathClass::Dns,
        ] {
            let n = |v: &[crate::plan::PlannedProbe]| v.iter().filter(|p| p.path == class).count();
            assert!(n(&thin) > 0 && n(&thin) == n(&full), "{class}");
        }
    }

    fn pairs_of(s: &Sample) -> BTreeSet<(String, String)> {
        s.pairs
            .iter()
            .flat_map(|(a, t)| t.iter().map(|b| (a.clone(), b.clone())))
            .collect()
    }

    #[test]
    fn successive_turns_cover_every_ordered_pair_within_the_stated_runs() {
        for (nodes, zones, k) in [(30, 3, 4), (31, 4, 2), (12, 0, 1), (50, 5, 7), (23, 2, 21)] {
            let inv = zones_round_robin(nodes, zones);
            let runs = runs_for_coverage(nodes, k);
            assert_eq!(runs, (nodes - 1).div_ceil(k).max(1), "{nodes} nodes, K {k}");
            // Simulated scheduled runs, each taking the turn after the last, from any start.
            for start in [0, 3, runs - 1] {
                let mut seen = BTreeSet::new();
                for run in 0..runs {
                    let s = sample_turn(&inv, k, start + run);
                    assert_eq!((s.turn, s.runs), ((start + run) % runs, runs));
                    // Every turn is a sample as good as the first.
                    for (out, inn) in degrees(&s, &inv) {
                        assert!(out >= k && inn >= k, "turn {}: {out} out, {inn} in", s.turn);
                    }
                    let before = seen.len();
                    seen.extend(pairs_of(&s));
                    assert!(run == 0 || seen.len() > before, "run {run} added nothing");
                    if run + 2 == runs {
                        assert!(seen.len() < nodes * (nodes - 1), "covered a run early");
                    }
                }
                assert_eq!(seen.len(), nodes * (nodes - 1), "{nodes} nodes, K {k}");
            }
            // The turn after the last is the first again.
            assert_eq!(sample_turn(&inv, k, runs), sample(&inv, k));
        }
        assert_eq!(runs_for_coverage(10, 9), 1);
        assert_eq!(runs_for_coverage(10, 50), 1);
        assert_eq!(runs_for_coverage(1000, 300), 4);
    }

    /// The plan's probe count with a sample of `k` peers (`None`: the whole matrix).
    fn planned(inv: &Inventory, filter: &crate::plan::Filter, k: Option<usize>) -> usize {
        let f = crate::plan::Filter {
            sample: k.map(|k| sample(inv, k)),
            ..filter.clone()
        };
        crate::plan::plan(inv, &f).len()
    }

    #[test]
    fn auto_fits_the_sample_to_the_probes_allowed_for_every_inventory_shape() {
        let mut calico = inventory(40, 3, "calico");
        calico.nodes.truncate(40);
        let shapes: Vec<(&str, Inventory, crate::plan::Filter)> = vec![
            (
                "3 zones",
                zones_round_robin(60, 3),
                crate::plan::Filter::default(),
            ),
            (
                "no zone labels",
                zones_round_robin(45, 0),
                crate::plan::Filter::default(),
            ),
            (
                "3 control planes, calico",
                calico,
                crate::plan::Filter::default(),
            ),
            (
                "a quarter control planes",
                inventory(48, 12, "flannel"),
                crate::plan::Filter::default(),
            ),
            (
                "overlay skipped",
                zones_round_robin(50, 2),
                crate::plan::Filter {
                    skip_paths: vec![PathClass::Overlay],
                    ..crate::plan::Filter::default()
                },
            ),
        ];
        for (shape, inv, filter) in &shapes {
            let full = planned(inv, filter, None);
            assert_eq!(
                peers_within(inv, filter, full),
                None,
                "{shape}: the whole fits"
            );
            for share in [2, 5, 20] {
                let max = full / share;
                let k = peers_within(inv, filter, max).expect("a sample");
                if planned(inv, filter, Some(1)) > max {
                    // Not even one peer fits: one peer, the least sample there is.
                    assert_eq!(k, 1, "{shape} 1/{share}");
                    continue;
                }
                let n = planned(inv, filter, Some(k));
                // Within the limit, and not far below it: a few more peers would not fit.
                assert!(n <= max, "{shape} 1/{share}: K {k} plans {n} > {max}");
                let more = planned(inv, filter, Some(k + 1 + k / 10));
                assert!(
                    more > max,
                    "{shape} 1/{share}: K {k} ({n}) leaves room for more ({more} of {max})"
                );
            }
            // A limit below one peer's plan still probes one peer per node.
            assert_eq!(peers_within(inv, filter, 1), Some(1), "{shape}");
        }
    }
}
