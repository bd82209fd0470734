//! Two runtimes behind one: the agents of one node through the first, every other agent through
//! the second. Preflight reaches the joining node through its exec prefix and the existing nodes
//! through `pods/exec`; a probe never goes to a node through the other's way.

use probe_proto::{Plan, ProbeResult};
use tokio::sync::mpsc;

use super::{Runtime, RuntimeError};
use crate::model::AgentRef;

pub struct Split<A, B> {
    /// The node whose agents `own` runs.
    pub node: String,
    pub own: A,
    pub others: B,
}

impl<A: Runtime, B: Runtime> Runtime for Split<A, B> {
    async fn run(
        &self,
        agent: &AgentRef,
        plan: Plan,
        results: mpsc::Sender<ProbeResult>,
    ) -> Result<(), RuntimeError> {
        if agent.node == self.node {
            self.own.run(agent, plan, results).await
        } else {
            self.others.run(agent, plan, results).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::AgentKind;
    use std::sync::Mutex;

    /// Records which agents it was asked to run.
    #[derive(Default)]
    struct Seen(Mutex<Vec<String>>);

    impl Runtime for Seen {
        async fn run(
            &self,
            agent: &AgentRef,
            _plan: Plan,
            _results: mpsc::Sender<ProbeResult>,
        ) -> Result<(), RuntimeError> {
            self.0.lock().unwrap().push(agent.node.clone());
            Ok(())
        }
    }

    #[tokio::test]
    async fn the_node_goes_one_way_and_everything_else_the_other() {
        let split = Split {
            node: "new".into(),
            own: Seen::default(),
            others: Seen::default(),
        };
        let plan = probe_proto::parse_plan(
            r#"{"deadlineMs":1000,"probes":[{"id":"a","kind":"icmp","address":"10.0.0.1"}]}"#,
        )
        .unwrap();
        for node in ["n1", "new", "n2"] {
            let agent = AgentRef {
                node: node.into(),
                agent: AgentKind::Host,
            };
            split
                .run(&agent, plan.clone(), mpsc::channel(1).0)
                .await
                .unwrap();
        }
        assert_eq!(*split.own.0.lock().unwrap(), ["new"]);
        assert_eq!(*split.others.0.lock().unwrap(), ["n1", "n2"]);
    }
}
