//! MTU is never silently skipped: an overlay without `mtu` is probed at its encapsulation's
//! default on a 1500-byte underlay, and one whose MTU cannot be told is said to be unprobed.

use super::*;

#[test]
fn an_overlay_without_mtu_is_probed_at_its_encapsulations_default() {
    // (mode, port, the size its pods' packets are probed at; None: cannot be told)
    let cases: [(&str, u16, Option<u16>); 5] = [
        ("vxlan", 8472, Some(1450)),
        ("geneve", 6081, Some(1450)),
        ("ipip", 0, Some(1480)),
        ("wireguard", 51820, Some(1440)),
        ("other", 0, None),
    ];
    for (mode, port, want) in cases {
        let mut inv = inventory(3, 1, "calico");
        inv.cluster.overlay = Some(
            serde_saphyr::from_str(&format!("{{mode: {mode}, port: {port}, vni: 1}}")).unwrap(),
        );
        let sizes: Vec<u16> = plan(&inv, &Filter::default())
            .to_vec()
            .iter()
            .filter_map(|p| match p.probe {
                probe_proto::Probe::Mtu(probe_proto::MtuProbe { size, .. }) => Some(size),
                _ => None,
            })
            .collect();
        match want {
            Some(w) => {
                assert_eq!(sizes.len(), 6, "{mode}: every pod pair");
                assert!(sizes.iter().all(|&s| s == w), "{mode}: {sizes:?}");
            }
            None => assert!(sizes.is_empty(), "{mode}: {sizes:?}"),
        }
    }
}
