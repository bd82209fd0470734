//! What a scenario's IP families allow: the families the lab builds, what it builds them with,
//! and where an IPv6 twin of the VXLAN device (`overlay.ipv6Tunnel`) can go.

use super::{InvalidScenario, Scenario};
use crate::inventory::{Cni, Family, OverlayMode};

/// Families as a scenario writes them: `[ipv4, ipv6]`.
fn families_text(f: &[Family]) -> String {
    let names: Vec<&str> = f.iter().map(|f| f.as_str()).collect();
    format!("[{}]", names.join(", "))
}

impl Scenario {
    /// The families the lab builds, and what it builds them with.
    pub(super) fn validate_families(&self) -> Result<(), InvalidScenario> {
        let f = &self.ip_families;
        if *f != [Family::Ipv4] && *f != [Family::Ipv4, Family::Ipv6] && *f != [Family::Ipv6] {
            return Err(InvalidScenario::Families(families_text(f)));
        }
        if self.dual_stack() && self.routers != 1 {
            return Err(InvalidScenario::FamiliesWith("routers: 2"));
        }
        if self.dual_stack() && self.candidate.is_some() {
            return Err(InvalidScenario::FamiliesWith("candidate"));
        }
        let mode = self.overlay().mode();
        if self.ipv6_underlay() && mode != OverlayMode::Vxlan {
            return Err(InvalidScenario::Ipv6UnderlayMode(mode.as_str()));
        }
        self.validate_ipv6_tunnel()
    }

    /// `overlay.ipv6Tunnel` is a second VXLAN device beside the IPv4 one: dual-stack, VXLAN, and
    /// a CNI that runs two (Cilium carries both families through its one device).
    fn validate_ipv6_tunnel(&self) -> Result<(), InvalidScenario> {
        if !self.ipv6_tunnel() {
            return Ok(());
        }
        let mode = self.overlay().mode();
        let needs = if self.ip_families != [Family::Ipv4, Family::Ipv6] {
            format!(
                "a dual-stack lab (ipFamilies: [ipv4, ipv6]), not ipFamilies: {}",
                families_text(&self.ip_families)
            )
        } else if mode != OverlayMode::Vxlan {
            format!("overlay.mode vxlan, not {}", mode.as_str())
        } else if self.cni == Cni::Cilium {
            "cni flannel or calico, not cilium (its one device carries both families)".into()
        } else {
            return Ok(());
        };
        Err(InvalidScenario::Ipv6Tunnel(needs))
    }
}
