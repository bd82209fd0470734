//! A healthy cluster of each distribution: the matrix planned from what discovery found, every
//! probe answered, and the diagnosis finds nothing.

use crate::discover::*;
use prober::inventory::Inventory;
use prober::runtime::kube::discover::{build, read};
use serde_json::json;
use test_kit::mock::{discovery_answer, fixture_json, respond, serve, split};

/// `inv` with agents on every node: the host agent at the node's address, the pod agent inside
/// the node's pod range (beside the node on EKS, where pods take addresses of its subnet).
pub(crate) fn with_agents(mut inv: Inventory) -> Inventory {
    use prober::inventory::{Agent, Family};
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let plus = |ip: IpAddr, k: u8| match ip {
        IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from(u32::from(a) + u32::from(k))),
        IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(u128::from(a) + u128::from(k))),
    };
    for n in &mut inv.nodes {
        let agent = |ip: &dyn Fn(Family) -> Option<IpAddr>| Agent {
            exec: vec!["true".into()],
            address: match ip(Family::Ipv4) {
                Some(IpAddr::V4(a)) => a,
                _ => prober::inventory::NO_IPV4,
            },
            address6: match ip(Family::Ipv6) {
                Some(IpAddr::V6(a)) => Some(a),
                _ => None,
            },
            port: probe_proto::Port::new(9917).unwrap(),
        };
        let host = agent(&|f| n.ip(f));
        let pod = agent(&|f| {
            let range = n.pod_ranges().find(|c| c.family() == f);
            match range {
                Some(c) => Some(plus(c.addr, 10)),
                None if n.pod_cidr.is_none() => n.ip(f).map(|a| plus(a, 100)),
                None => None,
            }
        });
        n.agents.host = Some(host);
        n.agents.pod = Some(pod);
    }
    inv
}

/// The findings of a run over `inv` in which every planned probe succeeded.
pub(crate) fn healthy_findings(inv: &Inventory) -> Vec<prober::diagnose::Finding> {
    use probe_proto::{Outcome, ProbeResult};
    use prober::model::ResultRecord;
    let planned = prober::plan::plan(inv, &prober::plan::Filter::default());
    assert!(!planned.is_empty());
    let results: Vec<ResultRecord> = planned
        .iter()
        .map(|p| {
            let mut result = ProbeResult::new(p.id.to_string(), Outcome::Ok, "ok");
            result.rtt_micros = Some(300);
            p.record(None, result)
        })
        .collect();
    let agents = inv.every_agent_ran();
    prober::diagnose::diagnose(inv, &prober::model::Results::of(&results), &agents)
}

#[tokio::test]
async fn a_healthy_cluster_of_each_distribution_gives_no_finding() {
    use prober::model::PathClass;
    for flavour in FLAVOURS {
        let inv = with_agents(discover(flavour).await);
        let findings = healthy_findings(&inv);
        // Expected and informational: the latent bootstrap cycle of a CNI agent that reaches
        // the API server through the kubernetes Service (a warning about the design, true of
        // a healthy cluster) — never naming kube-proxy, which uses its own kubeconfig.
        let latent = |f: &&prober::diagnose::Finding| {
            f.kind() == prober::diagnose::Kind::BootstrapCycle
                && f.severity == prober::diagnose::Severity::Warning
                && f.summary.starts_with("latent bootstrap cycle")
                && !f.summary.contains("kube-proxy")
        };
        let unexpected: Vec<String> = findings
            .iter()
            .filter(|f| !latent(f))
            .map(|f| format!("{:?} {:?}: {}", f.kind(), f.severity, f.summary))
            .collect();
        assert!(
            unexpected.is_empty(),
            "{flavour}: a healthy cluster gave findings:\n{}",
            unexpected.join("\n")
        );
        // Where the overlay has a crafted probe, every node's tunnel was probed.
        if inv
            .cluster
            .overlay
            .as_ref()
            .is_some_and(|o| o.mode() != prober::inventory::OverlayMode::None)
        {
            let planned = prober::plan::plan(&inv, &prober::plan::Filter::default());
            for n in &inv.nodes {
                assert!(
                    planned.iter().any(|p| p.path == PathClass::Overlay
                        && p.to.node.as_deref() == Some(n.name.as_str())
                        && p.to.service.as_deref() == Some("vtep")),
                    "{flavour}: the overlay to {} is not probed",
                    n.name
                );
            }
        }
    }
}

