//! Loading an inventory and the rules across its fields that the types cannot say: each refusal
//! names the field and what it must be.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::PathBuf;

use super::{Cidr, Component, Inventory, Overlay, YamlError, from_yaml};

#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    #[error("inventory: {0}")]
    Read(#[source] probe_proto::files::ReadError),
    #[error("inventory {}: {source}", path.display())]
    Parse { path: PathBuf, source: YamlError },
    #[error("inventory {}: {source}", path.display())]
    Invalid {
        path: PathBuf,
        source: InvalidInventory,
    },
}

/// A rule across fields that the inventory breaks: the field path and what it must be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidInventory {
    #[error("nodes: the inventory lists no node")]
    NoNodes,
    #[error("nodes[{index}].name: must not be empty")]
    EmptyName { index: usize },
    #[error("nodes[{index}].name: duplicate node name {name:?}")]
    DuplicateName { index: usize, name: String },
    #[error("nodes[{index}].agents.{agent}.exec: must name a command prefix")]
    NoExec { index: usize, agent: &'static str },
    /// A value the agents would refuse, or the planner would change or drop without a word.
    #[error("{field}: {message}")]
    Field { field: String, message: String },
}

/// The longest DNS label (a namespace, a container name).
pub const MAX_DNS_LABEL: usize = 63;
/// The longest DNS subdomain (a Kubernetes object name).
const MAX_DNS_SUBDOMAIN: usize = 253;

fn bad(field: impl Into<String>, message: impl Into<String>) -> InvalidInventory {
    InvalidInventory::Field {
        field: field.into(),
        message: message.into(),
    }
}

