//! IP families: which one an address is in, and how the inventory says "none in this family".

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Deserializer};

/// The family type is the model's: one for inventories, plans, results and findings.
pub use crate::model::Family;

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
