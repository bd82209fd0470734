//! What `probe-pod serve` tells the process that started it: one JSON line per event on its
//! standard output (its log stays on standard error), so the coordinator reads a port the agent
//! could not take as data instead of parsing the agent's error text.

use serde::{Deserialize, Serialize};

use crate::Transport;

/// One line of `probe-pod serve`'s standard output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "event",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum ServeEvent {
    /// A port it was asked to serve is held by another process; the agent exits after this.
    PortInUse { protocol: Transport, port: u16 },
}

impl ServeEvent {
    /// The event as one line of JSON, without the newline.
    #[must_use]
    pub fn to_line(&self) -> String {
        // A tag, an enum of two names and a number: this cannot fail to serialise.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The event a line holds; `None` for a line that is not one (an older agent says nothing).
    #[must_use]
    pub fn parse(line: &str) -> Option<Self> {
        serde_json::from_str(line.trim()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_in_use_is_one_line_that_reads_back() {
        let e = ServeEvent::PortInUse {
            protocol: Transport::Tcp,
            port: 10250,
        };
        let line = e.to_line();
        assert_eq!(
            line,
            r#"{"event":"portInUse","protocol":"tcp","port":10250}"#
        );
        assert_eq!(ServeEvent::parse(&format!("{line}\n")), Some(e));
        assert_eq!(ServeEvent::parse("serving"), None);
        assert_eq!(
            ServeEvent::parse(r#"{"event":"portInUse","protocol":"sctp","port":1}"#),
            None
        );
    }
}
