//! A refusal on an open path (`not_listening.rs`): nothing listens there, never a gap.

use super::*;

#[test]
fn refused_on_an_open_path_is_not_listening_never_a_gap() {
    // Table: who refuses (every other node: a port refused to some only is a firewall, see
    // tests/selective_refusal.rs), and the one finding it must give.
    let cases: [(&[&str], &str, u16); 2] =
        [(&["n1", "n3"], "n2", 10250), (&["n2", "n3"], "n1", 10250)];
    for (senders, receiver, port) in cases {
        let inv = inventory(3, 1, "flannel");
        let (_, f) = run(&inv, &move |p| {
            let (from, to) = node_of(p);
            (matches!(p.path, PathClass::NodeToNode | PathClass::PodToNode)
                && senders.contains(&from)
                && to == receiver
                && p.to.port == Some(port))
            .then(|| (Outcome::Refused, "connection refused".into()))
        });
        assert_eq!(kinds(&f), [Kind::NotListening], "{senders:?}: {f:#?}");
        assert_eq!(f[0].facts().nodes(), [receiver]);
        assert_eq!(f[0].facts().port(), Some(port));
        assert!(f[0].summary.contains("(the kubelet)"), "{}", f[0].summary);
    }
}
