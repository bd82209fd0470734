//! The scenario's candidate: a namespace on its zone's switch with an address, a default route
//! and nothing else — no VXLAN device, no pods, no kubelet — until `occupied` puts a program on
//! some of its ports. Its host root holds what a machine that never joined has, a resolv.conf,
//! and what an earlier membership left there when a fault says so.

use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use probe_proto::MacAddr;

use super::hostfiles::{self, Tokens};
use super::{LabNode, Layout, NsSetup, Process};
use crate::inventory::Cidr;
use crate::lab::scenario::Scenario;

/// Its index: far above the nodes', so its switch port and address never collide with theirs.
const INDEX: u8 = 240;

/// The candidate laid out like a node (for the switch and the faults); only its name, zone,
/// namespace and address are used.
#[must_use]
pub fn layout(s: &Scenario, prefix: &str, state_dir: &Path, zones: &[String]) -> Option<LabNode> {
    let c = s.candidate.as_ref()?;
    let zone = c
        .zone
        .as_ref()
        .and_then(|z| zones.iter().position(|n| n == z))
        .unwrap_or(0);
    Some(LabNode {
        name: c.name.clone(),
        index: INDEX,
        zone,
        ns: format!("{prefix}{}", c.name),
        address: Ipv4Addr::new(
            192,
            168,
            56 + u8::try_from(zone).expect("at most 8 zones"),
            9 + INDEX,
        ),
        address6: None,
        control_plane: false,
        pod_cidr: Cidr::v4(Ipv4Addr::UNSPECIFIED, 32),
        vtep: Ipv4Addr::UNSPECIFIED,
        mac: MacAddr([0x02, 0, 0, 0, INDEX, 0]),
        pods: Vec::new(),
        root: state_dir.join("nodes").join(&c.name),
    })
}

/// Its host root's files: `etc/resolv.conf` naming the scenario's nameservers, else the lab's
/// upstream resolver as any machine of the site would; and what an earlier membership left
/// behind when a fault says so: a kubelet.conf pointing at `https://localhost:6443`, a CNI
/// kubeconfig whose token expired or went stale (its token is not one the API server accepts).
pub(super) fn host_files(
    s: &Scenario,
    l: &Layout,
    ca_b64: &str,
    tokens: &Tokens,
) -> Vec<(PathBuf, String)> {
    let (Some(spec), Some(c)) = (&s.candidate, &l.candidate) else {
        return Vec::new();
    };
    let servers: Vec<Ipv4Addr> = if spec.nameservers.is_empty() {
        vec![l.upstream_dns]
    } else {
        spec.nameservers.clone()
    };
    let text = servers.iter().fold(String::new(), |mut t, a| {
        let _ = writeln!(t, "nameserver {a}");
        t
    });
    let etc = c.root.join("etc");
    let mut files = vec![(etc.join("resolv.conf"), text)];
    if hostfiles::kubelet_localhost(s, &c.name) {
        files.push(hostfiles::kubelet_conf(
            &etc,
            "https://localhost:6443",
            ca_b64,
            &c.name,
        ));
    }
    if let Some(age) = hostfiles::token_fault(s, &c.name) {
        let jwt = hostfiles::cni_token(tokens, age);
        files.extend(hostfiles::calico_cni_files(&etc, ca_b64, &jwt));
    }
    files
}

/// Its namespace: the switch's veth end, the address, the default route, and IPv4 forwarding as
/// the scenario says (in that namespace only).
pub(super) fn setup(s: &Scenario, c: &LabNode) -> NsSetup {
    let mut st = NsSetup::new(&c.ns);
    let forwards = s.candidate.as_ref().is_none_or(|spec| spec.ip_forward);
    st.sysctl.push((
        "net.ipv4.ip_forward".into(),
        if forwards { "1" } else { "0" }.into(),
    ));
    st.config.push("link set eth0 up".into());
    st.config
        .push(format!("addr add {}/24 dev eth0", c.address));
    st.config
        .push(format!("route add default via {}", c.gateway()));
    st
}

/// The API server stand-in's `--clock-skew`, when the candidate's clock is to be off: the
/// server's `Date` runs the other way.
pub(super) fn apiserver_skew(s: &Scenario) -> Option<String> {
    let skew = s.candidate.as_ref()?.clock_skew;
    (skew != 0).then(|| format!("--clock-skew={}", -skew))
}

/// A program holding each occupied port (TCP and UDP), as another service would.
pub(super) fn processes(s: &Scenario, l: &Layout, agent: &str) -> Vec<Process> {
    let (Some(spec), Some(c)) = (&s.candidate, &l.candidate) else {
        return Vec::new();
    };
    spec.occupied
        .iter()
        .map(|p| Process {
            ns: c.ns.clone(),
            argv: vec![
                agent.to_string(),
                "serve".into(),
                "--port".into(),
                p.to_string(),
                "--sniff".into(),
                "never".into(),
            ],
            what: "occupier",
        })
        .collect()
}
