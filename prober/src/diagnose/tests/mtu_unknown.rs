//! An overlay whose MTU cannot be told is said to be unprobed, never passed over in silence;
//! one the encapsulation implies is probed and says nothing when healthy.

use super::*;

#[test]
fn an_overlay_mtu_that_cannot_be_told_is_a_warning() {
    // (the overlay, whether the warning is due)
    for (mode, warned) in [
        ("{mode: none}", true),
        ("{mode: vxlan, port: 8472, vni: 1}", false),
        ("{mode: ipip}", false),
    ] {
        let mut inv = inventory(3, 1, "calico");
        inv.cluster.overlay = Some(serde_saphyr::from_str(mode).unwrap());
        let (_, f) = run(&inv, &|_| None);
        let said = f.iter().any(|f| {
            f.kind() == Kind::Mtu
                && f.severity == Severity::Warning
                && f.summary.starts_with("MTU not probed")
        });
        assert_eq!(said, warned, "{mode}: {f:#?}");
    }
}
