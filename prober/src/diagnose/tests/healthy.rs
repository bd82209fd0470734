//! A healthy cluster: no finding, and on the service path only the latent cycle every such cluster
//! has.

use super::*;

#[test]
fn healthy_cluster_has_no_findings() {
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run(&inv, &|_| None);
    assert!(f.is_empty(), "{f:#?}");
}

#[test]
fn healthy_dual_stack_cluster_has_no_findings() {
    let inv = inventory(3, 1, "flannel");
    let (results, f) = run_dual(&inv, &|_| None);
    assert!(
        results
            .iter()
            .any(|r| r.to.family() == crate::model::Family::Ipv6)
    );
    assert!(f.is_empty(), "{f:#?}");
}
