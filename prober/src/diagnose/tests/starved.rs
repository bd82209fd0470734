//! A starved agent (`starved.rs`): probes that timed out on every attempt while their agent was
//! kept from running are unknown, one warning per node, never a gap, loss or partition.

use super::*;

#[test]
fn a_starved_agent_is_one_warning_and_no_gap() {
    let inv = inventory(3, 1, "flannel");
    // Everything n2 sent to n3 timed out while n2's agent stalled (up to 480 ms).
    let (_, f) = run(&inv, &|p| {
        (p.from.node == "n2" && p.to.node.as_deref() == Some("n3")).then(|| {
            let ms = if p.from.agent == AgentKind::Pod {
                480
            } else {
                310
            };
            (Outcome::Error, format!("starved: {ms}"))
        })
    });
    assert_eq!(kinds(&f), [Kind::Starved], "{f:#?}");
    assert_eq!(f[0].severity, Severity::Warning);
    assert_eq!(f[0].facts().nodes(), ["n2"]);
    assert!(f[0].summary.contains("up to 480 ms"), "{}", f[0].summary);
    assert!(!f[0].consequences.is_empty());
}

#[test]
fn starved_agents_are_told_apart_per_node() {
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run(&inv, &|p| {
        (p.from.node != "n1" && p.to.node.as_deref() == Some("n1"))
            .then(|| (Outcome::Error, "starved: 200".into()))
    });
    let nodes: Vec<&[String]> = f.iter().map(|f| f.facts().nodes()).collect();
    assert_eq!(kinds(&f), [Kind::Starved, Kind::Starved], "{f:#?}");
    assert_eq!(nodes, [["n2".to_string()], ["n3".to_string()]]);
}