/// A DNS-1123 label (`max` 63) or subdomain (`max` 253): lowercase letters, digits, '-' (and
/// '.' between labels of a subdomain), starting and ending with a letter or digit.
fn dns_name(value: &str, max: usize) -> bool {
    let label = |l: &str| {
        !l.is_empty()
            && l.len() <= MAX_DNS_LABEL
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    !value.is_empty()
        && value.len() <= max
        && if max > MAX_DNS_LABEL {
            value.split('.').all(label)
        } else {
            label(value)
        }
}

/// A component's names go into the fix commands the report prints: each must be what
/// Kubernetes allows, so none can change the command. Returns the key and the value refused.
pub fn check_component(c: &Component) -> Result<(), (String, String)> {
    let refuse = |key: &str, value: &str| Err((key.to_string(), value.to_string()));
    if !dns_name(&c.name, MAX_DNS_SUBDOMAIN) {
        return refuse("name", &c.name);
    }
    if !dns_name(&c.namespace, MAX_DNS_LABEL) {
        return refuse("namespace", &c.namespace);
    }
    if !dns_name(c.role.as_str(), MAX_DNS_LABEL) {
        return refuse("role", c.role.as_str());
    }
    let kind_ok = !c.kind.is_empty()
        && c.kind.len() <= MAX_DNS_LABEL
        && c.kind.bytes().all(|b| b.is_ascii_alphanumeric());
    if !kind_ok {
        return refuse("kind", &c.kind);
    }
    for (i, n) in c.containers.iter().enumerate() {
        if !dns_name(n, MAX_DNS_LABEL) {
            return refuse(&format!("containers[{i}]"), n);
        }
    }
    Ok(())
}

/// An address the agents would refuse as a target.
fn target(field: &str, ip: std::net::IpAddr) -> Result<(), InvalidInventory> {
    match probe_proto::unusable_target(ip) {
        Some(why) => Err(bad(field, format!("{ip} {why}"))),
        None => Ok(()),
    }
}

/// An address and port the agents would refuse as a target.
fn endpoint(field: &str, addr: SocketAddr) -> Result<(), InvalidInventory> {
    target(field, addr.ip())?;
    if addr.port() == 0 {
        return Err(bad(field, format!("{addr}: port 0 is not a port")));
    }
    Ok(())
}

/// An `address` and `address6` pair (a node's, an agent's): at least one, each a usable target.
fn addresses(
    at: &str,
    what: &str,
    v4: Option<std::net::Ipv4Addr>,
    v6: Option<std::net::Ipv6Addr>,
) -> Result<(), InvalidInventory> {
    if v4.is_none() && v6.is_none() {
        return Err(bad(
            format!("{at}.address"),
            format!(
                "the {what} has no address: give an IPv4 `address`, an IPv6 `address6` or both"
            ),
        ));
    }
    if let Some(a) = v4 {
        own(&format!("{at}.address"), a.into())?;
    }
    if let Some(a) = v6 {
        own(&format!("{at}.address6"), a.into())?;
    }
    Ok(())
}

/// A node's or an agent's own address: a usable target that other nodes reach it at, in the
/// family of its field.
fn own(field: &str, ip: std::net::IpAddr) -> Result<(), InvalidInventory> {
    use std::net::IpAddr;
    target(field, ip)?;
    let why = match ip {
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() => Some(
            "is an IPv4-mapped address: it is IPv4 (give it as `address`), and this node's IPv6 \
             would never be probed",
        ),
        ip if ip.is_loopback() => {
            Some("is a loopback address: every agent reaches itself there, never this node")
        }
        IpAddr::V6(v6) if v6.is_unicast_link_local() => Some(
            "is link-local: reaching it needs a zone (the interface), which an inventory \
             address cannot carry",
        ),
        _ => None,
    };
    match why {
        Some(why) => Err(bad(field, format!("{ip} {why}"))),
        None => Ok(()),
    }
}

/// A list of a Service's `ClusterIP`s (`services`), whose first, if any, is `service`: one
/// address per family, the same port.
fn cluster_ips(at: &str, service: SocketAddr, all: &[SocketAddr]) -> Result<(), InvalidInventory> {
    if let Some(first) = all.first()
        && *first != service
    {
        return Err(bad(
            format!("{at}.services[0]"),
            format!("{first} must be `service` ({service}), the primary family's ClusterIP"),
        ));
    }
    for (i, s) in all.iter().enumerate() {
        endpoint(&format!("{at}.services[{i}]"), *s)?;
        if all[..i].iter().any(|o| o.is_ipv4() == s.is_ipv4()) {
            return Err(bad(
                format!("{at}.services[{i}]"),
                format!("{s}: a Service has one ClusterIP per IP family"),
            ));
        }
    }
    Ok(())
}

/// `podCIDRs` or `serviceCIDRs` of the cluster: `first` first, at most one range per family
/// (what kube-controller-manager and kube-apiserver accept).
fn ranges(at: &str, first: Cidr, all: &[Cidr]) -> Result<(), InvalidInventory> {
    if let Some(c) = all.first()
        && *c != first
    {
        return Err(bad(
            format!("{at}[0]"),
            format!("{c} must be the primary range ({first}), as Kubernetes lists them"),
        ));
    }
    for (i, c) in all.iter().enumerate() {
        if all[..i].iter().any(|o| o.family() == c.family()) {
            return Err(bad(
                format!("{at}[{i}]"),
                format!("{c}: a second {} range (one per IP family)", c.family()),
            ));
        }
    }
    Ok(())
}

impl Inventory {
    /// Reads YAML (or JSON, which is YAML) and checks what the types cannot.
    pub fn load(path: &std::path::Path) -> Result<Self, InventoryError> {
        use crate::model::read::MAX_INVENTORY_BYTES;
        let text = probe_proto::files::read_text_capped(
            path,
            MAX_INVENTORY_BYTES,
            "inventory",
            path.display(),
        )
        .map_err(InventoryError::Read)?;
        let inv: Self = from_yaml(&text).map_err(|source| InventoryError::Parse {
            path: path.into(),
            source,
        })?;
        inv.validate().map_err(|source| InventoryError::Invalid {
            path: path.into(),
            source,
        })?;
        Ok(inv)
    }

    /// Checks cross-field rules; the error names the offending field.
    pub fn validate(&self) -> Result<(), InvalidInventory> {
        let mut names = HashSet::new();
        let mut seen: std::collections::HashMap<std::net::IpAddr, usize> =
            std::collections::HashMap::new();
        for (index, n) in self.nodes.iter().enumerate() {
            if n.name.is_empty() {
                return Err(InvalidInventory::EmptyName { index });
            }
            if !dns_name(&n.name, probe_proto::MAX_NODE_NAME_BYTES) {
                return Err(bad(
                    format!("nodes[{index}].name"),
                    format!(
                        "{:?} is not a Kubernetes node name (a DNS subdomain of at most {} characters: a-z, 0-9, '-' and '.')",
                        n.name,
                        probe_proto::MAX_NODE_NAME_BYTES
                    ),
                ));
            }
            if !names.insert(n.name.as_str()) {
                return Err(InvalidInventory::DuplicateName {
                    index,
                    name: n.name.clone(),
                });
            }
            addresses(&format!("nodes[{index}]"), "node", n.ipv4(), n.address6)?;
            // Two nodes at one address: every path to one reaches the other (or neither).
            let ips = [
                ("address", n.ipv4().map(std::net::IpAddr::from)),
                ("address6", n.address6.map(std::net::IpAddr::from)),
            ];
            for (key, ip) in ips {
                let Some(ip) = ip else { continue };
                if let Some(other) = seen.insert(ip, index) {
                    return Err(bad(
                        format!("nodes[{index}].{key}"),
                        format!("{ip} is also nodes[{other}]'s address"),
                    ));
                }
            }
            if let Some(v) = &n.vtep {
                target(&format!("nodes[{index}].vtep.address"), v.address.into())?;
            }
            if let Some(v) = &n.vtep6 {
                target(&format!("nodes[{index}].vtep6.address"), v.address.into())?;
            }
            for (agent, a) in [("host", &n.agents.host), ("pod", &n.agents.pod)] {
                let Some(a) = a else { continue };
                if a.exec.is_empty() {
                    return Err(InvalidInventory::NoExec { index, agent });
                }
                let at = format!("nodes[{index}].agents.{agent}");
                addresses(&at, "agent", a.ipv4(), a.address6)?;
            }
        }
        if self.nodes.is_empty() {
            return Err(InvalidInventory::NoNodes);
        }
        self.validate_cluster()?;
        for (i, c) in self.components.iter().enumerate() {
            check_component(c).map_err(|(key, value)| {
                bad(
                    format!("components[{i}].{key}"),
                    format!("{value:?} is not a Kubernetes name (a-z, 0-9, '-')"),
                )
            })?;
        }
        Ok(())
    }

    /// The cluster's services, DNS names and overlay, against what the agents accept.
    fn validate_cluster(&self) -> Result<(), InvalidInventory> {
        let c = &self.cluster;
        ranges("cluster.podCIDRs", c.pod_cidr, &c.pod_cidrs)?;
        ranges("cluster.serviceCIDRs", c.service_cidr, &c.service_cidrs)?;
        endpoint("cluster.api.service", c.api.service)?;
        cluster_ips("cluster.api", c.api.service, &c.api.services)?;
        for (i, e) in c.api.endpoints.iter().enumerate() {
            endpoint(&format!("cluster.api.endpoints[{i}]"), *e)?;
        }
        if let Some(dns) = &c.dns {
            endpoint("cluster.dns.service", dns.service)?;
            cluster_ips("cluster.dns", dns.service, &dns.services)?;
            for (i, e) in dns.endpoints.iter().enumerate() {
                endpoint(&format!("cluster.dns.endpoints[{i}]"), *e)?;
            }
            for (i, name) in dns.names.iter().enumerate() {
                let ok = !name.is_empty()
                    && name.len() <= probe_proto::MAX_DNS_NAME_BYTES
                    && name.bytes().all(|b| b.is_ascii_graphic());
                if !ok {
                    return Err(bad(
                        format!("cluster.dns.names[{i}]"),
                        format!(
                            "not a DNS name of 1-{} printable characters",
                            probe_proto::MAX_DNS_NAME_BYTES
                        ),
                    ));
                }
            }
        }
        if let Some(mtu) = c.overlay.as_ref().and_then(Overlay::mtu)
            && mtu < probe_proto::MIN_MTU_PROBE_BYTES
        {
            return Err(bad(
                "cluster.overlay.mtu",
                format!(
                    "{mtu} is smaller than an IPv4 and ICMP header ({} bytes)",
                    probe_proto::MIN_MTU_PROBE_BYTES
                ),
            ));
        }
        Ok(())
    }
}
