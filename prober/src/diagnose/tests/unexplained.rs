//! What no rule explains (`unexplained.rs`) is named so, never dropped.

use super::*;

#[test]
fn anything_else_is_named_unexplained() {
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run(&inv, &|p| {
        let (from, to) = node_of(p);
        if p.path == PathClass::NodeToNode && to == "n2" && from == "n1" && p.to.port == Some(10250)
        {
            Some((Outcome::HttpError, "HTTP 500".into()))
        } else {
            None
        }
    });
    assert_eq!(kinds(&f), [Kind::Unexplained], "{f:#?}");
    assert!(
        f[0].summary.contains("http-error") || f[0].summary.contains("HTTP"),
        "{}",
        f[0].summary
    );
}
