//! The lab's layout, commands, processes, host files and inventory for small scenarios.

use std::path::Path;

use super::hostfiles::HOUR;
use super::*;
use crate::inventory::Overlay;
use crate::lab::pki;
use crate::lab::scenario::Scenario;

fn lab(yaml: &str) -> (Layout, Vec<NsSetup>) {
    let s = Scenario::parse(yaml).unwrap();
    let l = layout(&s, "plab-t-", Path::new("/run/prober-lab/plab-t-"));
    let st = setups(&s, &l);
    (l, st)
}

fn ns<'a>(st: &'a [NsSetup], name: &str) -> &'a NsSetup {
    st.iter()
        .find(|s| s.ns == name)
        .unwrap_or_else(|| panic!("no namespace {name}"))
}

/// The host files of a lab, its tokens issued at a fixed time.
fn test_host_files(s: &Scenario, l: &Layout) -> HostFiles {
    let tokens = Tokens {
        now: 100_000,
        key: b"k".to_vec(),
    };
    host_files(s, l, "CA", &tokens)
}

/// Asserts that the process `what` is given `arg`.
fn argv_has(procs: &[Process], what: &str, arg: &str) {
    let p = procs.iter().find(|p| p.what == what).unwrap();
    assert!(p.argv.iter().any(|a| a == arg), "{what}: {:?}", p.argv);
}

/// Asserts that `st`'s configuration holds every one of `lines`.
fn has_lines(st: &NsSetup, lines: &[&str]) {
    for line in lines {
        assert!(
            st.config.contains(&(*line).to_string()),
            "{} lacks {line:?}: {:#?}",
            st.ns,
            st.config
        );
    }
}

#[test]
fn three_nodes_like_flanneld_programs_them() {
    let (l, st) = lab("{}");
    assert_eq!(
        l.namespaces(),
        [
            "plab-t-rt",
            "plab-t-sw0",
            "plab-t-n1",
            "plab-t-n1p0",
            "plab-t-n2",
            "plab-t-n2p0",
            "plab-t-n3",
            "plab-t-n3p0",
            "plab-t-n1dns"
        ]
    );
    assert_eq!(l.nodes[0].address, Ipv4Addr::new(192, 168, 56, 10));
    assert!(l.nodes[0].control_plane && !l.nodes[1].control_plane);
    let n1 = ns(&st, "plab-t-n1");
    has_lines(
        n1,
        &[
            "addr add 192.168.56.10/24 dev eth0",
            "link add flannel.1 address 02:00:0a:f4:01:00 type vxlan id 1 local 192.168.56.10 dev eth0 dstport 8472 nolearning",
            "addr add 10.244.1.0/32 dev flannel.1",
            "addr add 10.244.1.1/24 dev cni0",
            "route add 10.244.2.0/24 via 10.244.2.0 dev flannel.1 onlink",
            "neigh add 10.244.3.0 lladdr 02:00:0a:f4:03:00 dev flannel.1 nud permanent",
        ],
    );
    assert_eq!(
        n1.fdb,
        [
            "fdb append 02:00:0a:f4:02:00 dev flannel.1 dst 192.168.56.11",
            "fdb append 02:00:0a:f4:03:00 dev flannel.1 dst 192.168.56.12"
        ]
    );
    assert_eq!(
        n1.links,
        [
            "link add veth0 type veth peer name eth0 netns plab-t-n1p0",
            "link add vethdns type veth peer name eth0 netns plab-t-n1dns"
        ]
    );
    assert!(
        n1.nft
            .contains("ip daddr 10.96.0.1 tcp dport 443 dnat to 192.168.56.10:6443"),
        "{}",
        n1.nft
    );
    assert!(
        n1.nft
            .contains("ip daddr 10.96.0.10 udp dport 53 dnat to 10.244.1.53:53")
    );
    let pod = ns(&st, "plab-t-n2p0");
    assert_eq!(
        pod.config,
        [
            "link set eth0 mtu 1450 up",
            "addr add 10.244.2.2/24 dev eth0",
            "route add default via 10.244.2.1"
        ]
    );
    let sw = ns(&st, "plab-t-sw0");
    assert!(
        sw.links
            .contains(&"link add n3 type veth peer name eth0 netns plab-t-n3".to_string())
    );
    let rt = &ns(&st, "plab-t-rt").nft;
    assert!(
        sw.nft.is_empty() && !rt.contains("prober-fault"),
        "healthy: no fault rules"
    );
    assert!(
        rt.contains("ip daddr 10.96.0.0/12 drop"),
        "untranslated Service IPs vanish: {rt}"
    );
}

