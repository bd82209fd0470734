//! MTU is never silently skipped: an overlay without `mtu` is probed at each pod's own interface
//! MTU (the agent reads it and reports what it sent), under every encapsulation and native
//! routing alike; an inventory MTU is probed as given.

use super::*;

#[test]
fn an_overlay_without_mtu_is_probed_at_the_pods_own_mtu() {
    // (the overlay, the size its pods' packets are probed at; None: the agent's own)
    let cases: [(&str, Option<u16>); 7] = [
        ("{mode: vxlan, port: 8472, vni: 1}", None),
        ("{mode: geneve, port: 6081, vni: 1}", None),
        ("{mode: ipip}", None),
        ("{mode: wireguard, port: 51820}", None),
        ("{mode: none}", None),
        ("{mode: vxlan, port: 8472, vni: 1, mtu: 1410}", Some(1410)),
        ("{mode: none, mtu: 9000}", Some(9000)),
    ];
    for (mode, want) in cases {
        let mut inv = inventory(3, 1, "calico");
        inv.cluster.overlay = Some(serde_saphyr::from_str(mode).unwrap());
        let planned = plan(&inv, &Filter::default()).to_vec();
        let mtu: Vec<(&str, Option<u16>)> = planned
            .iter()
            .filter_map(|p| match p.probe {
                probe_proto::Probe::Mtu(probe_proto::MtuProbe { size, .. }) => {
                    Some((p.id.as_str(), size))
                }
                _ => None,
            })
            .collect();
        assert_eq!(mtu.len(), 6, "{mode}: every ordered pod pair: {mtu:?}");
        assert!(mtu.iter().all(|&(_, s)| s == want), "{mode}: {mtu:?}");
        let label = want.map_or_else(|| "mtu/own".to_string(), |s| format!("mtu/{s}"));
        assert!(
            mtu.iter().all(|(id, _)| id.ends_with(&label)),
            "{mode}: ids name the size or say it is the pod's own: {mtu:?}"
        );
    }
}
