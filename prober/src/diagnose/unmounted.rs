//! Node checks that had nothing to check: the host agents of a discovered cluster found neither a
//! CNI kubeconfig nor a kubelet kubeconfig on any node, which is what `deploy/base` alone gives
//! (it mounts only `/etc/resolv.conf`). Without this warning a permanent or scheduled install
//! would skip the CNI credential checks in silence.

use std::collections::BTreeSet;

use crate::model::PathClass;

use super::context::Ctx;
use super::finding::{Finding, Misconfiguration, Severity};

/// Fewer node-config results than this say too little: a `prober preflight` reads only the
/// joining host, which has no kubelet kubeconfig before it joins.
const MIN_NODES: usize = 2;

pub(super) fn node_files_unmounted(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) {
    // Only a discovered cluster has a distribution whose component mounts the files; a lab or
    // hand-written inventory names its own host roots.
    let Some(files) = ctx.inv.cluster.node_files.as_ref() else {
        return;
    };
    let mut read = Vec::new();
    let mut nodes = BTreeSet::new();
    for (i, r) in ctx.results.iter().enumerate() {
        if r.path != PathClass::NodeConfig {
            continue;
        }
        let Some(facts) = r.result.node.as_ref() else {
            continue;
        };
        // Any kubeconfig found (read or not) means the files are mounted.
        if !facts.cni_kubeconfigs.is_empty() || !facts.kubelet.is_empty() {
            return;
        }
        read.push(i);
        nodes.insert(r.from.node.clone());
    }
    if nodes.len() < MIN_NODES {
        return;
    }
    let d = &files.distribution;
    let mut f = Finding::new(
        Misconfiguration {
            state: None,
            nodes: nodes.iter().cloned().collect(),
        },
        Severity::Warning,
        format!(
            "the host agents found no CNI or kubelet kubeconfig on any of {} nodes: they mount only /etc/resolv.conf, so the CNI credential checks did not run; apply deploy/components/{d} with the agents",
            nodes.len()
        ),
    );
    f.fix.push(format!(
        "add components: [prober/deploy/components/{d}] to the kustomization that applies deploy/base or deploy/scheduled (prober manifests --distribution {d} prints the same agents), then run prober again"
    ));
    ctx.emit(findings, f, &read, &[]);
}