#[test]
fn firewall_across_zones_sits_on_the_router() {
    let (_, st) = lab(
        "zones: [{name: a, nodes: [n1, n2]}, {name: b, nodes: [n3]}]\n\
         faults: [{kind: firewall, action: drop, protocol: udp, port: 8472, from: [n3], direction: both}]",
    );
    let rt = &ns(&st, "plab-t-rt").nft;
    for rule in [
        "ip saddr 192.168.57.12 ip daddr 192.168.56.10 udp dport 8472 drop",
        "ip saddr 192.168.56.10 ip daddr 192.168.57.12 udp dport 8472 drop",
        "ip saddr 192.168.57.12 ip daddr 192.168.56.11 udp dport 8472 drop",
        "ip saddr 192.168.56.11 ip daddr 192.168.57.12 udp dport 8472 drop",
    ] {
        assert!(rt.contains(rule), "router lacks {rule}:\n{rt}");
    }
    assert_eq!(
        rt.matches("udp dport 8472 drop").count(),
        4,
        "n1<->n2 untouched:\n{rt}"
    );
    assert!(
        ns(&st, "plab-t-n3")
            .config
            .contains(&"route add default via 192.168.57.1".to_string())
    );
}

#[test]
fn same_zone_network_reject_sits_on_the_switch_port() {
    let (_, st) = lab(
        "faults: [{kind: firewall, action: reject, protocol: tcp, port: 6443, from: [n2], to: [n1]}]",
    );
    let sw = &ns(&st, "plab-t-sw0").nft;
    assert!(sw.contains("hook ingress device \"n2\""), "{sw}");
    assert!(sw.contains("ip saddr 192.168.56.11 ip daddr 192.168.56.10 tcp dport 6443 reject with icmp type admin-prohibited"), "{sw}");
    assert!(!ns(&st, "plab-t-rt").nft.contains("prober-fault"));
}

#[test]
fn host_faults_go_to_the_receivers_input_chain() {
    let (_, st) = lab(
        "faults: [{kind: firewall, action: drop, protocol: udp, port: 8472, to: [n2], place: host}]",
    );
    let n2 = &ns(&st, "plab-t-n2").nft;
    assert!(n2.contains("hook input"), "{n2}");
    assert!(
        n2.contains("ip saddr 192.168.56.10 udp dport 8472 drop")
            && n2.contains("ip saddr 192.168.56.12 udp dport 8472 drop"),
        "{n2}"
    );
    assert!(!ns(&st, "plab-t-n1").nft.contains("hook input"));
}

#[test]
fn other_faults() {
    let (_, st) = lab(
        "faults: [{kind: kube-proxy-missing, node: n2}, {kind: mtu, node: n3, mtu: 1400}, {kind: loss, node: n1, percent: 30}]",
    );
    assert!(
        !ns(&st, "plab-t-n2").nft.contains("dnat"),
        "no Service rules on n2"
    );
    assert!(ns(&st, "plab-t-n3").nft.contains("dnat"));
    let sw = ns(&st, "plab-t-sw0");
    assert!(sw.config.contains(&"link set n3 mtu 1400".to_string()));
    assert!(
        sw.nft
            .contains("iifname \"n1\" ether type ip numgen random mod 100 < 30 drop")
            && sw.nft.contains("oifname \"n1\"")
    );
}

#[test]
fn twenty_nodes_fit() {
    let (l, st) = lab("nodes: 20\ncontrolPlanes: 3");
    assert_eq!(l.nodes[19].address, Ipv4Addr::new(192, 168, 56, 29));
    assert_eq!(l.api_endpoints().len(), 3);
    let n5 = ns(&st, "plab-t-n5");
    assert_eq!(n5.fdb.len(), 19);
    assert!(n5.nft.contains("numgen random mod 3 map { 0 : 192.168.56.10, 1 : 192.168.56.11, 2 : 192.168.56.12 } : 6443"), "{}", n5.nft);
}

