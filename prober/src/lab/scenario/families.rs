//! What a scenario's IP families allow: the families the lab builds and what it builds them
//! with.

use super::{InvalidScenario, Scenario};
use crate::inventory::{Family, OverlayMode};

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
        Ok(())
    }
}
