//! An ICMP administratively-prohibited from a router is decisive: a firewall gap at that router,
//! whatever else was or was not probed between the pair (preflight's control plane probes the
//! candidate on a few ports only).

use super::*;
use crate::plan::preflight::{preflight, with_candidate};

/// Preflight's plan for `new` joining a 3-node flannel cluster, with the control plane's (n1)
/// probes of the kubelet port rejected by the router in front of the candidate and, when
/// `overlay_dropped`, its VXLAN datagrams dropped there too.
fn rejected_by_router(overlay_dropped: bool, sender: &str) -> (Vec<ResultRecord>, Vec<Finding>) {
    let inv = inventory(3, 1, "flannel");
    let c = crate::testutil::candidate();
    let results: Vec<ResultRecord> = preflight(&inv, &c)
        .to_vec()
        .iter()
        .map(|p| {
            let toward = p.from.node == sender && p.to.node.as_deref() == Some("new");
            let mut result = ProbeResult::new(p.id.clone(), Outcome::Ok, "ok");
            if toward && p.to.port == Some(10250) {
                result = ProbeResult::new(
                    p.id.clone(),
                    Outcome::Rejected,
                    "ICMP communication administratively prohibited from 192.168.57.1",
                );
                result.icmp = Some(IcmpInfo {
                    icmp_type: 3,
                    code: 13,
                    from: Some("192.168.57.1".parse().unwrap()),
                });
            } else if toward && overlay_dropped && p.path == PathClass::Overlay {
                result = ProbeResult::new(p.id.clone(), Outcome::Timeout, "no answer");
            }
            ResultRecord {
                path: p.path,
                from: p.from.clone(),
                to: p.to.clone(),
                unknown: None,
                result,
            }
        })
        .collect();
    let f = diagnose(&with_candidate(&inv, &c), &Results::of(&results), &[]);
    (results, f)
}

#[test]
fn a_rejection_with_a_named_sender_is_a_gap_at_that_sender() {
    for (overlay_dropped, sender) in [(false, "n1"), (true, "n1"), (true, "n2")] {
        let (results, f) = rejected_by_router(overlay_dropped, sender);
        assert_every_failure_explained(&results, &f);
        assert!(
            !kinds(&f).contains(&Kind::Unexplained),
            "{overlay_dropped}/{sender}: {f:#?}"
        );
        let gap = f
            .iter()
            .find(|g| g.kind() == Kind::FirewallGap && g.facts().port() == Some(10250))
            .unwrap_or_else(|| panic!("{overlay_dropped}/{sender}: {f:#?}"));
        assert!(
            like(json!({"protocol": "tcp", "from": [sender], "to": ["new"], "direction": "one", "where": "network"})).matches(gap),
            "{gap:#?}"
        );
        assert!(gap.summary.contains("192.168.57.1"), "{}", gap.summary);
        if overlay_dropped {
            assert!(
                f.iter().any(|g| like(json!({"kind": "firewall-gap", "protocol": "udp", "port": 8472, "from": [sender], "to": ["new"]})).matches(g)),
                "{f:#?}"
            );
        }
    }
}
