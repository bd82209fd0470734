//! The command lines of the cluster's programs, from its configuration: flags as a kubeadm
//! cluster sets them, shortened where a test would otherwise wait (node monitoring).

use std::path::Path;

use super::{API_PORT, Config, KUBELET_PORT, NodeSpec, pki, url_host};

pub(super) const ETCD_PORT: u16 = 2379;
const ETCD_PEER_PORT: u16 = 2380;

/// What the control plane's command lines are made of.
pub(super) struct Args<'a> {
    pub(super) config: &'a Config,
    pub(super) keys: &'a pki::Keys,
    pub(super) audit_log: &'a Path,
}

impl Args<'_> {
    fn bin(&self, name: &str) -> String {
        self.config.bins.join(name).display().to_string()
    }

    fn path(&self, rel: &str) -> String {
        self.config.dir.join(rel).display().to_string()
    }

    fn kubeconfig(&self, user: &str) -> String {
        self.path(&format!("kubeconfig/{}", user.replace(':', "-")))
    }

    /// etcd on the control plane's loopback (the API server's) and address (what a stacked etcd
    /// serves its peers and the node-to-node probes).
    pub(super) fn etcd(&self, cp: &NodeSpec) -> Vec<String> {
        let host = url_host(cp.addresses[0]);
        let peer = format!("http://{host}:{ETCD_PEER_PORT}");
        vec![
            self.bin("etcd"),
            "--name".into(),
            cp.name.clone(),
            "--data-dir".into(),
            self.path("etcd"),
            "--listen-client-urls".into(),
            format!("http://127.0.0.1:{ETCD_PORT},http://{host}:{ETCD_PORT}"),
            "--advertise-client-urls".into(),
            format!("http://{host}:{ETCD_PORT}"),
            "--listen-peer-urls".into(),
            peer.clone(),
            "--initial-advertise-peer-urls".into(),
            peer.clone(),
            "--initial-cluster".into(),
            format!("{}={peer}", cp.name),
            "--listen-metrics-urls".into(),
            "http://127.0.0.1:2381".into(),
            "--log-level".into(),
            "warn".into(),
        ]
    }

    /// The API server on the control plane's address with the lab's serving certificate,
    /// bearer tokens, `Node,RBAC`, the default admission chain plus kubeadm's NodeRestriction,
    /// and an audit log of every request (what the tests read instead of a stand-in's log).
    pub(super) fn apiserver(&self, cp: &NodeSpec) -> Vec<String> {
        let ip = cp.addresses[0];
        let c = self.config;
        vec![
            self.bin("kube-apiserver"),
            format!("--etcd-servers=http://127.0.0.1:{ETCD_PORT}"),
            format!(
                "--etcd-compaction-interval={}s",
                c.etcd_compaction.as_secs().max(1)
            ),
            format!("--bind-address={ip}"),
            format!("--advertise-address={ip}"),
            format!("--secure-port={API_PORT}"),
            format!("--tls-cert-file={}", c.api_cert.display()),
            format!("--tls-private-key-file={}", c.api_key.display()),
            format!("--token-auth-file={}", self.path("pki/tokens.csv")),
            "--authorization-mode=Node,RBAC".into(),
            "--enable-admission-plugins=NodeRestriction".into(),
            "--allow-privileged=true".into(),
            format!("--service-cluster-ip-range={}", c.service_cidrs.join(",")),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            format!("--service-account-key-file={}", self.keys.sa_pub.display()),
            format!(
                "--service-account-signing-key-file={}",
                self.keys.sa_key.display()
            ),
            format!("--audit-policy-file={}", self.path("audit-policy.yaml")),
            format!("--audit-log-path={}", self.audit_log.display()),
            "--audit-log-mode=blocking".into(),
            "--profiling=false".into(),
            "--v=1".into(),
        ]
    }

    /// Every default controller (DaemonSet, Job, CronJob, namespace, garbage collector,
    /// EndpointSlice, service-account token, node lifecycle, ...), node monitoring shortened.
    pub(super) fn controller_manager(&self) -> Vec<String> {
        let kc = self.kubeconfig("system:kube-controller-manager");
        vec![
            self.bin("kube-controller-manager"),
            format!("--kubeconfig={kc}"),
            format!("--authentication-kubeconfig={kc}"),
            format!("--authorization-kubeconfig={kc}"),
            format!(
                "--service-account-private-key-file={}",
                self.keys.sa_key.display()
            ),
            format!("--root-ca-file={}", self.config.ca_cert.display()),
            "--use-service-account-credentials=true".into(),
            "--leader-elect=false".into(),
            "--bind-address=127.0.0.1".into(),
            format!(
                "--node-monitor-grace-period={}s",
                self.config.node_monitor_grace.as_secs().max(2)
            ),
            "--node-monitor-period=2s".into(),
            "--v=1".into(),
        ]
    }

    pub(super) fn scheduler(&self) -> Vec<String> {
        let kc = self.kubeconfig("system:kube-scheduler");
        vec![
            self.bin("kube-scheduler"),
            format!("--kubeconfig={kc}"),
            format!("--authentication-kubeconfig={kc}"),
            format!("--authorization-kubeconfig={kc}"),
            "--leader-elect=false".into(),
            "--bind-address=127.0.0.1".into(),
            "--v=1".into(),
        ]
    }
}

/// A node's shim: its identity, kubelet endpoint, addresses, pod ranges and sandboxes, host
/// root, the images it can run and where it keeps its state (and fault switches).
pub(super) fn shim(config: &Config, n: &NodeSpec, state: &Path) -> Vec<String> {
    let mut argv = vec![
        config.bins.join("nodeshim").display().to_string(),
        "run".into(),
        "--name".into(),
        n.name.clone(),
        "--kubeconfig".into(),
        config
            .dir
            .join(format!("kubeconfig/system-node-{}", n.name))
            .display()
            .to_string(),
        "--listen".into(),
        format!("{}:{KUBELET_PORT}", url_host(n.addresses[0])),
        "--tls-cert".into(),
        state.join("kubelet.crt").display().to_string(),
        "--tls-key".into(),
        state.join("kubelet.key").display().to_string(),
        "--node-netns".into(),
        n.netns.clone(),
        "--host-root".into(),
        n.root.display().to_string(),
        "--state-dir".into(),
        state.display().to_string(),
        "--cpu".into(),
        n.cpu.clone(),
    ];
    for a in &n.addresses {
        argv.extend(["--address".into(), a.to_string()]);
    }
    for c in &n.pod_cidrs {
        argv.extend(["--pod-cidr".into(), c.clone()]);
    }
    for (ns, ips) in &n.sandboxes {
        let list: Vec<String> = ips.iter().map(ToString::to_string).collect();
        argv.extend(["--sandbox".into(), format!("{ns}={}", list.join(","))]);
    }
    for image in &config.images {
        argv.extend([
            "--image".into(),
            format!("{}={}", image.name, image.dir.display()),
        ]);
        if let Some(e) = &image.entrypoint {
            argv.extend(["--entrypoint".into(), format!("{}={e}", image.name)]);
        }
    }
    if let Some(dns) = config.cluster_dns {
        argv.extend(["--cluster-dns".into(), dns.to_string()]);
    }
    argv
}
