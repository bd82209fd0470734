//! Bootstrap cycles and the service proxy (`bootstrap.rs`): a broken `ClusterIP` path is an active
//! cycle, never a gap.

use super::*;

#[test]
fn healthy_cluster_on_the_service_path_has_only_a_latent_cycle() {
    let mut inv = inventory(3, 1, "calico");
    components(&mut inv, CALICO_AND_COREDNS);
    let (_, f) = run(&inv, &|_| None);
    assert_eq!(kinds(&f), [Kind::BootstrapCycle], "{f:#?}");
    assert_eq!(f[0].severity, Severity::Warning);
    assert!(like(json!({"kind": "bootstrap-cycle", "state": "latent", "components": ["calico-node", "coredns"]})).matches(&f[0]), "{:#?}", f[0]);
    assert_eq!(
        f[0].facts().cycle().first(),
        Some(&"calico-node".to_string())
    );
    assert!(
        f[0].fix
            .iter()
            .any(|l| l.contains("KUBERNETES_SERVICE_HOST=192.168.56.10")
                && l.contains("-c install-cni")),
        "{:#?}",
        f[0].fix
    );
    assert!(f[0].consequences.is_empty());
}

#[test]
fn incident_2_clusterip_broken_is_an_active_cycle_not_a_gap() {
    let mut inv = inventory(2, 1, "calico");
    components(&mut inv, CALICO_AND_COREDNS);
    let (_, f) = run(&inv, &|p| {
        let service = matches!(p.path, PathClass::PodToService | PathClass::NodeToService)
            || (p.path == PathClass::Dns && p.to.service.as_deref() == Some("kube-dns"));
        if service { timeout() } else { None }
    });
    assert_eq!(kinds(&f), [Kind::BootstrapCycle], "{f:#?}");
    let c = &f[0];
    assert!(like(json!({"kind": "bootstrap-cycle", "state": "active", "components": ["calico-node", "coredns"], "nodes": ["n1", "n2"]})).matches(c), "{c:#?}");
    assert_eq!(c.severity, Severity::Error);
    assert_eq!(c.facts().components()[0], "calico-node", "the CNI first");
    // Broken on every node: the service proxy is named, and its fix comes before the env fix.
    assert!(
        c.summary.contains("kube-proxy") && !c.summary.contains("(es)"),
        "{}",
        c.summary
    );
    assert!(c.fix[0].contains("kube-proxy"), "{:#?}", c.fix);
    for ct in ["install-cni", "calico-node"] {
        assert!(
            c.fix
                .iter()
                .any(|l| l.contains(&format!("set env ds/calico-node -c {ct} "))),
            "{:#?}",
            c.fix
        );
    }
    assert!(
        c.consequences.iter().any(|id| id.starts_with("dns:")),
        "DNS through its Service is a consequence: {c:#?}"
    );
}

#[test]
fn kube_proxy_missing_without_components_is_service_proxy() {
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run(&inv, &|p| {
        let service = matches!(p.path, PathClass::PodToService | PathClass::NodeToService)
            || (p.path == PathClass::Dns && p.to.service.as_deref() == Some("kube-dns"));
        if service && p.from.node == "n2" {
            timeout()
        } else {
            None
        }
    });
    assert_eq!(kinds(&f), [Kind::ServiceProxy], "{f:#?}");
    assert_eq!(f[0].facts().nodes(), ["n2"]);
    assert!(
        f[0].consequences
            .iter()
            .any(|c| c.starts_with("dns:n2/pod->svc/kube-dns")),
        "{:#?}",
        f[0]
    );
}

#[test]
fn an_ipv6_service_failing_with_its_ipv6_endpoint_is_no_service_proxy_fault() {
    // Over IPv6 the API server fails directly too (a TLS error, no block): the IPv4 endpoint
    // answering says nothing of the IPv6 Service, so kube-proxy is not what is blamed.
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run_dual(&inv, &|p| {
        let v6 = p.to.family() == crate::model::Family::Ipv6;
        let service = matches!(p.path, PathClass::PodToService | PathClass::NodeToService);
        let direct = matches!(
            p.path,
            PathClass::PodToApiserver | PathClass::NodeToApiserver
        );
        if !(v6 && p.from.node == "n2") {
            None
        } else if service {
            timeout()
        } else if direct {
            Some((Outcome::TlsError, "tls handshake: unexpected eof".into()))
        } else {
            None
        }
    });
    assert!(!kinds(&f).contains(&Kind::ServiceProxy), "{f:#?}");
}

#[test]
fn kube_proxy_missing_over_ipv6_only_is_service_proxy_over_ipv6() {
    let inv = inventory(3, 1, "flannel");
    let (_, f) = run_dual(&inv, &|p| {
        let service = matches!(p.path, PathClass::PodToService | PathClass::NodeToService);
        (service && p.from.node == "n2" && p.to.family() == crate::model::Family::Ipv6)
            .then(|| timeout().unwrap())
    });
    assert_eq!(kinds(&f), [Kind::ServiceProxy], "{f:#?}");
    assert_eq!(f[0].family, Some(crate::model::Family::Ipv6));
    // It names the IPv6 Service that fails, not the IPv4 one that works, and the rules to look
    // for are ip6tables' for that address.
    let v6 = match inv.cluster.api.service.ip() {
        std::net::IpAddr::V4(_) => v6_of(inv.cluster.api.service.ip()),
        a @ std::net::IpAddr::V6(_) => a,
    };
    let service = std::net::SocketAddr::new(v6, inv.cluster.api.service.port()).to_string();
    assert!(
        f[0].summary
            .contains(&format!("Service {service} fails on n2")),
        "{}",
        f[0].summary
    );
    assert!(
        !f[0].summary.contains(&inv.cluster.api.service.to_string()),
        "{}",
        f[0].summary
    );
    assert!(
        f[0].fix
            .iter()
            .any(|l| l.contains(&format!("ip6tables-save -t nat | grep -c {v6}"))),
        "{:#?}",
        f[0].fix
    );
    assert!(
        !f[0].fix.iter().any(|l| l.contains("10.96")),
        "{:#?}",
        f[0].fix
    );
}