#[test]
fn processes_of_a_lab() {
    let s = Scenario::parse("faults: [{kind: dns-loop}]").unwrap();
    let l = layout(&s, "plab-t-", Path::new("/state"));
    let procs = processes(
        &s,
        &l,
        Path::new("/bin/probe-pod"),
        Path::new("/bin/prober"),
    );
    let what: Vec<&str> = procs.iter().map(|p| p.what).collect();
    assert_eq!(what.iter().filter(|w| **w == "host-agent").count(), 3);
    assert_eq!(what.iter().filter(|w| **w == "pod-agent").count(), 3);
    assert_eq!(what.iter().filter(|w| **w == "apiserver").count(), 1);
    let dns = procs.iter().find(|p| p.what == "cluster-dns").unwrap();
    assert!(
        dns.argv.contains(&"--server=10.96.0.10".to_string()),
        "the loop: it forwards to itself"
    );
    assert!(
        dns.argv
            .contains(&"--listen-address=10.244.1.53".to_string())
    );
    let healthy = processes(&Scenario::default(), &l, Path::new("a"), Path::new("b"));
    let dns = healthy.iter().find(|p| p.what == "cluster-dns").unwrap();
    assert!(dns.argv.contains(&"--server=192.168.56.1".to_string()));
}

#[test]
fn host_files_carry_the_node_faults() {
    let s = Scenario::parse(
        "faults: [{kind: cni-token-expired, node: n2}, {kind: cni-token-stale, node: n3}, {kind: kubelet-localhost, node: n3}, {kind: dns-loop}]",
    )
    .unwrap();
    let l = layout(&s, "plab-t-", Path::new("/state"));
    let hf = host_files(
        &s,
        &l,
        "CA",
        &Tokens {
            now: 100_000,
            key: b"k".to_vec(),
        },
    );
    let file = |p: &str| {
        hf.files
            .iter()
            .find(|(f, _)| f == Path::new(p))
            .map_or_else(|| panic!("no {p}"), |(_, t)| t.clone())
    };
    assert!(
        file("/state/nodes/n1/etc/kubernetes/kubelet.conf")
            .contains("server: https://192.168.56.10:6443")
    );
    assert!(
        file("/state/nodes/n3/etc/kubernetes/kubelet.conf")
            .contains("server: https://localhost:6443")
    );
    assert!(file("/state/nodes/n1/etc/resolv.conf").contains("127.0.0.53"));
    assert!(file("/state/nodes/n1/etc/cni/net.d/10-flannel.conflist").contains("flannel"));
    let expired = file("/state/nodes/n2/etc/cni/net.d/calico-kubeconfig");
    let jwt = expired
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .unwrap();
    assert_eq!(pki::expiry(jwt), Some(100_000 - HOUR));
    assert!(
        file("/state/nodes/n3/etc/cni/net.d/calico-kubeconfig")
            .contains("server: https://10.96.0.1:443")
    );
    assert_eq!(
        hf.allowed_tokens.len(),
        2,
        "the stand-in knows both tokens; it rejects the expired one by its exp"
    );
}

#[test]
fn inventory_describes_the_lab() {
    let s =
        Scenario::parse("zones: [{name: a, nodes: [n1, n2]}, {name: dmz, nodes: [n3]}]").unwrap();
    let l = layout(&s, "plab-t-", Path::new("/state"));
    let inv = inventory(&s, &l);
    inv.validate().unwrap();
    assert_eq!(inv.nodes[2].zone.as_deref(), Some("dmz"));
    assert_eq!(
        inv.nodes[0].agents.host.as_ref().unwrap().exec,
        ["ip", "netns", "exec", "plab-t-n1"]
    );
    assert_eq!(
        inv.nodes[1].agents.pod.as_ref().unwrap().address,
        Ipv4Addr::new(10, 244, 2, 2)
    );
    assert_eq!(
        inv.cluster.api.endpoints,
        ["192.168.56.10:6443".parse().unwrap()]
    );
    let yaml = inv.to_yaml();
    let back: crate::inventory::Inventory = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(back, inv, "{yaml}");
}

