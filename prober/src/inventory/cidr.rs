//! An IP network in CIDR notation (`10.244.0.0/16`, `fd00:10:244::/56`), as the inventory
//! writes it.

use std::net::{IpAddr, Ipv4Addr};

use serde::{Deserialize, Serialize};

use super::Family;

/// An IPv4 or IPv6 network in CIDR notation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Cidr {
    pub addr: IpAddr,
    pub len: u8,
}

impl Cidr {
    /// An IPv4 network (`len` at most 32).
    #[must_use]
    pub fn v4(addr: Ipv4Addr, len: u8) -> Self {
        Self {
            addr: IpAddr::V4(addr),
            len,
        }
    }

    #[must_use]
    pub fn family(&self) -> Family {
        Family::of(self.addr)
    }

    /// The network's address when it is an IPv4 one.
    #[must_use]
    pub fn ipv4(&self) -> Option<Ipv4Addr> {
        match self.addr {
            IpAddr::V4(a) => Some(a),
            IpAddr::V6(_) => None,
        }
    }

    /// Whether `ip` is in the network; an address of the other family never is.
    #[must_use]
    pub fn contains(&self, ip: impl Into<IpAddr>) -> bool {
        match (self.addr, ip.into()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.len)).unwrap_or(0);
                u32::from(ip) & mask == u32::from(net) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.len))
                    .unwrap_or(0);
                u128::from(ip) & mask == u128::from(net) & mask
            }
            _ => false,
        }
    }
}

/// Text that is not an IP network in CIDR notation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0:?} is not a CIDR (expected a.b.c.d/len with len 0-32, or an IPv6 network such as \
     fd00:10:244::/56 with len 0-128)"
)]
pub struct BadCidr(pub String);

impl TryFrom<String> for Cidr {
    type Error = BadCidr;
    fn try_from(s: String) -> Result<Self, BadCidr> {
        let parsed = s.split_once('/').and_then(|(a, l)| {
            let addr: IpAddr = a.parse().ok()?;
            let max = Family::of(addr).bits();
            let len: u8 = l.parse().ok().filter(|l| *l <= max)?;
            Some(Self { addr, len })
        });
        parsed.ok_or(BadCidr(s))
    }
}

impl From<Cidr> for String {
    fn from(c: Cidr) -> String {
        c.to_string()
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}
