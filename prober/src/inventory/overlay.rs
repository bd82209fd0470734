//! The inventory's overlay: one variant per encapsulation with exactly the fields it has, read
//! from and written as the flat `{mode, port, vni, mtu}` the inventory has always carried.

use probe_proto::{Port, Vni};
use serde::{Deserialize, Serialize};

/// How pod packets cross between nodes: the encapsulation and what it needs. Every kind carries
/// `mtu`, the MTU pods see over it (1450 for VXLAN on a 1500 underlay): when known, the matrix
/// sends packets of exactly this size between pods to find MTU black holes.
///
/// In YAML it is `{mode, port, vni, mtu}` as it always was: `port` and `vni` only where the
/// encapsulation has them (`{mode: ipip}` is complete), and written as 0 where it has none, so
/// an inventory this version writes is read by the versions before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "OverlayYaml", into = "OverlayYaml")]
pub enum Overlay {
    /// Flannel's and Cilium's 8472, Calico's 4789.
    Vxlan {
        port: Port,
        vni: Vni,
        mtu: Option<u16>,
    },
    /// Cilium's 6081. `vni` is 0 when it is not one constant (Cilium carries the source
    /// identity in it).
    Geneve {
        port: Port,
        vni: Vni,
        mtu: Option<u16>,
    },
    /// IP protocol 4 (Calico's `tunl0`): no port, no VNI.
    Ipip { mtu: Option<u16> },
    /// A `WireGuard` tunnel on its UDP port (51820 for flannel and Calico, 51871 for Cilium).
    Wireguard { port: Port, mtu: Option<u16> },
    /// Native routing: nothing encapsulates (Calico BGP without a tunnel).
    None { mtu: Option<u16> },
}

/// The inventory's `cluster.overlay.mode`, and the lab scenario's `overlay.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OverlayMode {
    Vxlan,
    Geneve,
    Ipip,
    /// In the lab: the `WireGuard` port carrying the lab's tunnel in plaintext (no keys, no
    /// encryption): what the firewalls see is real UDP 51820.
    Wireguard,
    None,
}

impl OverlayMode {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Vxlan => "vxlan",
            Self::Geneve => "geneve",
            Self::Ipip => "ipip",
            Self::Wireguard => "wireguard",
            Self::None => "none",
        }
    }
}

impl std::fmt::Display for OverlayMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Overlay {
    #[must_use]
    pub fn mode(&self) -> OverlayMode {
        match self {
            Self::Vxlan { .. } => OverlayMode::Vxlan,
            Self::Geneve { .. } => OverlayMode::Geneve,
            Self::Ipip { .. } => OverlayMode::Ipip,
            Self::Wireguard { .. } => OverlayMode::Wireguard,
            Self::None { .. } => OverlayMode::None,
        }
    }

    /// The UDP port the encapsulation uses; none for IP-in-IP and native routing.
    #[must_use]
    pub fn port(&self) -> Option<Port> {
        match self {
            Self::Vxlan { port, .. } | Self::Geneve { port, .. } | Self::Wireguard { port, .. } => {
                Some(*port)
            }
            Self::Ipip { .. } | Self::None { .. } => None,
        }
    }

    /// The VXLAN or Geneve network identifier.
    #[must_use]
    pub fn vni(&self) -> Option<Vni> {
        match self {
            Self::Vxlan { vni, .. } | Self::Geneve { vni, .. } => Some(*vni),
            Self::Ipip { .. } | Self::Wireguard { .. } | Self::None { .. } => None,
        }
    }

    /// The MTU pods see over the overlay, when known.
    #[must_use]
    pub fn mtu(&self) -> Option<u16> {
        match self {
            Self::Vxlan { mtu, .. }
            | Self::Geneve { mtu, .. }
            | Self::Ipip { mtu }
            | Self::Wireguard { mtu, .. }
            | Self::None { mtu } => *mtu,
        }
    }

    /// The MTU, to change it.
    pub fn mtu_mut(&mut self) -> &mut Option<u16> {
        match self {
            Self::Vxlan { mtu, .. }
            | Self::Geneve { mtu, .. }
            | Self::Ipip { mtu }
            | Self::Wireguard { mtu, .. }
            | Self::None { mtu } => mtu,
        }
    }
}

/// `cluster.overlay` as written: every field the old flat form had, checked against its mode
/// when it becomes an [`Overlay`].
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct OverlayYaml {
    mode: OverlayMode,
    #[serde(default)]
    port: Option<u16>,
    #[serde(default)]
    vni: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mtu: Option<u16>,
}

/// An overlay whose fields do not fit its mode; the message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct BadOverlay {
    pub field: &'static str,
    pub message: String,
}