#[test]
fn calico_vxlan_uses_its_port_vni_and_device() {
    let (_, st) = lab("{cni: calico, overlay: {mode: vxlan, port: 4789}}");
    let n1 = ns(&st, "plab-t-n1");
    for line in [
        "link add vxlan.calico address 02:00:0a:f4:01:00 type vxlan id 4096 local 192.168.56.10 dev eth0 dstport 4789 nolearning",
        "route add 10.244.2.0/24 via 10.244.2.0 dev vxlan.calico onlink",
    ] {
        assert!(
            n1.config.contains(&line.to_string()),
            "n1 lacks {line:?}: {:#?}",
            n1.config
        );
    }
    let s = Scenario::parse("{cni: calico, overlay: {mode: vxlan, port: 4789}}").unwrap();
    let l = layout(&s, "plab-t-", Path::new("/state"));
    let ov = inventory(&s, &l).cluster.overlay.unwrap();
    assert_eq!(
        ov,
        Overlay::Vxlan {
            port: probe_proto::Port::new(4789).unwrap(),
            vni: probe_proto::Vni::new(4096).unwrap(),
            mtu: Some(OVERLAY_MTU)
        }
    );
}

#[test]
fn ipip_and_geneve_are_a_tun_device_and_a_tunnel_process() {
    let yaml = "{cni: calico, overlay: {mode: ipip}, zones: [{name: a, nodes: [n1, n2]}, {name: b, nodes: [n3]}], \
                faults: [{kind: firewall, action: drop, protocol: ipip, from: [n3], direction: both}]}";
    let (_, st) = lab(yaml);
    let n1 = ns(&st, "plab-t-n1");
    for line in [
        "tuntap add dev tunl0 mode tun",
        "addr add 10.244.1.0/32 dev tunl0",
        "route add 10.244.3.0/24 dev tunl0",
    ] {
        assert!(
            n1.config.contains(&line.to_string()),
            "n1 lacks {line:?}: {:#?}",
            n1.config
        );
    }
    assert!(n1.fdb.is_empty() && !n1.config.iter().any(|l| l.contains("vxlan")));
    let rt = &ns(&st, "plab-t-rt").nft;
    assert!(
        rt.contains("ip saddr 192.168.57.12 ip daddr 192.168.56.10 ip protocol 4 drop"),
        "{rt}"
    );
    assert_eq!(rt.matches("ip protocol 4 drop").count(), 4, "{rt}");
    let s = Scenario::parse(yaml).unwrap();
    let l = layout(&s, "plab-t-", Path::new("/state"));
    let ov = inventory(&s, &l).cluster.overlay.unwrap();
    assert_eq!(
        ov,
        Overlay::Ipip {
            mtu: Some(OVERLAY_MTU)
        }
    );
    let procs = processes(
        &s,
        &l,
        Path::new("/bin/probe-pod"),
        Path::new("/bin/prober"),
    );
    let t1 = procs
        .iter()
        .find(|p| p.what == "tunnel" && p.ns == "plab-t-n1")
        .unwrap();
    assert_eq!(
        t1.argv[1..],
        [
            "tunnel",
            "--device",
            "tunl0",
            "--mode",
            "ipip",
            "--vni",
            "0",
            "--port",
            "0",
            "--peer",
            "10.244.2.0/24=192.168.56.11,10.244.3.0/24=192.168.57.12"
        ]
    );
    let host = procs
        .iter()
        .find(|p| p.what == "host-agent" && p.ns == "plab-t-n1")
        .unwrap();
    assert!(host.argv.ends_with(&["--sniff".into(), "always".into()]));
    // Geneve: the same, on UDP 6081.
    let s = Scenario::parse("{cni: cilium, overlay: {mode: geneve}}").unwrap();
    assert_eq!(s.overlay().port().map(probe_proto::Port::get), Some(6081));
    let l = layout(&s, "plab-t-", Path::new("/state"));
    let procs = processes(
        &s,
        &l,
        Path::new("/bin/probe-pod"),
        Path::new("/bin/prober"),
    );
    assert_eq!(procs.iter().filter(|p| p.what == "tunnel").count(), 3);
    assert!(
        Scenario::parse(
            "faults: [{kind: firewall, action: drop, protocol: ipip, port: 4, from: [n1]}]"
        )
        .is_err()
    );
}

