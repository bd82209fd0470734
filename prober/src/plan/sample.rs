//! `--sample K`: the node pairs a sampled matrix probes on a cluster too large for every pair.
//! Every node probes at least K peers and is probed by at least K, and every ordered pair of zones
//! (a node's `zone`, else its /24 subnet) has at least one probed node pair; API, DNS, Service
//! and node-config probes are not sampled (every node still tries every endpoint).

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
}

/// The path classes between two nodes, which a sample thins out.
pub const SAMPLED_PATHS: [PathClass; 5] = [
    PathClass::PodToPod,
    PathClass::NodeToPod,
    PathClass::PodToNode,
    PathClass::NodeToNode,
    PathClass::Overlay,
];

/// The zone a node is counted in: its zone label, else its /24 subnet.
fn zone_of(n: &Node) -> String {
    n.zone.clone().unwrap_or_else(|| {
        let [a, b, c, _] = n.address.octets();
        format!("{a}.{b}.{c}.0/24")
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
        }
    }
}

/// The sample of `inv` with `peers` peers per node. Deterministic: the same inventory gives the
/// same pairs. Nodes are ordered round-robin across zones, so that the ring's neighbours are in
/// other zones; each node probes the nodes `s` places further for `peers` strides `s` spread over
/// the ring (so each is probed by exactly as many); a pair of zones still without a probe then
/// gets one.
#[must_use]
pub fn sample(inv: &Inventory, peers: usize) -> Sample {
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
    let mut pairs: BTreeSet<(&str, &str)> = BTreeSet::new();
    if peers >= n.saturating_sub(1) {
        // Asked for as many peers as there are: every pair.
        for a in &ring {
            pairs.extend(ring.iter().filter(|b| *b != a).map(|b| (*a, *b)));
        }
    } else if peers > 0 {
        // Strides 1 + floor(j (n-1) / K), j < K: distinct and in 1..n, since K < n - 1.
        let strides: Vec<usize> = (0..peers).map(|j| 1 + j * (n - 1) / peers).collect();
        for (i, a) in ring.iter().enumerate() {
            pairs.extend(strides.iter().map(|s| (*a, ring[(i + s) % n])));
        }
    }
    let zone: BTreeMap<&str, &str> = by_zone
        .iter()
        .flat_map(|(z, names)| names.iter().map(move |n| (*n, z.as_str())))
        .collect();
    let covered: BTreeSet<(&str, &str)> = pairs.iter().map(|(a, b)| (zone[a], zone[b])).collect();
    let mut turn = 0;
    for (za, a_nodes) in &by_zone {
        for (zb, b_nodes) in &by_zone {
            if covered.contains(&(za.as_str(), zb.as_str())) {
                continue;
            }
            // Spread the extra probes over the zones' nodes rather than always the first.
            let a = a_nodes[turn % a_nodes.len()];
            let pick = b_nodes
                .iter()
                .cycle()
                .skip(turn)
                .take(b_nodes.len())
                .find(|b| **b != a);
            if let Some(b) = pick {
                pairs.insert((a, *b));
                turn += 1;
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::inventory;

    /// `nodes` nodes in `zones` zones, round-robin, or with no zone label when `zones` is 0.
    fn zoned(nodes: usize, zones: usize) -> Inventory {
        let mut inv = inventory(nodes, 1, "flannel");
        for (i, n) in inv.nodes.iter_mut().enumerate() {
            n.zone = (zones > 0).then(|| format!("z{}", i % zones));
        }
        inv
    }

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
            let inv = zoned(nodes, zones);
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
        let inv = zoned(13, 7);
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
        let inv = zoned(5, 0);
        let s = sample(&inv, 2);
        assert_eq!(s.zones, vec!["192.168.56.0/24".to_string()]);
    }

    #[test]
    fn the_same_inventory_gives_the_same_sample_whatever_its_order() {
        let inv = zoned(40, 3);
        let mut shuffled = inv.clone();
        shuffled.nodes.reverse();
        assert_eq!(sample(&inv, 3), sample(&shuffled, 3));
        assert_ne!(sample(&inv, 3).pairs, sample(&inv, 4).pairs);
    }

    #[test]
    fn asking_for_as_many_peers_as_there_are_is_the_full_matrix() {
        let inv = zoned(6, 2);
        assert_eq!(sample(&inv, 5).pair_count(), 30);
        assert_eq!(sample(&inv, 50).pair_count(), 30);
    }

    #[test]
    fn only_node_pairs_are_thinned_out() {
        let inv = zoned(10, 2);
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
        let inv = zoned(12, 3);
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
}
