//! The agents' manifests: what each object grants, mounts and selects.

use super::*;

#[test]
fn a_tunnel_port_the_agent_does_not_watch_by_default_is_passed_to_serve() {
    let ov = |mode: &str, port: u16| -> crate::inventory::Overlay {
        serde_json::from_value(serde_json::json!({"mode": mode, "port": port, "vni": 0})).unwrap()
    };
    assert_eq!(tunnel_flag(Some(&ov("vxlan", 8472))), None);
    assert_eq!(tunnel_flag(Some(&ov("vxlan", 4789))), None);
    assert_eq!(tunnel_flag(Some(&ov("geneve", 6081))), None);
    assert_eq!(tunnel_flag(Some(&ov("ipip", 0))), None);
    assert_eq!(tunnel_flag(None), None);
    let spec = AgentSpec {
        tunnel: tunnel_flag(Some(&ov("geneve", 6082))),
        ..AgentSpec::default()
    };
    let ds = host_daemonset(&spec);
    let args = ds.spec.unwrap().template.spec.unwrap().containers[0]
        .args
        .clone()
        .unwrap();
    let at = args
        .iter()
        .position(|a| a == "--geneve-port")
        .expect("flag");
    assert_eq!(args[at + 1], "6082");
    assert_eq!(
        tunnel_flag(Some(&ov("vxlan", 9999))),
        Some(("--vxlan-port".to_string(), 9999))
    );
}

#[test]
fn host_agent_has_host_network_net_raw_only_and_read_only_mounts() {
    let ds = host_daemonset(&AgentSpec::default());
    let pod = ds.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.host_network, Some(true));
    assert_eq!(pod.dns_policy.as_deref(), Some("ClusterFirstWithHostNet"));
    assert_eq!(pod.automount_service_account_token, Some(false));
    assert_eq!(
        pod.tolerations.unwrap()[0].operator.as_deref(),
        Some("Exists")
    );
    let c = &pod.containers[0];
    let caps = c
        .security_context
        .as_ref()
        .unwrap()
        .capabilities
        .as_ref()
        .unwrap();
    assert_eq!(caps.add.as_deref(), Some(&["NET_RAW".to_string()][..]));
    assert_eq!(caps.drop.as_deref(), Some(&["ALL".to_string()][..]));
    assert_eq!(
        c.security_context
            .as_ref()
            .unwrap()
            .read_only_root_filesystem,
        Some(true)
    );
    let mounts = c.volume_mounts.as_ref().unwrap();
    assert!(
        mounts
            .iter()
            .all(|m| m.read_only == Some(true) && m.mount_path.starts_with("/host/"))
    );
    let paths: Vec<&str> = mounts.iter().map(|m| m.mount_path.as_str()).collect();
    // The permanent install's: only what every distribution has.
    assert_eq!(paths, ["/host/etc/resolv.conf"]);
    let volumes = pod.volumes.as_ref().unwrap();
    assert!(
        volumes
            .iter()
            .all(|v| v.host_path.as_ref().unwrap().type_.as_deref() == Some("File")),
        "/etc/resolv.conf: every Linux node has it"
    );
    let kubeadm = AgentSpec {
        node_files: Some(NodeFiles::kubeadm()),
        ..AgentSpec::default()
    };
    let pod = host_daemonset(&kubeadm)
        .spec
        .unwrap()
        .template
        .spec
        .unwrap();
    let paths: Vec<String> = pod.containers[0]
        .volume_mounts
        .as_ref()
        .unwrap()
        .iter()
        .map(|m| m.mount_path.clone())
        .collect();
    assert_eq!(
        paths,
        [
            "/host/etc/resolv.conf",
            "/host/etc/cni/net.d",
            "/host/etc/kubernetes/kubelet.conf"
        ]
    );
    assert_eq!(pod.priority_class_name, None, "not outside kube-system");
    let types: Vec<Option<&str>> = pod
        .volumes
        .as_ref()
        .unwrap()
        .iter()
        .map(|v| v.host_path.as_ref().unwrap().type_.as_deref())
        .collect();
    // A node whose CNI wrote no configuration yet must still get its host agent.
    assert_eq!(
        types,
        [Some("File"), Some("DirectoryOrCreate"), Some("File")]
    );
    assert_eq!(pod.node_selector.unwrap()["kubernetes.io/os"], "linux");
    let probe = c
        .readiness_probe
        .as_ref()
        .unwrap()
        .http_get
        .as_ref()
        .unwrap();
    assert_eq!(
        (probe.path.as_deref(), &probe.port),
        (Some("/healthz"), &IntOrString::Int(9917))
    );
}