#[test]
fn faults_aimed_at_the_candidate_land_on_its_host_link_and_root() {
    let yaml = "candidate: {name: new}\nfaults: [{kind: firewall, action: drop, protocol: tcp, port: 10250, to: [new], place: host}, {kind: mtu, node: new, mtu: 1400}, {kind: loss, node: new, percent: 20}, {kind: kubelet-localhost, node: new}, {kind: cni-token-expired, node: new}]";
    let (l, st) = lab(yaml);
    let new = &ns(&st, "plab-t-new").nft;
    assert!(new.contains("hook input"), "{new}");
    assert!(
        new.contains("ip saddr 192.168.56.10 tcp dport 10250 drop")
            && new.contains("ip saddr 192.168.56.12 tcp dport 10250 drop"),
        "{new}"
    );
    assert!(!ns(&st, "plab-t-n1").nft.contains("hook input"));
    let sw = ns(&st, "plab-t-sw0");
    assert!(
        sw.config.contains(&"link set n240 mtu 1400".to_string()),
        "{:?}",
        sw.config
    );
    assert!(
        sw.nft
            .contains("iifname \"n240\" ether type ip numgen random mod 100 < 20 drop"),
        "{}",
        sw.nft
    );
    let s = Scenario::parse(yaml).unwrap();
    let hf = host_files(
        &s,
        &l,
        "CA",
        &Tokens {
            now: 100_000,
            key: b"k".to_vec(),
        },
    );
    let file = |p: &str| {
        hf.files
            .iter()
            .find(|(f, _)| f == Path::new(p))
            .map_or_else(|| panic!("no {p}"), |(_, t)| t.clone())
    };
    let root = "/run/prober-lab/plab-t-/nodes/new/etc";
    assert!(
        file(&format!("{root}/kubernetes/kubelet.conf")).contains("server: https://localhost:6443")
    );
    let kc = file(&format!("{root}/cni/net.d/calico-kubeconfig"));
    let jwt = kc
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .unwrap();
    assert_eq!(pki::expiry(jwt), Some(100_000 - HOUR));
    assert!(file(&format!("{root}/resolv.conf")).contains("nameserver"));
    assert!(
        hf.allowed_tokens.is_empty(),
        "the candidate's leftover token is no credential of this cluster"
    );
}

#[test]
fn a_policy_drops_on_its_nodes_pod_agents_only_and_enters_the_inventory() {
    let yaml = "
nodes: 3
faults:
  - kind: policy
    object:
      apiVersion: projectcalico.org/v3
      kind: GlobalNetworkPolicy
      metadata: {name: deny-agent-port}
      spec: {order: 100, selector: all(), ingress: [{action: Deny, protocol: TCP, destination: {ports: [9917]}}]}
    drop:
      - {protocol: tcp, port: 9917, nodes: [n2]}
      - {direction: egress, protocol: icmp, nodes: [n2], peers: pods}
";
    let (l, st) = lab(yaml);
    let pod = &ns(&st, "plab-t-n2p0").nft;
    assert!(
        pod.contains("hook input")
            && pod.contains(
                "ct state new iifname != \"lo\" ip saddr != { 10.244.2.1, 192.168.56.11 } tcp dport 9917 drop"
            ),
        "{pod}"
    );
    assert!(
        pod.contains("hook output")
            && pod.contains("ct state new oifname != \"lo\" ip daddr { 10.244.1.2, 10.244.2.2, 10.244.3.2, 10.244.1.53 } meta l4proto icmp drop"),
        "{pod}"
    );
    // Not on the other nodes' pods, nor on any host.
    for other in ["plab-t-n1p0", "plab-t-n3p0", "plab-t-n2", "plab-t-n1"] {
        assert!(!ns(&st, other).nft.contains("9917"), "{other}");
    }
    let s = Scenario::parse(yaml).unwrap();
    let inv = inventory(&s, &l);
    assert_eq!(inv.cluster.policies.len(), 1);
    assert_eq!(inv.cluster.policies[0].metadata.name, "deny-agent-port");
    assert!(Scenario::parse(&yaml.replace("nodes: [n2]}", "nodes: [n9]}")).is_err());
}

