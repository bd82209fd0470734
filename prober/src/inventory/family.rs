//! IP families: which one an address is in, and how the inventory says "none in this family".

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Deserializer, Serialize};

/// An IP family, as results and findings name it (`ipv4`, `ipv6`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Ipv4,
    Ipv6,
}

impl Family {
    /// Both, IPv4 first: the order plans and reports list them in.
    pub const ALL: [Family; 2] = [Family::Ipv4, Family::Ipv6];

    #[must_use]
    pub fn of(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(_) => Self::Ipv4,
            IpAddr::V6(_) => Self::Ipv6,
        }
    }

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ipv4 => "ipv4",
            Self::Ipv6 => "ipv6",
        }
    }

    /// The longest prefix of the family.
    #[must_use]
    pub fn bits(self) -> u8 {
        match self {
            Self::Ipv4 => 32,
            Self::Ipv6 => 128,
        }
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an IPv4 `address` field holds when the node or agent has none (an IPv6-only one): the
/// field is left out of the YAML then, and `0.0.0.0` written there is refused, so it never
/// stands for a real address. Read it through `ipv4()`, never directly.
pub const NO_IPV4: Ipv4Addr = Ipv4Addr::UNSPECIFIED;

/// `Some` unless `a` is [`NO_IPV4`].
#[must_use]
pub fn some_ipv4(a: Ipv4Addr) -> Option<Ipv4Addr> {
    (a != NO_IPV4).then_some(a)
}

/// The address of `family` from an `address` (IPv4, [`NO_IPV4`] for none) and `address6` pair.
pub(super) fn pick(v4: Ipv4Addr, v6: Option<Ipv6Addr>, family: Family) -> Option<IpAddr> {
    match family {
        Family::Ipv4 => some_ipv4(v4).map(IpAddr::V4),
        Family::Ipv6 => v6.map(IpAddr::V6),
    }
}

pub(super) fn no_ipv4() -> Ipv4Addr {
    NO_IPV4
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's `skip_serializing_if` passes a reference
pub(super) fn is_no_ipv4(a: &Ipv4Addr) -> bool {
    *a == NO_IPV4
}

/// An optional IPv4 `address`: present, it must be a real one (`0.0.0.0` would read as absent).
pub(super) fn ipv4_address<'de, D: Deserializer<'de>>(d: D) -> Result<Ipv4Addr, D::Error> {
    let a = Ipv4Addr::deserialize(d)?;
    if a == NO_IPV4 {
        return Err(serde::de::Error::custom(
            "0.0.0.0 is not an address; leave `address` out for an IPv6-only node or agent and \
             give `address6`",
        ));
    }
    Ok(a)
}
