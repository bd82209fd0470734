//! Calico (manifest or tigera-operator install): encapsulation from the `Installation` or the
//! `IPPools`, whether BIRD speaks BGP and with whom, which nodes run Typha, and the IPAM blocks
//! each node owns (Calico ignores `spec.podCIDR`).

use super::annotation;
use std::collections::BTreeMap;
use std::net::Ipv6Addr;

use k8s_openapi::api::core::v1::{Node as K8sNode, Pod, PodSpec};
use kube::api::DynamicObject;
use serde_json::Value;

use super::cidr;
use crate::inventory::{Bgp, Cidr, Family, Overlay, OverlayMode, Vtep};
use probe_proto::{Port, Vni};

/// Felix's defaults for VXLAN (`FelixConfiguration` `vxlanPort`, `vxlanVNI`).
const VXLAN_PORT: Port = Port::new(4789).expect("non-zero");
const VXLAN_VNI: Vni = Vni::new(4096).expect("24 bits");
/// Encapsulation overheads on a 1500-byte underlay, as Felix computes them.
const UNDERLAY_MTU: u16 = 1500;
const IPIP_OVERHEAD: u16 = 20;
const VXLAN_OVERHEAD: u16 = 50;
/// BGP between BIRDs; Felix to Typha.
pub const BGP_PORT: u16 = 179;
pub const TYPHA_PORT: u16 = 5473;

/// Everything Calico-specific discovery read.
#[derive(Debug, Default, Clone)]
pub struct Raw {
    /// `calico-config` (manifest installs).
    pub config: Option<BTreeMap<String, String>>,
    pub installations: Vec<DynamicObject>,
    pub ip_pools: Vec<DynamicObject>,
    pub bgp_configurations: Vec<DynamicObject>,
    pub felix_configurations: Vec<DynamicObject>,
    pub block_affinities: Vec<DynamicObject>,
    pub typha_pods: Vec<Pod>,
}

/// What the inventory takes from Calico.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Facts {
    pub overlay: Option<Overlay>,
    pub bgp: Option<Bgp>,
    /// Nodes where a Typha pod runs (host network: it listens on the node's address).
    pub typha_nodes: Vec<String>,
    /// Each node's confirmed IPAM blocks.
    pub blocks: BTreeMap<String, Vec<Cidr>>,
    pub pool: Option<Cidr>,
    /// The IPv6 pools' covering prefix (dual-stack or IPv6-only).
    pub pool6: Option<Cidr>,
}

fn named<'a>(objects: &'a [DynamicObject], name: &str) -> Option<&'a Value> {
    objects
        .iter()
        .find(|o| o.metadata.name.as_deref() == Some(name))
        .map(|o| &o.data["spec"])
}

fn installation(raw: &Raw) -> Option<&Value> {
    named(&raw.installations, "default")
        .or_else(|| raw.installations.first().map(|o| &o.data["spec"]))
}

/// IPv4 pools that assign addresses.
fn pools(raw: &Raw) -> Vec<&Value> {
    raw.ip_pools
        .iter()
        .map(|p| &p.data["spec"])
        .filter(|s| s["disabled"].as_bool() != Some(true))
        .filter(|s| {
            s["cidr"]
                .as_str()
                .and_then(cidr::parse)
                .is_some_and(|c| c.ipv4().is_some())
        })
        .collect()
}

/// IP-in-IP, VXLAN, or none.
fn encapsulation(raw: &Raw) -> Option<OverlayMode> {
    let stated = installation(raw)
        .and_then(|i| i["calicoNetwork"]["ipPools"].as_array())
        .and_then(|pools| pools.iter().find_map(|p| p["encapsulation"].as_str()));
    if let Some(e) = stated {
        return match e {
            "IPIP" | "IPIPCrossSubnet" => Some(OverlayMode::Ipip),
            "VXLAN" | "VXLANCrossSubnet" => Some(OverlayMode::Vxlan),
            _ => None,
        };
    }
    let on = |v: &Value| matches!(v.as_str(), Some("Always" | "CrossSubnet"));
    let pools = pools(raw);
    if pools.iter().any(|p| on(&p["ipipMode"])) {
        Some(OverlayMode::Ipip)
    } else if pools.iter().any(|p| on(&p["vxlanMode"])) {
        Some(OverlayMode::Vxlan)
    } else {
        None
    }
}

fn number(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_str()?.trim().parse().ok())
}

/// The MTU pods see: stated in `calico-config` (`veth_mtu`), the `Installation`, or
/// `FelixConfiguration`; 0 there means "auto": the underlay less the encapsulation.
fn mtu(raw: &Raw, mode: OverlayMode) -> u16 {
    let felix = named(&raw.felix_configurations, "default");
    let stated = raw
        .config
        .as_ref()
        .and_then(|c| c.get("veth_mtu"))
        .and_then(|m| m.trim().parse::<u64>().ok())
        .or_else(|| installation(raw).and_then(|i| number(&i["calicoNetwork"]["mtu"])))
        .or_else(|| {
            felix.and_then(|f| {
                number(
                    &f[if mode == OverlayMode::Ipip {
                        "ipipMTU"
                    } else {
                        "vxlanMTU"
                    }],
                )
            })
        })
        .and_then(|m| u16::try_from(m).ok())
        .filter(|m| *m != 0);
    stated.unwrap_or(if mode == OverlayMode::Ipip {
        UNDERLAY_MTU - IPIP_OVERHEAD
    } else {
        UNDERLAY_MTU - VXLAN_OVERHEAD
    })
}