/// A dual-stack lab: IPv6 on (never disabled), `nodad` addresses of both families on links and
/// pods, forwarding for both, the pods' IPv6 routed over the VXLAN device, kube-proxy's DNAT in
/// an `ip6` table, servers on `::`, and an inventory of both families that plans IPv6 paths.
#[test]
fn a_dual_stack_lab_has_both_families_everywhere() {
    let yaml = "ipFamilies: [ipv4, ipv6]\nfaults:\n  - {kind: firewall, action: reject, protocol: tcp, port: 10250, from: [n3], to: [n1], place: host, family: ipv6}\n";
    let (l, st) = lab(yaml);
    let has = |v: &[String], want: &str| v.iter().any(|c| c == want);
    let sysctl = |s: &NsSetup, k: &str| {
        s.sysctl
            .iter()
            .find(|(kk, _)| kk == k)
            .map(|(_, v)| v.clone())
    };
    let rt = ns(&st, "plab-t-rt");
    assert!(
        has(&rt.config, "addr add fd00:56::1/64 dev z0 nodad"),
        "{:?}",
        rt.config
    );
    assert_eq!(
        sysctl(rt, "net.ipv6.conf.all.forwarding").as_deref(),
        Some("1")
    );
    assert!(
        rt.nft.contains("ip6 daddr fd00:10:96::/112 drop"),
        "{}",
        rt.nft
    );
    let n2 = ns(&st, "plab-t-n2");
    assert_eq!(
        sysctl(n2, "net.ipv6.conf.all.disable_ipv6").as_deref(),
        Some("0")
    );
    for want in [
        "addr add fd00:56::b/64 dev eth0 nodad",
        "route add default via fd00:56::1",
        "addr add fd00:10:244:2::1/64 dev cni0 nodad",
        "route add fd00:10:244:1::/64 via fd00:10:244:1::ff dev flannel.1 onlink",
        "neigh add fd00:10:244:1::ff lladdr 02:00:0a:f4:01:00 dev flannel.1 nud permanent",
    ] {
        assert!(has(&n2.config, want), "{want} not in {:#?}", n2.config);
    }
    assert!(n2.nft.contains("table ip6 prober-lab"), "{}", n2.nft);
    assert!(
        n2.nft
            .contains("ip6 daddr fd00:10:96::1 tcp dport 443 dnat to [fd00:56::a]:6443"),
        "{}",
        n2.nft
    );
    assert!(
        n2.nft
            .contains("ip6 daddr fd00:10:96::a udp dport 53 dnat to [fd00:10:244:1::35]:53")
    );
    let p = ns(&st, "plab-t-n2p0");
    assert!(has(
        &p.config,
        "addr add fd00:10:244:2::2/64 dev eth0 nodad"
    ));
    assert!(has(&p.config, "route add default via fd00:10:244:2::1"));
    // The IPv6-only fault: an ip6 rule, ICMPv6's admin-prohibited; no IPv4 rule.
    let n1 = ns(&st, "plab-t-n1");
    assert!(
        n1.nft.contains(
            "ip6 saddr fd00:56::c tcp dport 10250 reject with icmpv6 type admin-prohibited"
        ),
        "{}",
        n1.nft
    );
    assert!(!n1.nft.contains("ip saddr 192.168.56.12 tcp dport 10250"));
    let s = Scenario::parse(yaml).unwrap();
    let procs = processes(&s, &l, Path::new("/a/probe-pod"), Path::new("/a/prober"));
    let api = procs.iter().find(|p| p.what == "apiserver").unwrap();
    assert!(
        api.argv.contains(&"[::]:6443".to_string()),
        "{:?}",
        api.argv
    );
    let dns = procs.iter().find(|p| p.what == "cluster-dns").unwrap();
    assert!(
        dns.argv
            .contains(&"--listen-address=fd00:10:244:1::35".to_string())
    );
    let inv = inventory(&s, &l);
    inv.validate().unwrap();
    assert_eq!(
        inv.families(),
        [
            crate::inventory::Family::Ipv4,
            crate::inventory::Family::Ipv6
        ]
    );
    let plan = crate::plan::plan(&inv, &crate::plan::Filter::default());
    assert!(
        plan.iter()
            .any(|p| p.id == "pod-to-service:n1/pod->svc/kubernetes:tls/443/ipv6")
    );
    // An IPv4-only scenario keeps IPv6 off, as before.
    let (_, st) = lab("{}");
    let n2 = ns(&st, "plab-t-n2");
    assert_eq!(
        sysctl(n2, "net.ipv6.conf.all.disable_ipv6").as_deref(),
        Some("1")
    );
    assert!(!n2.nft.contains("ip6"));
}

