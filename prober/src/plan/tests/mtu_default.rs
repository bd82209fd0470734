//! MTU is never silently skipped: an overlay without `mtu` is probed at its encapsulation's
//! default on a 1500-byte underlay, and one whose MTU cannot be told is said to be unprobed.

use super::*;

#[test]
fn an_overlay_without_mtu_is_probed_at_its_encapsulations_default() {
    // (the overlay, the size its pods' packets are probed at; None: cannot be told)
    let cases: [(&str, Option<u16>); 5] = [
        ("{mode: vxlan, port: 8472, vni: 1}", Some(1450)),
        ("{mode: geneve, port: 6081, vni: 1}", Some(1450)),
        ("{mode: ipip}", Some(1480)),
        ("{mode: wireguard, port: 51820}", Some(1440)),
        ("{mode: none}", None),
    ];
    for (mode, want) in cases {
        let mut inv = inventory(3, 1, "calico");
        inv.cluster.overlay = Some(serde_saphyr::from_str(mode).unwrap());
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
