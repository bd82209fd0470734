//! flannel's data path (kube-flannel, Canal, and the flannel built into k3s): the backend from
//! the nodes' annotations or `net-conf.json`, and each node's VTEP.

use super::annotation;
use k8s_openapi::api::core::v1::Node as K8sNode;

use std::net::Ipv6Addr;

use crate::inventory::{Cidr, Overlay, Vtep};
use probe_proto::{Port, Vni};

/// Ports and VNI when `net-conf.json` names none (flannel's and the kernel's defaults).
const VXLAN_PORT: Port = Port::new(8472).expect("non-zero");
const VXLAN_VNI: Vni = Vni::new(1).expect("24 bits");
const WIREGUARD_PORT: Port = Port::new(51820).expect("non-zero");
/// VXLAN over IPv4 costs 50 bytes of a 1500-byte underlay.
const VXLAN_MTU: u16 = 1450;

/// What `net-conf.json` says.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct NetConf {
    pub network: Option<Cidr>,
    /// `IPv6Network` (dual-stack or IPv6-only flannel).
    pub network6: Option<Cidr>,
    pub backend: Option<String>,
    pub port: Option<u16>,
    pub vni: Option<u32>,
    pub mtu: Option<u16>,
}

/// Parses `net-conf.json` (`{"Network": ..., "Backend": {"Type": ..., "Port": ..., "VNI": ...}}`).
#[must_use]
pub fn net_conf(text: &str) -> Option<NetConf> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let b = &v["Backend"];
    let num = |k: &str| b.get(k).and_then(serde_json::Value::as_u64);
    Some(NetConf {
        network: v["Network"].as_str().and_then(super::cidr::parse),
        network6: v["IPv6Network"].as_str().and_then(super::cidr::parse),
        backend: b["Type"].as_str().map(str::to_lowercase),
        port: num("Port")
            .or_else(|| num("ListenPort"))
            .and_then(|p| u16::try_from(p).ok())
            .filter(|p| *p != 0),
        vni: num("VNI").and_then(|p| u32::try_from(p).ok()),
        mtu: num("MTU")
            .and_then(|p| u16::try_from(p).ok())
            .filter(|m| *m != 0),
    })
}

/// Whether flannel runs on the nodes (it annotates every node it manages).
#[must_use]
pub fn annotated(nodes: &[K8sNode]) -> bool {
    nodes
        .iter()
        .any(|n| annotation(n, "flannel.alpha.coreos.com/backend-type").is_some())
}

/// The overlay: the backend the nodes report, else the one `net-conf.json` names, else VXLAN
/// when the nodes carry VXLAN backend data. `host-gw` and unknown backends have none.
#[must_use]
pub fn overlay(
    nodes: &[K8sNode],
    conf: Option<&NetConf>,
    veth_mtu: Option<u16>,
) -> Option<Overlay> {
    let backend = nodes
        .iter()
        .find_map(|n| annotation(n, "flannel.alpha.coreos.com/backend-type"))
        .map(str::to_lowercase)
        .or_else(|| conf.and_then(|c| c.backend.clone()))
        .or_else(|| {
            nodes
                .iter()
                .any(|n| vtep_mac(n).is_some())
                .then(|| "vxlan".into())
        })?;
    let conf = conf.cloned().unwrap_or_default();
    match backend.as_str() {
        // A `Port` of 0 is the kernel's default to flannel.
        "vxlan" => Some(Overlay::Vxlan {
            port: conf.port.and_then(Port::new).unwrap_or(VXLAN_PORT),
            vni: conf.vni.and_then(Vni::new).unwrap_or(VXLAN_VNI),
            mtu: Some(conf.mtu.or(veth_mtu).unwrap_or(VXLAN_MTU)),
        }),
        "wireguard" => Some(Overlay::Wireguard {
            port: conf.port.and_then(Port::new).unwrap_or(WIREGUARD_PORT),
            mtu: conf.mtu.or(veth_mtu),
        }),
        _ => None,
    }
}

fn vtep_mac(n: &K8sNode) -> Option<probe_proto::MacAddr> {
    let data = annotation(n, "flannel.alpha.coreos.com/backend-data")?;
    let v: serde_json::Value = serde_json::from_str(data).ok()?;
    probe_proto::MacAddr::try_from(v.get("VtepMAC")?.as_str()?.to_string()).ok()
}

/// flannel's IPv6 VTEP on a node (`flannel-v6.1`): the `VtepMAC` of its `backend-v6-data`
/// annotation, at the first address of the node's IPv6 pod range.
#[must_use]
pub fn vtep6(n: &K8sNode, pod_cidr6: Option<Cidr>) -> Option<Vtep<Ipv6Addr>> {
    let data = annotation(n, "flannel.alpha.coreos.com/backend-v6-data")?;
    let v: serde_json::Value = serde_json::from_str(data).ok()?;
    let mac = probe_proto::MacAddr::try_from(v.get("VtepMAC")?.as_str()?.to_string()).ok()?;
    let std::net::IpAddr::V6(address) = pod_cidr6?.addr else {
        return None;
    };
    Some(Vtep {
        address,
        mac: Some(mac),
    })
}

/// flannel's VTEP on a node: the `VtepMAC` of its `backend-data` annotation, at the first
/// address of the node's pod range (flannel gives `flannel.1` that address).
#[must_use]
pub fn vtep(n: &K8sNode, pod_cidr: Option<Cidr>) -> Option<Vtep> {
    Some(Vtep {
        address: pod_cidr?.ipv4()?,
        mac: Some(vtep_mac(n)?),
    })
}