impl TryFrom<OverlayYaml> for Overlay {
    type Error = BadOverlay;
    fn try_from(y: OverlayYaml) -> Result<Self, BadOverlay> {
        let mode = y.mode;
        let bad = |field, message: String| BadOverlay { field, message };
        let port = || match y.port {
            Some(p) => Port::new(p).ok_or_else(|| {
                bad(
                    "port",
                    format!("{mode} needs its UDP port (1-65535), not 0"),
                )
            }),
            None => Err(bad("port", format!("{mode} needs its UDP port (1-65535)"))),
        };
        let vni = || match y.vni {
            Some(v) => Vni::new(v)
                .ok_or_else(|| bad("vni", format!("{v} does not fit in 24 bits (0-16777215)"))),
            None => Err(bad("vni", format!("{mode} needs its VNI (0-16777215)"))),
        };
        // The old form wrote 0 for what a mode does not have; anything else is a mistake.
        let none = |field, value: Option<u32>, what: &str| match value {
            None | Some(0) => Ok(()),
            Some(v) => Err(bad(field, format!("{mode} has no {what}; got {v}"))),
        };
        let mtu = y.mtu;
        Ok(match mode {
            OverlayMode::Vxlan => Self::Vxlan {
                port: port()?,
                vni: vni()?,
                mtu,
            },
            OverlayMode::Geneve => Self::Geneve {
                port: port()?,
                vni: vni()?,
                mtu,
            },
            OverlayMode::Wireguard => {
                none("vni", y.vni, "VNI")?;
                Self::Wireguard { port: port()?, mtu }
            }
            OverlayMode::Ipip | OverlayMode::None => {
                let what = if mode == OverlayMode::Ipip {
                    "port (IP-in-IP is IP protocol 4)"
                } else {
                    "port (nothing encapsulates)"
                };
                none("port", y.port.map(u32::from), what)?;
                none("vni", y.vni, "VNI")?;
                if mode == OverlayMode::Ipip {
                    Self::Ipip { mtu }
                } else {
                    Self::None { mtu }
                }
            }
        })
    }
}

impl From<Overlay> for OverlayYaml {
    fn from(o: Overlay) -> Self {
        Self {
            mode: o.mode(),
            port: Some(o.port().map_or(0, Port::get)),
            vni: Some(o.vni().map_or(0, Vni::get)),
            mtu: o.mtu(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::{Inventory, from_yaml};
    use crate::testutil::inventory;

    /// The test inventory with its `cluster.overlay` written as `overlay`.
    fn with_overlay(overlay: &str) -> Result<Inventory, String> {
        let text = inventory(2, 1, "calico")
            .to_yaml()
            .lines()
            .map(|l| {
                if l.starts_with("  overlay:") {
                    format!("  overlay: {overlay}")
                } else if l.starts_with("    mode:")
                    || l.starts_with("    port:")
                    || l.starts_with("    vni:")
                    || l.starts_with("    mtu:")
                {
                    String::new()
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        from_yaml::<Inventory>(&text).map_err(|e| e.to_string())
    }

    #[test]
    fn ip_in_ip_needs_no_port_and_no_vni() {
        let inv = with_overlay("{mode: ipip}").unwrap();
        assert_eq!(inv.cluster.overlay, Some(Overlay::Ipip { mtu: None }));
        inv.validate().unwrap();
        let inv = with_overlay("{mode: ipip, mtu: 1480}").unwrap();
        assert_eq!(inv.cluster.overlay, Some(Overlay::Ipip { mtu: Some(1480) }));
    }

    #[test]
    fn the_old_flat_form_still_parses_and_is_what_is_written() {
        let port = |p| Port::new(p).unwrap();
        let vni = |v| Vni::new(v).unwrap();
        for (text, want) in [
            (
                "{mode: ipip, port: 0, vni: 0, mtu: 1480}",
                Overlay::Ipip { mtu: Some(1480) },
            ),
            (
                "{mode: vxlan, port: 4789, vni: 4096, mtu: 1450}",
                Overlay::Vxlan {
                    port: port(4789),
                    vni: vni(4096),
                    mtu: Some(1450),
                },
            ),
            (
                "{mode: geneve, port: 6081, vni: 0}",
                Overlay::Geneve {
                    port: port(6081),
                    vni: vni(0),
                    mtu: None,
                },
            ),
            (
                "{mode: wireguard, port: 51871, vni: 0}",
                Overlay::Wireguard {
                    port: port(51871),
                    mtu: None,
                },
            ),
            (
                "{mode: none, port: 0, vni: 0, mtu: 1500}",
                Overlay::None { mtu: Some(1500) },
            ),
        ] {
            let inv = with_overlay(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(inv.cluster.overlay, Some(want), "{text}");
            // Written back in the flat form, port and VNI 0 where the mode has none: the
            // versions before this one read it.
            let written = serde_json::to_value(want).unwrap();
            let flat: serde_json::Value = serde_saphyr::from_str(text).unwrap();
            let mut flat = flat.as_object().unwrap().clone();
            flat.entry("vni").or_insert(0.into());
            assert_eq!(written, serde_json::Value::Object(flat), "{text}");
        }
    }

    #[test]
    fn a_bad_overlay_names_the_field() {
        // (the overlay, the field the error names, what it says)
        for (text, field, want) in [
            (
                "{mode: bogus, port: 1, vni: 1}",
                "cluster.overlay.mode",
                "unknown variant `bogus`",
            ),
            (
                "{mode: vxlan, vni: 1}",
                "cluster.overlay",
                "port: vxlan needs its UDP port",
            ),
            (
                "{mode: vxlan, port: 0, vni: 1}",
                "cluster.overlay",
                "port: vxlan needs its UDP port (1-65535), not 0",
            ),
            (
                "{mode: geneve, port: 6081}",
                "cluster.overlay",
                "vni: geneve needs its VNI",
            ),
            (
                "{mode: vxlan, port: 8472, vni: 16777216}",
                "cluster.overlay",
                "vni: 16777216 does not fit in 24 bits",
            ),
            (
                "{mode: ipip, port: 4789}",
                "cluster.overlay",
                "port: ipip has no port",
            ),
            (
                "{mode: wireguard, port: 51820, vni: 7}",
                "cluster.overlay",
                "vni: wireguard has no VNI",
            ),
            (
                "{mode: ipip, prot: 0}",
                "cluster.overlay.prot",
                "unknown field `prot`",
            ),
        ] {
            let err = with_overlay(text).unwrap_err();
            assert!(
                err.starts_with(&format!("{field}: ")) && err.contains(want),
                "{text}: {err}"
            );
        }
    }
}