#[test]
fn families_the_lab_does_not_build_are_refused_naming_the_key() {
    for (yaml, says) in [
        ("ipFamilies: [ipv6, ipv4]", "[ipv6, ipv4]"),
        ("ipFamilies: [ipv6]\noverlay: {mode: geneve}", "geneve"),
        (
            "ipFamilies: [ipv4, ipv6]\nrouters: 2\nzones: [{name: a, nodes: [n1]}, {name: b, nodes: [n2]}]",
            "routers: 2",
        ),
    ] {
        let e = Scenario::parse(yaml).unwrap_err().to_string();
        assert!(e.contains("ipFamilies") && e.contains(says), "{yaml}: {e}");
    }
}

/// An IPv6-only scenario: an inventory of IPv6 alone, whose plan probes nothing over IPv4.
#[test]
fn an_ipv6_only_lab_writes_an_ipv6_only_inventory() {
    let yaml = "ipFamilies: [ipv6]";
    let (l, _) = lab(yaml);
    let s = Scenario::parse(yaml).unwrap();
    let inv = inventory(&s, &l);
    inv.validate().unwrap();
    assert_eq!(inv.families(), [crate::inventory::Family::Ipv6]);
    assert_eq!(inv.cluster.api.service.to_string(), "[fd00:10:96::1]:443");
    assert_eq!(inv.cluster.pod_cidr.to_string(), "fd00:10:244::/56");
    let text = inv.to_yaml();
    assert!(
        !text.contains("192.168.") && !text.contains("10.244.") && !text.contains("vtep:"),
        "{text}"
    );
    let plan = crate::plan::plan(&inv, &crate::plan::Filter::default());
    assert!(!plan.is_empty());
    assert!(plan.iter().all(|p| p.to.address.is_ipv6()), "{plan:#?}");
}

/// The IPv6-only lab's underlay is IPv6 alone: no IPv4 address on the nodes' links, flannel's
/// VXLAN device over IPv6 with its `vtep6`, fdb entries to the peers' IPv6 addresses, the pods'
/// IPv6 ranges routed to the peers' `vtep6`, and an MTU with room for the IPv6 outer header. The
/// kubelet, the resolver and the inventory reach everything over IPv6.
#[test]
fn an_ipv6_only_lab_runs_its_overlay_over_an_ipv6_underlay() {
    let yaml = "ipFamilies: [ipv6]";
    let (l, st) = lab(yaml);
    let s = Scenario::parse(yaml).unwrap();
    let n1 = ns(&st, "plab-t-n1");
    assert!(
        !n1.config
            .iter()
            .any(|c| c.contains("192.168.") || c.contains("default via 192")),
        "{:#?}",
        n1.config
    );
    has_lines(
        n1,
        &[
            "addr add fd00:56::a/64 dev eth0 nodad",
            "link add flannel.1 address 02:00:0a:f4:01:00 type vxlan id 1 local fd00:56::a dev eth0 dstport 8472 nolearning",
            "link set flannel.1 mtu 1430",
            "addr add fd00:10:244:1::/128 dev flannel.1 nodad",
            "route add fd00:10:244:2::/64 via fd00:10:244:2:: dev flannel.1 onlink",
            "neigh add fd00:10:244:3:: lladdr 02:00:0a:f4:03:00 dev flannel.1 nud permanent",
            "link set cni0 mtu 1430",
        ],
    );
    assert_eq!(
        n1.fdb,
        [
            "fdb append 02:00:0a:f4:02:00 dev flannel.1 dst fd00:56::b",
            "fdb append 02:00:0a:f4:03:00 dev flannel.1 dst fd00:56::c",
        ]
    );
    assert!(
        ns(&st, "plab-t-n1p0")
            .config
            .contains(&"link set eth0 mtu 1430 up".to_string())
    );
    let inv = inventory(&s, &l);
    let vtep6 = inv.nodes[1].vtep6.as_ref().unwrap();
    assert_eq!(vtep6.address.to_string(), "fd00:10:244:2::");
    assert_eq!(inv.cluster.overlay.and_then(|o| o.mtu()), Some(1430));
    let hf = test_host_files(&s, &l);
    let text = |p: &str| {
        hf.files
            .iter()
            .find(|(f, _)| f.ends_with(p))
            .map_or_else(|| panic!("no {p}"), |(_, t)| t.clone())
    };
    assert!(text("n2/etc/kubernetes/kubelet.conf").contains("server: https://[fd00:56::a]:6443"));
    assert_eq!(text("n2/etc/resolv.conf"), "nameserver fd00:56::1\n");
    let ps = processes(&s, &l, Path::new("/a"), Path::new("/p"));
    argv_has(&ps, "cluster-dns", "--server=fd00:56::1");
    argv_has(&ps, "upstream-dns", "--listen-address=fd00:56::1");
    // The dual-stack lab keeps its IPv4 underlay: no `vtep6`, the fdb to IPv4 addresses.
    let (l, st) = lab("ipFamilies: [ipv4, ipv6]");
    let s = Scenario::parse("ipFamilies: [ipv4, ipv6]").unwrap();
    assert!(inventory(&s, &l).nodes.iter().all(|n| n.vtep6.is_none()));
    assert!(ns(&st, "plab-t-n1").fdb[0].ends_with("dst 192.168.56.11"));
}

