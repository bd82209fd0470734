//! Port conflicts on a joining node: a port it must serve once joined is already taken there, as
//! kubeadm's own preflight would say. Found when the stand-ins start, not from a probe.

use crate::model::Protocol;

use super::finding::{Finding, Kind, Severity};

/// A port the candidate's stand-in could not bind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortConflict {
    pub protocol: Protocol,
    pub port: u16,
    /// What holds it, as `ss -p` names it (`"nginx",pid=812`), when it can be read.
    pub process: Option<String>,
}

/// One error finding per taken port, naming the candidate and, when known, the process.
#[must_use]
pub fn port_conflicts(candidate: &str, conflicts: &[PortConflict]) -> Vec<Finding> {
    conflicts
        .iter()
        .map(|c| {
            let proto = c.protocol.as_str();
            let holder = c
                .process
                .as_deref()
                .map_or_else(String::new, |p| format!(" by {p}"));
            let mut f = Finding::new(
                Kind::PortConflict,
                Severity::Error,
                format!(
                    "{proto}/{} is already in use on {candidate}{holder}: the node cannot serve it once joined",
                    c.port
                ),
            );
            f.protocol = Some(c.protocol);
            f.port = Some(c.port);
            f.nodes = vec![candidate.to_string()];
            f.fix = vec![
                format!("on {candidate}: ss -lnp{} 'sport = :{}'   # what holds it", if c.protocol == Protocol::Udp { "u" } else { "t" }, c.port),
                "stop or move that service before joining (kubeadm's preflight would refuse too)".into(),
            ];
            f
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_port_is_an_error_naming_the_node_and_the_process() {
        let f = port_conflicts(
            "new",
            &[PortConflict {
                protocol: Protocol::Tcp,
                port: 10250,
                process: Some("\"nc\",pid=42".into()),
            }],
        );
        assert_eq!(f.len(), 1);
        assert_eq!(
            (f[0].kind, f[0].severity),
            (Kind::PortConflict, Severity::Error)
        );
        assert_eq!(f[0].port, Some(10250));
        assert_eq!(f[0].nodes, ["new"]);
        assert!(f[0].summary.contains("pid=42"), "{}", f[0].summary);
    }
}
