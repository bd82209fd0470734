//! Each finding kind's own states (`state` in the report), one enum per kind that has any.

use serde::{Deserialize, Serialize};

/// What every kind's state enum offers the readers that do not know the kind: its name as the
/// report writes it, and the legacy `Debug` the scheduled memory's keys were built from.
pub trait State: std::fmt::Debug + std::fmt::Display + Send + Sync {
    /// The state as the report writes it.
    fn as_str(&self) -> &str;
}

/// Declares a kind's state enum: each variant with the name the report writes, and `Other`
/// for a state this prober does not name (one a newer prober wrote into a report this one
/// reads, or a DNS response code without a name here).
macro_rules! state_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $text:literal,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vdoc])* #[serde(rename = $text)] $variant,)*
            /// Any other state, as written.
            #[serde(untagged)]
            Other(String),
        }

        impl $name {
            /// Every state this prober names.
            pub const KNOWN: &[Self] = &[$(Self::$variant),*];
        }

        impl State for $name {
            fn as_str(&self) -> &str {
                match self {
                    $(Self::$variant => $text,)*
                    Self::Other(s) => s,
                }
            }
        }

        /// A state from its report name: a known one as its variant, anything else as `Other`.
        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self::KNOWN
                    .iter()
                    .find(|k| k.as_str() == s)
                    .cloned()
                    .unwrap_or_else(|| Self::Other(s.to_string()))
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

state_enum! {
    /// `bootstrap-cycle`.
    CycleState {
        /// The cycle is broken now.
        Active = "active",
        /// It works now but cannot recover if it breaks.
        Latent = "latent",
    }
}

state_enum! {
    /// `credential`.
    CredentialState {
        /// The token's expiry has passed.
        Expired = "expired",
        /// A bound token older than an hour, never refreshed.
        Stale = "stale",
        /// The API server answers 401 to it.
        Rejected = "rejected",
        /// A legacy token without an expiry.
        NonExpiring = "non-expiring",
        /// `insecure-skip-tls-verify`.
        Insecure = "insecure",
        /// The server is not the one the kubeconfig's CA vouches for.
        UntrustedServer = "untrusted-server",
        /// Nothing usable to verify the server against.
        UnverifiableServer = "unverifiable-server",
        /// The host agent could not read or parse the CNI kubeconfig.
        Unreadable = "unreadable",
    }
}

state_enum! {
    /// `dns`; `Other` carries a response code without a name here (`rcode9`).
    DnsState {
        /// A forward loop.
        Loop = "loop",
        /// The cluster DNS does not answer.
        NoAnswer = "no-answer",
        /// The server answered FORMERR.
        Formerr = "formerr",
        /// The server answered SERVFAIL.
        Servfail = "servfail",
        /// The server answered NXDOMAIN.
        Nxdomain = "nxdomain",
        /// The server answered NOTIMP.
        Notimp = "notimp",
        /// The server answered REFUSED.
        Refused = "refused",
    }
}

state_enum! {
    /// `misconfiguration`, when it has one.
    MisconfigurationState {
        /// A node file the host agent could not read or parse.
        Unreadable = "unreadable",
        /// Preflight: the joining node's clock is off.
        ClockSkew = "clock-skew",
        /// Preflight: the joining node does not forward IPv4 (`net.ipv4.ip_forward` is 0).
        IpForwardOff = "ip-forward-off",
        /// Preflight: the joining node of a cluster with IPv6 does not forward IPv6
        /// (`net.ipv6.conf.all.forwarding` is 0).
        Ipv6ForwardOff = "ipv6-forward-off",
        /// Preflight: bridged traffic skips iptables on the joining node (`br_netfilter` not
        /// loaded, or `net.bridge.bridge-nf-call-iptables` is 0).
        BridgeNfOff = "bridge-nf-off",
    }
}

state_enum! {
    /// `partition`.
    PartitionState {
        /// A node nothing reaches.
        Unreachable = "unreachable",
    }
}