#[test]
fn k3s_files_are_mounted_where_the_node_checks_look() {
    let spec = AgentSpec {
        node_files: Some(crate::runtime::kube::discover::nodefiles::node_files(
            "k3s",
            crate::inventory::Cni::Flannel,
        )),
        namespace: SYSTEM_NAMESPACE.into(),
        ..AgentSpec::default()
    };
    let pod = host_daemonset(&spec).spec.unwrap().template.spec.unwrap();
    let host: Vec<(String, String)> = pod
        .volumes
        .unwrap()
        .iter()
        .zip(pod.containers[0].volume_mounts.as_ref().unwrap())
        .map(|(v, m)| {
            (
                v.host_path.as_ref().unwrap().path.clone(),
                m.mount_path.clone(),
            )
        })
        .collect();
    assert_eq!(
        host[1..],
        [
            (
                "/var/lib/rancher/k3s/agent/etc/cni/net.d".to_string(),
                "/host/etc/cni/net.d".to_string()
            ),
            (
                "/var/lib/rancher/k3s/agent/kubelet.kubeconfig".to_string(),
                "/host/etc/kubernetes/kubelet.conf".to_string()
            )
        ]
    );
    assert_eq!(
        pod.priority_class_name.as_deref(),
        Some("system-node-critical"),
        "in kube-system"
    );
}

#[test]
fn a_run_names_and_selects_only_its_own_objects() {
    let spec = AgentSpec {
        run: Some("r7".into()),
        ..AgentSpec::default()
    };
    let ds = host_daemonset(&spec);
    assert_eq!(ds.metadata.name.as_deref(), Some("probe-host-r7"));
    let sel = ds.spec.unwrap().selector.match_labels.unwrap();
    assert_eq!(sel[RUN_LABEL], "r7");
    assert_eq!(
        service_account(&spec).metadata.name.as_deref(),
        Some("prober-agent-r7")
    );
    assert_eq!(
        spec.selector(),
        "app.kubernetes.io/name=prober,prober.io/run=r7"
    );
    assert_eq!(
        AgentSpec::default().selector(),
        "app.kubernetes.io/name=prober,!prober.io/run"
    );
    let ns = namespace(&spec).metadata.labels.unwrap();
    assert_eq!(ns["pod-security.kubernetes.io/enforce"], "privileged");
    assert_eq!(ns[RUN_LABEL], "r7");
}

#[test]
fn pod_agent_is_unprivileged() {
    let spec = AgentSpec {
        ttl: Some("30m".into()),
        run: Some("r1".into()),
        ..AgentSpec::default()
    };
    let ds = pod_daemonset(&spec);
    assert_eq!(ds.metadata.labels.as_ref().unwrap()[RUN_LABEL], "r1");
    let pod = ds.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.host_network, None);
    assert!(pod.volumes.is_none(), "no host mounts");
    assert_eq!(
        pod.security_context.unwrap().sysctls.unwrap()[0].name,
        "net.ipv4.ping_group_range"
    );
    let c = &pod.containers[0];
    assert_eq!(
        c.args.as_deref().unwrap(),
        [
            "serve", "--sniff", "never", "--ttl", "30m", "--on-ttl", "idle"
        ]
    );
    let sc = c.security_context.as_ref().unwrap();
    assert_eq!(
        (sc.run_as_non_root, sc.run_as_user),
        (Some(true), Some(65_534))
    );
    assert!(sc.capabilities.as_ref().unwrap().add.is_none());
}

#[test]
fn the_service_account_mounts_no_token() {
    assert_eq!(
        service_account(&AgentSpec::default()).automount_service_account_token,
        Some(false)
    );
}
