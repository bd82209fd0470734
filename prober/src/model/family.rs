//! The IP family a probe went over, read from the address it probed (the agents' wire format
//! carries none): what tells a path blocked over IPv6 only from one blocked in both families.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

/// `ipv4` or `ipv6` (also the JSON values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Ipv4,
    Ipv6,
}

impl Family {
    /// Both, IPv4 first: the order plans and reports list them in.
    pub const ALL: [Family; 2] = [Family::Ipv4, Family::Ipv6];

    /// The longest prefix of the family.
    #[must_use]
    pub fn bits(self) -> u8 {
        match self {
            Self::Ipv4 => 32,
            Self::Ipv6 => 128,
        }
    }

    /// The family of `addr`; an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) travels as IPv4.
    #[must_use]
    pub fn of(addr: IpAddr) -> Self {
        match addr {
            IpAddr::V4(_) => Self::Ipv4,
            IpAddr::V6(a) if a.to_ipv4_mapped().is_some() => Self::Ipv4,
            IpAddr::V6(_) => Self::Ipv6,
        }
    }

    /// The other family.
    #[must_use]
    pub fn other(self) -> Self {
        match self {
            Self::Ipv4 => Self::Ipv6,
            Self::Ipv6 => Self::Ipv4,
        }
    }

    /// Its JSON value.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ipv4 => "ipv4",
            Self::Ipv6 => "ipv6",
        }
    }

    /// As a sentence names it: `IPv4`, `IPv6`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Ipv4 => "IPv4",
            Self::Ipv6 => "IPv6",
        }
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_family_is_the_probed_address_s() {
        for (addr, want) in [
            ("192.168.56.10", Family::Ipv4),
            ("fd00:10:244:1::2", Family::Ipv6),
            ("::1", Family::Ipv6),
            ("::ffff:10.96.0.1", Family::Ipv4),
        ] {
            assert_eq!(Family::of(addr.parse().unwrap()), want, "{addr}");
        }
        assert_eq!(serde_json::to_string(&Family::Ipv6).unwrap(), "\"ipv6\"");
        assert_eq!(Family::Ipv4.other().as_str(), "ipv6");
    }
}