state_enum! {
    /// `loss`.
    LossState {
        /// Paths that got through on some attempts only.
        Intermittent = "intermittent",
    }
}

state_enum! {
    /// `policy`.
    PolicyState {
        /// A policy prober read and evaluated denies the probes.
        Denied = "denied",
        /// The failures' pattern is a policy's, but no policy prober could read and evaluate
        /// says so.
        Unreadable = "unreadable",
    }
}

/// Whether `s` is a state some kind names (a scenario's expectation may only name those).
#[must_use]
pub fn is_known(s: &str) -> bool {
    fn known<T: State>(all: &[T], s: &str) -> bool {
        all.iter().any(|k| k.as_str() == s)
    }
    known(CycleState::KNOWN, s)
        || known(CredentialState::KNOWN, s)
        || known(DnsState::KNOWN, s)
        || known(MisconfigurationState::KNOWN, s)
        || known(PartitionState::KNOWN, s)
        || known(LossState::KNOWN, s)
        || known(PolicyState::KNOWN, s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trips<T>(named: &[(&str, T)])
    where
        T: State
            + Clone
            + PartialEq
            + Serialize
            + for<'de> Deserialize<'de>
            + for<'a> From<&'a str>,
    {
        for (text, state) in named {
            assert_eq!(serde_json::to_value(state).unwrap(), json!(text));
            assert_eq!(state.as_str(), *text);
            assert_eq!(state.to_string(), *text);
            assert_eq!(&T::from(text), state, "{text}");
            let back: T = serde_json::from_value(json!(text)).unwrap();
            assert_eq!(&back, state, "{text}");
        }
    }

    #[test]
    fn a_state_is_written_as_the_report_always_wrote_it() {
        round_trips(&[
            ("active", CycleState::Active),
            ("latent", CycleState::Latent),
        ]);
        round_trips(&[
            ("expired", CredentialState::Expired),
            ("stale", CredentialState::Stale),
            ("rejected", CredentialState::Rejected),
            ("non-expiring", CredentialState::NonExpiring),
            ("insecure", CredentialState::Insecure),
            ("untrusted-server", CredentialState::UntrustedServer),
            ("unverifiable-server", CredentialState::UnverifiableServer),
            ("unreadable", CredentialState::Unreadable),
        ]);
        round_trips(&[
            ("loop", DnsState::Loop),
            ("no-answer", DnsState::NoAnswer),
            ("formerr", DnsState::Formerr),
            ("servfail", DnsState::Servfail),
            ("nxdomain", DnsState::Nxdomain),
            ("notimp", DnsState::Notimp),
            ("refused", DnsState::Refused),
            ("rcode9", DnsState::Other("rcode9".into())),
        ]);
        round_trips(&[
            ("unreadable", MisconfigurationState::Unreadable),
            ("clock-skew", MisconfigurationState::ClockSkew),
            ("ip-forward-off", MisconfigurationState::IpForwardOff),
            ("ipv6-forward-off", MisconfigurationState::Ipv6ForwardOff),
            ("bridge-nf-off", MisconfigurationState::BridgeNfOff),
        ]);
        round_trips(&[("unreachable", PartitionState::Unreachable)]);
        round_trips(&[("intermittent", LossState::Intermittent)]);
        round_trips(&[
            ("denied", PolicyState::Denied),
            ("unreadable", PolicyState::Unreadable),
        ]);
        // A state of another kind is not one of this kind's.
        assert_eq!(
            CycleState::from("expired"),
            CycleState::Other("expired".into())
        );
    }

    #[test]
    fn only_named_states_are_known() {
        for s in [
            "active",
            "non-expiring",
            "no-answer",
            "clock-skew",
            "intermittent",
            "denied",
        ] {
            assert!(is_known(s), "{s}");
        }
        for s in ["rcode9", "Active", "", "expire"] {
            assert!(!is_known(s), "{s}");
        }
    }
}
