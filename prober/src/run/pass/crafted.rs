//! Crafted datagrams (VXLAN, Geneve, IP-in-IP, WireGuard): what makes a probe one, and how its
//! "sent" becomes what the receiver's sniffer saw of its nonce.

use std::collections::HashMap;

use probe_proto::{Outcome, Probe, ProbeResult, Receipt, Sighting};

/// A crafted datagram: its outcome is what the receiver's sniffer saw of its nonce.
pub(in crate::run) fn crafted(p: &Probe) -> bool {
    matches!(
        p,
        Probe::Vxlan(_) | Probe::Ipip(_) | Probe::Geneve(_) | Probe::Wireguard(_)
    )
}

/// The receiver's device a crafted probe must reach to count as decapsulated, for messages.
pub(in crate::run) fn device_of(p: &Probe) -> &'static str {
    match p {
        Probe::Ipip(_) => "tunnel device (IP-in-IP)",
        Probe::Geneve(_) => "tunnel device (Geneve)",
        // Without the keys nothing is decapsulated: arrival on the NIC is the receipt.
        Probe::Wireguard(_) => "",
        _ => "VXLAN device",
    }
}

/// A receiver's answer (what its sniffer saw), its sightings indexed by nonce once: each of the
/// receiver's probes looks up its own instead of reading every sighting (at 1,000 nodes a
/// receiver answers for about 1,000 senders, each probe's scan made this cubic).
pub(in crate::run) struct Answer<'a> {
    answer: &'a ProbeResult,
    by_nonce: HashMap<u32, Vec<&'a Sighting>>,
}

impl<'a> Answer<'a> {
    pub(in crate::run) fn new(answer: &'a ProbeResult) -> Self {
        let mut by_nonce: HashMap<u32, Vec<&Sighting>> = HashMap::new();
        for s in answer.seen.iter().flatten() {
            by_nonce.entry(s.nonce).or_default().push(s);
        }
        Self { answer, by_nonce }
    }

    fn of(&self, nonce: u32) -> &[&'a Sighting] {
        self.by_nonce.get(&nonce).map_or(&[], Vec::as_slice)
    }
}

/// Turns a "sent" VXLAN, Geneve or IP-in-IP result into what the receiver saw: decapsulated on its VXLAN device
/// (`ok`), only on its NIC (dropped by the host), or nowhere (dropped on the way).
pub(in crate::run) fn confirm_vxlan(
    r: &mut ProbeResult,
    device: &str,
    nonce: u32,
    node: &str,
    answer: Option<&Answer<'_>>,
    failed: Option<&String>,
) {
    let Some(answer) = answer.filter(|a| a.answer.outcome == Outcome::Ok) else {
        let why = failed
            .cloned()
            .or_else(|| answer.map(|a| a.answer.detail.clone()))
            .unwrap_or_else(|| "no answer".into());
        r.outcome = Outcome::Error;
        r.detail = format!("sent nonce {nonce}, but {node}'s sniffer could not be asked: {why}");
        return;
    };
    let sightings = answer.of(nonce);
    let mut outer: Vec<&str> = sightings
        .iter()
        .filter(|s| !s.decapsulated)
        .map(|s| s.interface.as_str())
        .collect();
    let mut inner: Vec<&str> = sightings
        .iter()
        .filter(|s| s.decapsulated)
        .map(|s| s.interface.as_str())
        .collect();
    outer.sort_unstable();
    outer.dedup();
    inner.sort_unstable();
    inner.dedup();
    r.seen = Some(sightings.iter().map(|&s| s.clone()).collect());
    if device.is_empty() && !outer.is_empty() {
        // A WireGuard port: arrival on the NIC is all there is to confirm.
        r.receipt = Some(Receipt::Delivered);
        r.detail = format!(
            "arrived on {node}'s {} (WireGuard port: arrival on the NIC is all that can be confirmed without its keys)",
            outer.join(",")
        );
    } else if !inner.is_empty() {
        r.receipt = Some(Receipt::Delivered);
        r.detail = format!(
            "{node} received it on {} and decapsulated it on {}",
            outer.join(","),
            inner.join(",")
        );
    } else if !outer.is_empty() {
        r.outcome = Outcome::Timeout;
        r.receipt = Some(Receipt::HostDropped);
        r.detail = format!(
            "reached {node}'s {} but never its {device}: dropped by {node} itself (its firewall, or a VNI/port mismatch)",
            outer.join(",")
        );
    } else {
        r.outcome = Outcome::Timeout;
        r.receipt = Some(Receipt::NotArrived);
        r.detail = format!(
            "never reached {node}: dropped on the way (the network, or the sender's own firewall)"
        );
    }
}
