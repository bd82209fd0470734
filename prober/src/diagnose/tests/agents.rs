//! A missing agent (`agents.rs`): its paths are unknown, not failed.

use super::*;

#[test]
fn missing_agent_is_unknown_not_failed() {
    let inv = inventory(3, 1, "flannel");
    let agents = [AgentStatus {
        node: "n3".into(),
        agent: AgentKind::Pod,
        ran: false,
        detail: "exec failed".into(),
    }];
    let (_, f) = run_with_agents(
        &inv,
        &|p| {
            if p.from.node == "n3" && p.from.agent == AgentKind::Pod {
                Some((
                    Outcome::Error,
                    "unknown: agent n3/pod could not run: exec failed".into(),
                ))
            } else {
                None
            }
        },
        &agents,
    );
    assert_eq!(kinds(&f), [Kind::AgentMissing], "{f:#?}");
    assert_eq!(f[0].severity, Severity::Warning);
    assert!(!f[0].consequences.is_empty());
}
