//! A port only some nodes serve (Calico's Typha, tcp/5473), probed on every node because the
//! inventory does not say which serve it: a refusal is at most a note, never an error.

use super::*;

fn typha_refused_on(on: &'static [&'static str], serves_known: bool) -> Vec<Finding> {
    let mut inv = inventory(4, 1, "calico");
    if serves_known {
        for n in &mut inv.nodes {
            n.serves = Some(crate::testutil::ports(&[179, 5473]));
        }
    }
    let (_, f) = run(&inv, &move |p| {
        let (_, to) = node_of(p);
        (p.to.port == Some(5473) && on.contains(&to))
            .then(|| (Outcome::Refused, "connection refused".into()))
    });
    f
}

#[test]
fn an_optional_port_refused_where_servers_are_unknown_is_a_note() {
    for on in [&["n2"][..], &["n2", "n3", "n4"], &["n1", "n2", "n3", "n4"]] {
        let f = typha_refused_on(on, false);
        assert!(
            f.iter().all(|f| f.severity == Severity::Warning),
            "{on:?}: {f:#?}"
        );
        let notes: Vec<&Finding> = f
            .iter()
            .filter(|f| f.facts().port() == Some(5473))
            .collect();
        assert_eq!(notes.len(), 1, "one note for the port: {on:?}: {f:#?}");
        assert!(notes[0].summary.starts_with("note: "), "{notes:#?}");
        assert_eq!(notes[0].facts().nodes(), on, "{notes:#?}");
    }
}

#[test]
fn a_port_the_inventory_says_a_node_serves_refused_is_an_error() {
    let f = typha_refused_on(&["n3"], true);
    assert!(
        f.iter().any(|f| f.kind() == Kind::NotListening
            && f.severity == Severity::Error
            && f.facts().port() == Some(5473)),
        "{f:#?}"
    );
}