/// The networking backend: `bird` (BGP), `vxlan` or `none`.
fn backend(raw: &Raw, calico_node: Option<&PodSpec>) -> String {
    if let Some(bgp) = installation(raw).and_then(|i| i["calicoNetwork"]["bgp"].as_str()) {
        return if bgp == "Disabled" { "vxlan" } else { "bird" }.into();
    }
    if let Some(b) = raw.config.as_ref().and_then(|c| c.get("calico_backend")) {
        return b.trim().to_string();
    }
    calico_node
        .into_iter()
        .flat_map(|p| &p.containers)
        .filter(|c| c.name == "calico-node")
        .flat_map(|c| c.env.iter().flatten())
        .find(|e| e.name == "CALICO_NETWORKING_BACKEND")
        .and_then(|e| e.value.clone())
        // calico-node's own default.
        .unwrap_or_else(|| "bird".into())
}

/// Calico's IPv6 VXLAN tunnel endpoint (`vxlan-v6.calico`), from the annotations calico-node
/// writes; Calico has no IPv6 IP-in-IP.
#[must_use]
pub fn vtep6(n: &K8sNode, mode: OverlayMode) -> Option<Vtep<Ipv6Addr>> {
    if mode != OverlayMode::Vxlan {
        return None;
    }
    Some(Vtep {
        address: annotation(n, "projectcalico.org/IPv6VXLANTunnelAddr")?
            .parse()
            .ok()?,
        mac: annotation(n, "projectcalico.org/VXLANTunnelMACAddrV6")
            .and_then(|m| probe_proto::MacAddr::try_from(m.to_string()).ok()),
    })
}

/// Calico's tunnel endpoint on a node in `mode` (VXLAN or IP-in-IP), from the annotations
/// calico-node writes: the tunnel device's address, and for VXLAN its MAC.
#[must_use]
pub fn vtep(n: &K8sNode, mode: OverlayMode) -> Option<Vtep> {
    let (address, mac) = match mode {
        OverlayMode::Vxlan => (
            "projectcalico.org/IPv4VXLANTunnelAddr",
            annotation(n, "projectcalico.org/VXLANTunnelMACAddr")
                .and_then(|m| probe_proto::MacAddr::try_from(m.to_string()).ok()),
        ),
        OverlayMode::Ipip => ("projectcalico.org/IPv4IPIPTunnelAddr", None),
        OverlayMode::Geneve | OverlayMode::Wireguard | OverlayMode::None => return None,
    };
    Some(Vtep {
        address: annotation(n, address)?.parse().ok()?,
        mac,
    })
}

/// Reads the facts; `calico_node` is the agent's pod template (for its environment).
#[must_use]
pub fn facts(raw: &Raw, calico_node: Option<&PodSpec>) -> Facts {
    let overlay = encapsulation(raw).map(|mode| {
        let felix = named(&raw.felix_configurations, "default");
        let mtu = Some(mtu(raw, mode));
        if mode == OverlayMode::Vxlan {
            Overlay::Vxlan {
                // 0 (and absent) is Felix's default.
                port: felix
                    .and_then(|f| number(&f["vxlanPort"]))
                    .and_then(|p| u16::try_from(p).ok())
                    .and_then(Port::new)
                    .unwrap_or(VXLAN_PORT),
                vni: felix
                    .and_then(|f| number(&f["vxlanVNI"]))
                    .and_then(|v| u32::try_from(v).ok())
                    .and_then(Vni::new)
                    .unwrap_or(VXLAN_VNI),
                mtu,
            }
        } else {
            // IP in IP is IP protocol 4: no port, no VNI.
            Overlay::Ipip { mtu }
        }
    });
    let bgp = (backend(raw, calico_node) == "bird").then(|| {
        let conf = named(&raw.bgp_configurations, "default");
        Bgp {
            // Absent configuration: Calico's default is the full mesh.
            mesh: conf
                .and_then(|c| c["nodeToNodeMeshEnabled"].as_bool())
                .unwrap_or(true),
            as_number: conf
                .and_then(|c| number(&c["asNumber"]))
                .and_then(|a| u32::try_from(a).ok()),
        }
    });
    let mut typha_nodes: Vec<String> = raw
        .typha_pods
        .iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    typha_nodes.sort();
    typha_nodes.dedup();
    let mut blocks: BTreeMap<String, Vec<Cidr>> = BTreeMap::new();
    for b in &raw.block_affinities {
        let s = &b.data["spec"];
        if s["state"].as_str() != Some("confirmed") || s["deleted"].as_str() == Some("true") {
            continue;
        }
        if let (Some(node), Some(c)) =
            (s["node"].as_str(), s["cidr"].as_str().and_then(cidr::parse))
        {
            blocks.entry(node.to_string()).or_default().push(c);
        }
    }
    let pool_cidrs: Vec<Cidr> = raw
        .ip_pools
        .iter()
        .map(|p| &p.data["spec"])
        .filter(|s| s["disabled"].as_bool() != Some(true))
        .filter_map(|p| p["cidr"].as_str().and_then(cidr::parse))
        .chain(
            installation(raw)
                .and_then(|i| i["calicoNetwork"]["ipPools"].as_array())
                .into_iter()
                .flatten()
                .filter_map(|p| p["cidr"].as_str().and_then(cidr::parse)),
        )
        .collect();
    Facts {
        overlay,
        bgp,
        typha_nodes,
        blocks,
        pool: of_family(&pool_cidrs, Family::Ipv4),
        pool6: of_family(&pool_cidrs, Family::Ipv6),
    }
}

/// The prefix covering the pools of one family.
fn of_family(pools: &[Cidr], f: Family) -> Option<Cidr> {
    let mine: Vec<Cidr> = pools.iter().copied().filter(|c| c.family() == f).collect();
    cidr::covering(&mine)
}
