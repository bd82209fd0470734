//! A credential finding's fix names whose credential it is (the token's service account, the
//! component that writes the file) and fits its state: a CA for `insecure-skip-tls-verify`, a
//! fresh token for an expired or stale one, a bound token for a legacy one.

use super::*;

const COMPONENTS: &str = "
- {name: calico-node, namespace: kube-system, kind: DaemonSet, role: cni, hostNetwork: true, apiAccess: service, containers: [install-cni, calico-node]}
- {name: kube-multus-ds, namespace: kube-system, kind: DaemonSet, role: cni-meta, hostNetwork: true, apiAccess: kubeconfig, containers: [kube-multus]}
";

/// Each node's CNI kubeconfig at `path`, with a token for `account`, shaped by `shape`.
fn credential(
    path: &'static str,
    account: Option<&'static str>,
    shape: fn(&mut KubeconfigFacts),
) -> Vec<Finding> {
    let mut inv = inventory(2, 1, "calico");
    components(&mut inv, COMPONENTS);
    with_facts(&mut inv, &move |node| {
        let mut f = base(node);
        let mut t = token(NOW - 600, Some(NOW + 3000), true);
        t.subject = account.map(|a| format!("system:serviceaccount:kube-system:{a}"));
        let mut kc = kubeconfig(path, Some(t), Some(Outcome::Ok));
        shape(&mut kc);
        f.cni_kubeconfigs = vec![kc];
        f
    })
}

fn fix_of(f: &[Finding]) -> String {
    let c = f
        .iter()
        .find(|f| f.kind() == Kind::Credential)
        .unwrap_or_else(|| panic!("no credential finding: {f:#?}"));
    c.fix.join("\n")
}

#[test]
fn the_fix_names_the_owner_and_fits_the_state() {
    const MULTUS: &str = "/etc/cni/net.d/multus.d/multus.kubeconfig";
    const CALICO: &str = "/etc/cni/net.d/calico-kubeconfig";
    fn expired(kc: &mut KubeconfigFacts) {
        if let Some(t) = kc.token.as_mut() {
            t.expires_at = Some(NOW - 60);
        }
    }
    fn stale(kc: &mut KubeconfigFacts) {
        if let Some(t) = kc.token.as_mut() {
            t.issued_at = Some(NOW - 7200);
        }
    }
    fn insecure(kc: &mut KubeconfigFacts) {
        kc.insecure_skip_tls_verify = true;
        kc.server_trust = Some(probe_proto::ServerTrust::InsecureSkipVerify);
    }
    fn legacy(kc: &mut KubeconfigFacts) {
        if let Some(t) = kc.token.as_mut() {
            t.expires_at = None;
            t.bound = false;
        }
    }
    fn rejected(kc: &mut KubeconfigFacts) {
        kc.check = Some(CheckFacts {
            outcome: Outcome::Unauthorized,
            http_status: Some(401),
            detail: String::new(),
        });
    }
    // (file, account, state, what the fix must say, what it must not)
    type Case = (
        &'static str,
        Option<&'static str>,
        fn(&mut KubeconfigFacts),
        &'static [&'static str],
        &'static [&'static str],
    );
    let cases: [Case; 7] = [
        (
            MULTUS,
            Some("multus"),
            stale,
            &["kube-multus-ds", "kube-system/multus", "TokenRequest"],
            &["calico-node"],
        ),
        (
            MULTUS,
            Some("multus"),
            expired,
            &["restart kube-multus-ds"],
            &["calico-node"],
        ),
        (
            CALICO,
            Some("calico-cni-plugin"),
            insecure,
            &["certificate-authority-data", "calico-node"],
            &["fresh", "delete pod"],
        ),
        (
            CALICO,
            Some("calico-cni-plugin"),
            legacy,
            &["bound token", "TokenRequest"],
            &["delete pod"],
        ),
        (
            CALICO,
            Some("calico-cni-plugin"),
            rejected,
            &[
                "kubectl -n kube-system get serviceaccount calico-cni-plugin",
                "restart calico-node",
            ],
            &[],
        ),
        // An account no component is known by: its pods, by account, on that node.
        (
            "/etc/cni/net.d/10-other.kubeconfig",
            Some("other-cni"),
            expired,
            &["spec.serviceAccountName=other-cni"],
            &["calico-node", "kube-multus-ds"],
        ),
        // No account at all: the CNI is the best guess.
        (
            "/etc/cni/net.d/10-other.kubeconfig",
            None,
            expired,
            &["restart calico-node"],
            &[],
        ),
    ];
    for (path, account, shape, says, not) in cases {
        let fix = fix_of(&credential(path, account, shape));
        for s in says {
            assert!(fix.contains(s), "{path} {account:?}: no {s:?} in\n{fix}");
        }
        for s in not {
            assert!(!fix.contains(s), "{path} {account:?}: {s:?} in\n{fix}");
        }
    }
}
