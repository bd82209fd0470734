//! An IPv4 network in CIDR notation (`10.244.0.0/16`), as the inventory writes it.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

/// An IPv4 network in CIDR notation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Cidr {
    pub addr: Ipv4Addr,
    pub len: u8,
}

impl Cidr {
    #[must_use]
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        let mask = if self.len == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(self.len))
        };
        u32::from(ip) & mask == u32::from(self.addr) & mask
    }
}

/// Text that is not an IPv4 network in CIDR notation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a CIDR (expected a.b.c.d/len, len 0-32)")]
pub struct BadCidr(pub String);

impl TryFrom<String> for Cidr {
    type Error = BadCidr;
    fn try_from(s: String) -> Result<Self, BadCidr> {
        let parsed = s.split_once('/').and_then(|(a, l)| {
            let addr: Ipv4Addr = a.parse().ok()?;
            let len: u8 = l.parse().ok().filter(|l| *l <= 32)?;
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
