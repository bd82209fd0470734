//! Issue 25, item 8: a bootstrap cycle's fix points the components at the cluster's
//! control-plane endpoint (the server the kubelets use: kubeadm's controlPlaneEndpoint), not at
//! the first API server, which would tie the CNI to one control-plane node of an HA cluster;
//! when only API servers are known it says what pinning one costs. Every fix line is a command
//! after its label, and what is no command is a note.

use super::*;

fn cycle(f: &[Finding]) -> &Finding {
    f.iter()
        .find(|f| f.kind == Kind::BootstrapCycle)
        .unwrap_or_else(|| panic!("no cycle: {f:#?}"))
}

fn every_line_is_a_labelled_kubectl(f: &Finding) {
    assert!(!f.fix.is_empty(), "{f:#?}");
    for l in &f.fix {
        let (label, cmd) = l
            .split_once(": ")
            .unwrap_or_else(|| panic!("no label: {l}"));
        assert!(!label.is_empty() && cmd.starts_with("kubectl -n "), "{l}");
    }
}

#[test]
fn the_fix_uses_the_control_plane_endpoint_the_kubelets_use() {
    let mut inv = inventory(3, 1, "calico");
    components(&mut inv, CALICO_AND_COREDNS);
    let f = with_facts(&mut inv, &|node| {
        let mut f = base(node);
        f.kubelet[0].server = Some("https://k8s-api.example.com:6443".into());
        f
    });
    let c = cycle(&f);
    every_line_is_a_labelled_kubectl(c);
    assert!(
        c.fix.iter().all(|l| l
            .contains("KUBERNETES_SERVICE_HOST=k8s-api.example.com KUBERNETES_SERVICE_PORT=6443")),
        "{:#?}",
        c.fix
    );
    assert!(c.notes.is_empty(), "{:#?}", c.notes);
}

#[test]
fn with_api_servers_only_the_fix_says_what_pinning_one_costs() {
    let mut inv = inventory(3, 1, "calico");
    components(&mut inv, CALICO_AND_COREDNS);
    inv.cluster.api.endpoints = vec![
        "192.168.56.10:6443".parse().unwrap(),
        "192.168.56.11:6443".parse().unwrap(),
    ];
    let f = with_facts(&mut inv, &|node| NodeFacts {
        // No kubelet kubeconfig read: a worker about to join, or a non-kubeadm layout.
        kubelet: Vec::new(),
        ..base(node)
    });
    let c = cycle(&f);
    every_line_is_a_labelled_kubectl(c);
    assert!(
        c.fix
            .iter()
            .all(|l| l.contains("KUBERNETES_SERVICE_HOST=192.168.56.10 ")),
        "{:#?}",
        c.fix
    );
    assert!(
        c.notes
            .iter()
            .any(|n| n.contains("first of 2 API servers") && n.contains("controlPlaneEndpoint")),
        "{:#?}",
        c.notes
    );
    inv.cluster.api.endpoints.truncate(1);
    let f = with_facts(&mut inv, &|node| NodeFacts {
        kubelet: Vec::new(),
        ..base(node)
    });
    assert!(
        cycle(&f)
            .notes
            .iter()
            .any(|n| n.starts_with("only one API server is known (192.168.56.10:6443)")),
        "{:#?}",
        cycle(&f).notes
    );
}
