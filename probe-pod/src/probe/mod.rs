//! One module per probe kind. Every probe runs under a deadline and turns what the network did into
//! an `Outcome`; only a probe that could not run at all is `error`.

pub mod crafted;
pub mod dns;
pub mod forwarding;
pub mod geneve;
pub mod hop;
pub mod httpdate;
pub mod icmp;
pub mod ipip;
pub mod kubeconfig;
pub mod node;
pub mod seen;
pub mod tcp;
pub mod tls;
pub mod udp;
pub mod vxlan;
pub mod wireguard;

use std::time::Duration;

use tokio::time::Instant;

use crate::net::errqueue::Failure;
use crate::proto::{
    IcmpProbe, MtuProbe, NodeProbe, Outcome, Probe, ProbeResult, ProbeSpec, SeenProbe, TcpProbe,
    UdpProbe,
};

/// Why a network step did not succeed.
#[derive(Debug)]
pub enum Fail {
    /// Nothing came back before the deadline.
    Timeout,
    /// The kernel reported an error (with the ICMP message behind it, when there was one).
    Net(Failure),
    /// The probe could not be carried out (bad local file, socket creation refused, ...).
    Local(String),
}

impl Fail {
    /// The result for probe `id`; `what` names the step and the peer, e.g. `connect 10.0.0.2:9917`.
    #[must_use]
    pub fn into_result(self, id: &str, what: &str, waited: Duration) -> ProbeResult {
        match self {
            Self::Timeout => ProbeResult::new(
                id,
                Outcome::Timeout,
                format!("{what}: no answer within {} ms", waited.as_millis()),
            ),
            Self::Net(f) => {
                let (outcome, detail) = f.classify();
                let mut r = ProbeResult::new(id, outcome, format!("{what}: {detail}"));
                r.icmp = f.icmp();
                r
            }
            Self::Local(msg) => ProbeResult::new(id, Outcome::Error, format!("{what}: {msg}")),
        }
    }
}

impl From<std::io::Error> for Fail {
    fn from(e: std::io::Error) -> Self {
        Self::Local(e.to_string())
    }
}

/// Microseconds, saturating, for `rttMicros`.
#[must_use]
pub fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Runs one probe until it finishes or `deadline` passes.
pub async fn run(spec: &ProbeSpec, deadline: Instant) -> ProbeResult {
    let id = spec.id.as_str();
    let started = Instant::now();
    let fut = async {
        match &spec.probe {
            Probe::Tcp(TcpProbe {
                address,
                port,
                echo,
            }) => tcp::probe(id, (*address, port.get()).into(), *echo, None, deadline).await,
            Probe::Udp(UdpProbe { address, port }) => {
                udp::probe(id, (*address, port.get()).into(), None, deadline).await
            }
            Probe::Hop(p) => hop::probe(id, p, deadline).await,
            Probe::Icmp(IcmpProbe { address }) | Probe::Vtep(IcmpProbe { address }) => {
                icmp::echo(id, *address, deadline).await
            }
            Probe::Mtu(MtuProbe { address, size }) => {
                icmp::mtu(id, *address, *size, deadline).await
            }
            Probe::Tls(p) => tls::probe(id, p, deadline).await,
            Probe::Dns(p) => dns::probe(id, p, deadline).await,
            Probe::Vxlan(p) => vxlan::probe(id, p, deadline).await,
            Probe::Ipip(p) => ipip::probe(id, p),
            Probe::Geneve(p) => geneve::probe(id, p, deadline).await,
            Probe::Wireguard(p) => wireguard::probe(id, p, deadline).await,
            Probe::Node(NodeProbe { root, api_check }) => {
                node::probe(id, root, *api_check, deadline).await
            }
            Probe::Seen(SeenProbe {
                since_ms,
                nonces,
                flows,
                port,
            }) => {
                let ask = seen::Ask {
                    nonces: nonces.as_deref(),
                    flows: flows.as_deref(),
                };
                seen::probe(id, *since_ms, ask, *port, deadline).await
            }
        }
    };
    // Each probe honours the deadline itself; this is the backstop that guarantees one result.
    if let Ok(r) = tokio::time::timeout_at(deadline + Duration::from_millis(50), fut).await {
        r
    } else {
        Fail::Timeout.into_result(id, spec.probe.kind(), started.elapsed())
    }
}