/// `mtu` with `family: ipv6` lowers the MTU of the IPv6 routes to and from the node alone; an
/// `icmp-filter` drops its ICMP types on every hook of the nodes it names.
#[test]
fn ipv6_path_mtu_and_icmp_filter_faults() {
    let yaml = "ipFamilies: [ipv4, ipv6]\nfaults:\n  - {kind: mtu, node: n3, mtu: 1400, family: ipv6}\n  - {kind: icmp-filter, nodes: [n1], types: [2], family: ipv6}";
    let (_, st) = lab(yaml);
    let n1 = ns(&st, "plab-t-n1");
    assert!(
        n1.config.contains(
            &"route change fd00:10:244:3::/64 via fd00:10:244:3::ff dev flannel.1 onlink mtu 1400"
                .to_string()
        ),
        "{:#?}",
        n1.config
    );
    assert!(
        !n1.config
            .iter()
            .any(|c| c.contains("fd00:10:244:2::/64") && c.contains("mtu"))
    );
    let n3 = ns(&st, "plab-t-n3");
    for peer in [1, 2] {
        let want = format!(
            "route change fd00:10:244:{peer}::/64 via fd00:10:244:{peer}::ff dev flannel.1 onlink mtu 1400"
        );
        assert!(n3.config.contains(&want), "{:#?}", n3.config);
    }
    for hook in ["input", "forward", "output"] {
        assert!(
            n1.nft.contains(&format!("type filter hook {hook}")),
            "{}",
            n1.nft
        );
    }
    assert!(
        n1.nft.contains("table inet prober-icmp") && n1.nft.contains("icmpv6 type { 2 } drop"),
        "{}",
        n1.nft
    );
    assert!(!ns(&st, "plab-t-n2").nft.contains("prober-icmp"));
    // IPv4 untouched: no switch-port MTU.
    assert!(
        !ns(&st, "plab-t-sw0")
            .config
            .iter()
            .any(|c| c.contains("mtu"))
    );
    // Their family must be the lab's.
    for (yaml, field) in [
        (
            "faults: [{kind: mtu, node: n3, mtu: 1400, family: ipv6}]",
            "faults[0].family",
        ),
        (
            "faults: [{kind: icmp-filter, types: [2], family: ipv6}]",
            "faults[0].family",
        ),
        (
            "faults: [{kind: icmp-filter, types: []}]",
            "faults[0].types",
        ),
        (
            "faults: [{kind: icmp-filter, nodes: [n9], types: [3]}]",
            "faults[0].nodes",
        ),
    ] {
        let e = Scenario::parse(yaml).unwrap_err().to_string();
        assert!(e.contains(field), "{yaml}: {e}");
    }
}

mod ipv6_tunnel;
