//! `probe-pod probe --simulate`: answers every probe of a plan at once as a healthy cluster would,
//! sending nothing. It lets the coordinator's whole pipeline (plan, run, diagnose, report) be
//! measured at 1,000 nodes on one machine without a packet on any network; every answer says it
//! was simulated, so such a report can never pass for a real one.

use std::net::Ipv4Addr;

use crate::proto::{
    GeneveProbe, IpipProbe, MtuProbe, NodeFacts, NodeProbe, Outcome, Probe, ProbeResult, ProbeSpec,
    SeenProbe, Sighting, VxlanProbe, WireguardProbe,
};

/// What every simulated answer's detail begins with.
pub const MARK: &str = "simulated";

/// A round trip that looks like a quiet LAN (100-611 us), the same for the same probe id, so a
/// simulated report has latencies to summarise and is reproducible.
fn rtt_for(id: &str) -> u64 {
    let h = id.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    100 + u64::from(h % 512)
}

/// The answer a healthy cluster gives `spec`, shaped like the real probe's (the same fields set),
/// made up without sending anything. `now_ms` dates the sightings of `seen` answers.
#[must_use]
pub fn answer(spec: &ProbeSpec, now_ms: u64) -> ProbeResult {
    let id = spec.id.clone();
    let what = spec.probe.kind();
    let mut r = ProbeResult::new(id, Outcome::Ok, format!("{MARK} {what}: ok"));
    match &spec.probe {
        Probe::Tcp(_)
        | Probe::Udp(_)
        | Probe::Hop(_)
        | Probe::Icmp(_)
        | Probe::Vtep(_)
        | Probe::Dns(_) => {
            r.rtt_micros = Some(rtt_for(&spec.id));
        }
        Probe::Mtu(MtuProbe { size, .. }) => {
            // A simulated interface's MTU is the overlay's usual one.
            let size = size.unwrap_or(1450);
            r.rtt_micros = Some(rtt_for(&spec.id));
            r.path_mtu = Some(u32::from(size).max(1500));
            r.packet_size = Some(size);
        }
        Probe::Tls(_) => {
            r.rtt_micros = Some(rtt_for(&spec.id));
            r.http_status = Some(200);
        }
        // A crafted datagram has no round trip; the receiver's sniffer confirms it.
        Probe::Vxlan(VxlanProbe { nonce, .. })
        | Probe::Ipip(IpipProbe { nonce, .. })
        | Probe::Geneve(GeneveProbe { nonce, .. })
        | Probe::Wireguard(WireguardProbe { nonce, .. }) => r.nonce = Some(nonce.unwrap_or(0)),
        // The sniffer saw every nonce asked for, on the underlay and decapsulated.
        Probe::Seen(SeenProbe { nonces, .. }) => {
            let seen = nonces.iter().flatten().flat_map(|&nonce| {
                [("eth0", false), ("flannel.1", true)].map(|(interface, decapsulated)| Sighting {
                    nonce,
                    interface: interface.to_string(),
                    from: Ipv4Addr::UNSPECIFIED.into(),
                    decapsulated,
                    at_ms: now_ms,
                    kind: probe_proto::SightingKind::Vxlan,
                    flow: None,
                    reply: false,
                })
            });
            r.seen = Some(seen.collect());
        }
        Probe::Node(NodeProbe { root, .. }) => {
            r.node = Some(Box::new(NodeFacts {
                root: root.display().to_string(),
                ..NodeFacts::default()
            }));
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{Port, TcpProbe};

    fn spec(probe: Probe) -> ProbeSpec {
        ProbeSpec {
            id: "p1".into(),
            timeout_ms: None,
            probe,
        }
    }

    #[test]
    fn every_answer_is_ok_and_says_it_was_simulated() {
        let tcp = answer(
            &spec(Probe::Tcp(TcpProbe {
                address: "10.0.0.1".parse().unwrap(),
                port: Port::new(10250).unwrap(),
                echo: false,
            })),
            1,
        );
        assert_eq!(tcp.outcome, Outcome::Ok);
        assert_eq!(tcp.id, "p1");
        assert!(tcp.detail.starts_with(MARK), "{}", tcp.detail);
        assert!(tcp.rtt_micros.is_some_and(|r| (100..612).contains(&r)));
    }

    #[test]
    fn a_seen_question_is_answered_for_exactly_the_nonces_asked() {
        let r = answer(
            &spec(Probe::Seen(SeenProbe {
                since_ms: 0,
                nonces: Some(vec![7, 9]),
                flows: None,
                port: Port::new(9917).unwrap(),
            })),
            42,
        );
        let seen = r.seen.unwrap();
        assert_eq!(seen.len(), 4);
        assert!(
            seen.iter()
                .all(|s| [7, 9].contains(&s.nonce) && s.at_ms == 42)
        );
        assert_eq!(seen.iter().filter(|s| s.decapsulated).count(), 2);
    }
}
