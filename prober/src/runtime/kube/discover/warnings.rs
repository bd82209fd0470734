//! What discovery filled in because the cluster did not say it, for the operator to read before
//! trusting the inventory (printed with what discovery was not allowed to read).

use crate::inventory::Inventory;

/// One sentence per guess the inventory rests on.
#[must_use]
pub fn warnings(inv: &Inventory) -> Vec<String> {
    let mut out = Vec::new();
    let pods = inv.cluster.pod_cidr;
    if pods.len == 0 {
        out.push(format!(
            "found no pod range (no cluster CIDR in the CNI's configuration, no node podCIDR, no pod address to derive one from), so the inventory's podCIDR is {}/0 and every address counts as a pod's; save the inventory (prober discover > inventory.yaml), set cluster.podCIDR and pass --inventory",
            pods.addr
        ));
    }
    if inv.cluster.node_files.is_none() && !inv.nodes.is_empty() {
        out.push(
            "could not tell the distribution from the nodes (they carry no k3s, RKE2, EKS, GKE or kubeadm mark, or not all the same one), so the host agents mount none of the kubelet's and the CNI's files and the node checks that read them are skipped; `prober manifests --distribution NAME` shows the agents with them for a permanent install".into(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::Cidr;
    use std::net::Ipv4Addr;

    #[test]
    fn an_unknown_distribution_is_said_not_guessed() {
        let mut inv = crate::testutil::inventory(2, 1, "flannel");
        inv.cluster.node_files = None;
        let w = warnings(&inv);
        assert!(
            w.iter()
                .any(|w| w.starts_with("could not tell the distribution")),
            "{w:?}"
        );
    }

    #[test]
    fn the_everything_pod_range_is_said_and_a_found_one_is_not() {
        let mut inv = crate::testutil::inventory(2, 1, "flannel");
        inv.cluster.node_files = Some(crate::inventory::NodeFiles::kubeadm());
        assert!(warnings(&inv).is_empty(), "{:?}", warnings(&inv));
        inv.cluster.pod_cidr = Cidr::v4(Ipv4Addr::UNSPECIFIED, 0);
        let w = warnings(&inv);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("found no pod range") && w[0].contains("podCIDR is 0.0.0.0/0"),
            "{}",
            w[0]
        );
    }
}