#[tokio::test]
async fn an_overlay_without_tunnel_endpoints_is_said_not_probed() {
    use prober::diagnose::{Kind, Severity};
    // Cilium VXLAN whose CiliumNodes list no CiliumInternalIP and whose nodes carry no
    // cilium-host annotation: nothing to aim the crafted packets at.
    let mut inv = with_agents(discover("cilium-vxlan").await);
    for n in &mut inv.nodes {
        n.vtep = None;
    }
    let findings = healthy_findings(&inv);
    let f = findings
        .iter()
        .find(|f| f.kind() == Kind::Overlay)
        .unwrap_or_else(|| panic!("no overlay notice in {findings:#?}"));
    assert_eq!(f.severity, Severity::Warning);
    assert!(
        f.summary
            .starts_with("overlay not probed on cp1, w1, w2: no tunnel endpoint known"),
        "{}",
        f.summary
    );
    assert_eq!(f.facts().nodes(), ["cp1", "w1", "w2"]);
}

#[tokio::test]
async fn cilium_tunnel_endpoints_come_from_the_node_annotation_too() {
    // No CiliumNode address: the annotation the agent writes on the Node.
    let (client, server) = serve(Box::new(|s| {
        let (path, _) = split(&s.uri);
        match path.as_str() {
            "/apis/cilium.io/v2/ciliumnodes" => {
                let mut cn = fixture_json("cilium-vxlan", "ciliumnodes.json");
                for i in cn["items"].as_array_mut().unwrap() {
                    i["spec"]["addresses"] = json!([]);
                }
                respond(200, &cn)
            }
            "/api/v1/nodes" => {
                let mut nodes = fixture_json("cilium-vxlan", "nodes.json");
                for (i, n) in nodes["items"]
                    .as_array_mut()
                    .unwrap()
                    .iter_mut()
                    .enumerate()
                {
                    n["metadata"]["annotations"]["network.cilium.io/ipv4-cilium-host"] =
                        json!(format!("10.0.{i}.99"));
                }
                respond(200, &nodes)
            }
            _ => discovery_answer("cilium-vxlan", s),
        }
    }));
    let raw = read(&client).await.unwrap();
    let inv = build(&raw).unwrap();
    drop(client);
    server.await.unwrap();
    let vteps: Vec<String> = inv
        .nodes
        .iter()
        .map(|n| n.vtep.as_ref().unwrap().address.to_string())
        .collect();
    assert_eq!(vteps, ["10.0.0.99", "10.0.1.99", "10.0.2.99"]);
}

#[tokio::test]
async fn a_calico_node_keeps_every_ipam_block() {
    // w1 owns a second block: a DNS pod in it is still placed on w1.
    let (client, server) = serve(Box::new(|s| {
        let (path, _) = split(&s.uri);
        if path == "/apis/crd.projectcalico.org/v1/blockaffinities" {
            let mut b = fixture_json("calico-vxlan", "blockaffinities.json");
            let items = b["items"].as_array_mut().unwrap();
            let mut second = items
                .iter()
                .find(|i| i["spec"]["node"] == "w1")
                .unwrap()
                .clone();
            second["metadata"]["name"] = json!("w1-10-244-77-0-26");
            second["spec"]["cidr"] = json!("10.244.77.0/26");
            items.push(second);
            return respond(200, &b);
        }
        discovery_answer("calico-vxlan", s)
    }));
    let raw = read(&client).await.unwrap();
    let inv = build(&raw).unwrap();
    drop(client);
    server.await.unwrap();
    let w1 = inv.nodes.iter().find(|n| n.name == "w1").unwrap();
    let ranges: Vec<String> = w1.pod_ranges().map(|c| c.to_string()).collect();
    assert_eq!(ranges, ["10.244.33.192/26", "10.244.77.0/26"]);
    assert!(w1.holds_pod_ip("10.244.77.5".parse::<std::net::Ipv4Addr>().unwrap()));
    // It round-trips through the inventory file.
    let back: Inventory = serde_saphyr::from_str(&inv.to_yaml()).unwrap();
    assert_eq!(back, inv);
    let cp1 = inv.nodes.iter().find(|n| n.name == "cp1").unwrap();
    assert!(cp1.pod_cidrs.is_empty(), "one block: podCIDR alone");
}
