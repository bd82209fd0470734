//! The table's tests: what a reader of the terminal sees, wrapped, escaped, in order.

use super::*;

#[test]
fn a_healthy_run_has_a_one_line_verdict_and_counts_agree_in_number() {
    let healthy = super::super::fixture::healthy(3);
    let t = render(&healthy, style(100));
    assert!(
        t.contains(&format!(
            "verdict: healthy: all {} probes got through; nothing to fix",
            healthy.summary.counts.total
        )),
        "{t}"
    );
    let broken = render(&gap_report(3), style(100));
    assert!(!broken.contains("verdict: healthy"), "{broken}");
    // One probe is a probe.
    let mut one = super::super::fixture::healthy(2);
    let first = one.results.at(0).to_owned();
    one.results = vec![first].into();
    one.summary = Report::new(
        crate::run::RunOutput {
            results: one.results.clone(),
            agents: one.agents.clone(),
            interrupted: false,
            elapsed: std::time::Duration::from_millis(5),
        },
        &crate::testutil::inventory(2, 1, "flannel"),
    )
    .summary;
    let t = render(&one, style(100));
    assert!(!t.contains("1 probes"), "{t}");
    assert!(t.contains("1 probe in"), "{t}");
}

/// Issue 25, item 8: a long kubectl fix wraps with shell continuations (pasted, it runs as
/// one command), and notes are shown as notes after the fix lines, never as `fix:`.
#[test]
fn kubectl_fixes_wrap_as_commands_and_notes_are_not_fixes() {
    let mut r = gap_report(3);
    let cmd = "kubectl -n kube-system set env ds/calico-node -c install-cni KUBERNETES_SERVICE_HOST=k8s-api.example.com KUBERNETES_SERVICE_PORT=6443";
    r.findings[0].fix = vec![format!(
        "calico-node (DaemonSet kube-system/calico-node), container install-cni: {cmd}"
    )];
    r.findings[0].notes =
        vec!["the hosts' own firewalls are not the cause: the packets never reached them".into()];
    let text = render(&r, style(80));
    assert!(too_wide(&text, 80).is_empty(), "{:#?}", too_wide(&text, 80));
    let start = text.find("  fix: calico-node").expect("the fix");
    let mut pasted = String::new();
    for l in text[start..].lines().skip(1) {
        if let Some(part) = l.trim().strip_suffix(" \\") {
            pasted.push_str(part);
            pasted.push(' ');
        } else {
            pasted.push_str(l.trim());
            break;
        }
    }
    assert_eq!(pasted, cmd, "{text}");
    assert!(!text.contains("fix: the hosts' own"), "{text}");
    let note = text
        .find("  note: the hosts' own firewalls")
        .expect("the note");
    assert!(start < note, "{text}");
}

#[test]
fn a_grid_with_every_row_bad_does_not_say_only() {
    // 20 nodes, every node's pod broken toward n3: all sources have a problem.
    let t = render(&gap_report(20), style(100));
    assert!(!t.contains("only the 20 of 20"), "{t}");
    assert!(!t.contains("only the 19 of 19"), "{t}");
}

#[test]
fn natural_order() {
    let mut v = vec!["n10", "n2", "n1", "svc"];
    v.sort_by(|a, b| natural(a, b));
    assert_eq!(v, ["n1", "n2", "n10", "svc"]);
}

use crate::diagnose::{Finding, Severity};
use crate::model::Unknown;

/// Lines wider than `width` that are not a single unbreakable word.
fn too_wide(text: &str, width: usize) -> Vec<String> {
    text.lines()
        .filter(|l| l.chars().count() > width && l.split_whitespace().count() > 1)
        .map(String::from)
        .collect()
}

fn style(width: usize) -> Style {
    Style {
        color: false,
        width,
    }
}

/// The flannel fixture with its gap's evidence and consequences, and long fix commands.
fn gap_report(nodes: usize) -> Report {
    let mut r = super::super::fixture::report(nodes, Some("n3"));
    let failed: Vec<String> = r
        .results
        .iter()
        .filter(Record::is_failed)
        .map(|r| r.result.id.to_string())
        .collect();
    let f = &mut r.findings[0];
    f.evidence = failed[..2].to_vec();
    f.consequences = failed[2..].to_vec();
    f.fix = vec![
        "on n3 (nftables): nft insert rule inet filter input ip saddr { 10.0.0.1, 10.0.0.2, 10.0.0.4, 10.0.0.5 } udp dport 8472 accept".into(),
        "on the firewall, router or security group between them: allow udp/8472 from 10.0.0.1, 10.0.0.2, 10.0.0.4 to 10.0.0.3 and back".into(),
    ];
    r
}

#[test]
fn long_address_lists_end_in_and_n_more() {
    let ips: Vec<String> = (1..=20).map(|k| format!("10.0.{k}.0/24")).collect();
    let nft = format!(
        "on n1 (nftables): nft insert rule inet filter input ip saddr {{ {} }} udp dport 8472 accept",
        ips.join(", ")
    );
    assert_eq!(
        cap_lists(&nft),
        "on n1 (nftables): nft insert rule inet filter input ip saddr { 10.0.1.0/24, 10.0.2.0/24, 10.0.3.0/24, 10.0.4.0/24, 10.0.5.0/24, 10.0.6.0/24, ... and 14 more } udp dport 8472 accept"
    );
    let ipt = format!(
        "iptables -I INPUT -p udp -s {} --dport 8472 -j ACCEPT",
        ips.join(",")
    );
    assert_eq!(
        cap_lists(&ipt),
        "iptables -I INPUT -p udp -s 10.0.1.0/24,10.0.2.0/24,10.0.3.0/24,10.0.4.0/24,10.0.5.0/24,10.0.6.0/24,... and 14 more --dport 8472 -j ACCEPT"
    );
    let net = format!(
        "allow udp/8472 from {} to 192.168.56.10, 192.168.56.11",
        ips.join(", ")
    );
    let capped = cap_lists(&net);
    assert!(
        capped.contains("10.0.6.0/24, ... and 14 more to 192.168.56.10, 192.168.56.11"),
        "{capped}"
    );
    let rules: Vec<String> = ips
        .iter()
        .map(|a| format!("firewall-cmd --permanent --add-rich-rule='rule family=\"ipv4\" source address=\"{a}\" accept'"))
        .collect();
    let fw = format!(
        "on n1 (firewalld): {} && firewall-cmd --reload",
        rules.join(" && ")
    );
    let capped = cap_lists(&fw);
    assert_eq!(
        capped.matches("--add-rich-rule").count(),
        fix_line::SHOWN_RULES,
        "{capped}"
    );
    assert!(
        capped.ends_with("&& ... and 17 more rules && firewall-cmd --reload"),
        "{capped}"
    );
    // Short lists, versions and ports are left alone.
    for same in [
        "allow tcp/6443 from 10.0.0.1, 10.0.0.2 to 10.0.0.3",
        "upgrade to 1.29.3.4.5, then",
        "kubectl -n kube-system rollout restart ds/kube-flannel-ds",
    ] {
        assert_eq!(cap_lists(same), same);
    }
}

#[test]
fn fits_80_columns_and_fix_commands_survive_wrapping() {
    let r = gap_report(3);
    let text = render(&r, style(80));
    assert!(
        too_wide(&text, 80).is_empty(),
        "{:#?}\n{text}",
        too_wide(&text, 80)
    );
    // The wrapped command, joined at its continuations, is the command.
    let start = text.find("  fix: on n3 (nftables):").expect("nft fix");
    let mut cmd = String::new();
    for l in text[start..].lines().skip(1) {
        let l = l.trim();
        if let Some(part) = l.strip_suffix(" \\") {
            cmd.push_str(part);
            cmd.push(' ');
        } else {
            cmd.push_str(l);
            break;
        }
    }
    assert_eq!(
        cmd,
        "nft insert rule inet filter input ip saddr { 10.0.0.1, 10.0.0.2, 10.0.0.4, 10.0.0.5 } udp dport 8472 accept"
    );
    // Addresses in prose are wrapped, whole.
    assert!(text.contains("10.0.0.3"), "{text}");
    let wide = render(&r, style(160));
    assert!(
        wide.contains("  fix: on n3 (nftables): nft insert rule"),
        "{wide}"
    );
}

#[test]
fn failures_are_grouped_under_their_finding_and_unknown_is_apart() {
    let mut r = gap_report(3);
    let ok_id = r
        .results
        .iter()
        .position(|x| x.result.outcome.is_ok())
        .unwrap();
    let mut results = r.results.to_vec();
    results[ok_id].unknown = Some(Unknown::AgentFailed);
    results[ok_id].result.outcome = Outcome::Error;
    results[ok_id].result.detail = "unknown: agent failed".into();
    let lone = results
        .iter()
        .position(|x| x.result.outcome.is_ok())
        .unwrap();
    results[lone].result.outcome = Outcome::Refused;
    results[lone].result.detail = "lone refusal".into();
    r.results = results.into();
    let failed = r.results.iter().filter(Record::is_failed).count();
    let text = render(&r, style(100));
    let at = |s: &str| {
        text.find(s)
            .unwrap_or_else(|| panic!("no {s:?} in\n{text}"))
    };
    assert!(text.contains(&format!("failures ({failed}):")), "{text}");
    assert!(at("failures (") < at("  [error] firewall-gap"));
    assert!(at("  [error] firewall-gap") < at("    evidence (2):"));
    assert!(at("    evidence (2):") < at("    and "));
    assert!(at("    and ") < at("  unexplained (1):"));
    assert!(at("  unexplained (1):") < at("lone refusal"));
    assert!(
        text.contains("not tested/unknown (1): agent-failed 1"),
        "{text}"
    );
    let failures = &text[at("failures (")..at("not tested/unknown")];
    assert!(!failures.contains("unknown: agent failed"), "{failures}");
}

#[test]
fn twenty_nodes_show_only_the_problem_rows() {
    let r = gap_report(20);
    let text = render(&r, style(80));
    assert!(too_wide(&text, 80).is_empty(), "{:#?}", too_wide(&text, 80));
    // Every node has a problem toward n3: nothing was left out, so nothing says "only".
    assert!(!text.contains("only the 20 of 20"), "{text}");
    // node-to-node is healthy: one line, not twenty.
    let nn = &text[text.find("\nnode-to-node (").unwrap()..];
    let nn: Vec<&str> = nn.lines().skip(2).take_while(|l| !l.is_empty()).collect();
    assert_eq!(nn, ["  all ok (20 x 20)"], "{text}");
    let healthy = render(&super::super::fixture::healthy(20), style(80));
    assert!(healthy.lines().count() < 60, "{healthy}");
    // One gap's evidence between n3 and 19 nodes is a few lines and a count, not 38.
    let mut r = r;
    r.findings[0].evidence = r
        .results
        .iter()
        .filter(Record::is_failed)
        .map(|x| x.result.id.to_string())
        .collect();
    r.findings[0].consequences.clear();
    let text = render(&r, style(80));
    let ev = r.findings[0].evidence.len();
    assert!(ev > EVIDENCE_SHOWN, "{ev}");
    assert!(
        text.contains(&format!(
            "      and {} more like these (every one in -o json)",
            ev - EVIDENCE_SHOWN
        )),
        "{text}"
    );
}

#[test]
fn outside_text_is_shown_escaped_and_long_names_cut() {
    let mut r = gap_report(3);
    let long = "n".repeat(70_000);
    let mut results = r.results.to_vec();
    for x in &mut results {
        if x.from.node == "n1" {
            x.from.node.clone_from(&long);
        }
        if x.to.node.as_deref() == Some("n2") {
            x.to.node = Some("n2\x1b]0;owned\x07\u{202e}".into());
        }
        if !x.result.outcome.is_ok() {
            x.result.detail = "refused\nFAKE all ok\r\x1b[2J".into();
        }
    }
    r.results = results.into();
    r.findings[0].summary = "gap\n\x1b[32mFAKE nothing wrong".into();
    r.findings[0].fix = vec!["nft add rule \u{2066}x\u{2069}\n rm -rf /".into()];
    r.agents.push(crate::model::AgentStatus {
        node: "n9\x1b[1m".into(),
        agent: crate::model::AgentKind::Pod,
        ran: false,
        detail: "gone\nFAKE".into(),
    });
    // Before: "Formatting argument out of range" for the long name, and the report was lost.
    let text = render(&r, style(100));
    for raw in ['\x1b', '\x07', '\r', '\u{202e}', '\u{2066}'] {
        assert!(!text.contains(raw), "{raw:?} reached the terminal:\n{text}");
    }
    assert!(
        !text
            .lines()
            .any(|l| l.trim_start().starts_with("FAKE") || l.trim_start().starts_with("rm -rf")),
        "a line was injected:\n{text}"
    );
    assert!(text.contains("\\u{1b}"), "{text}");
    assert!(
        text.contains("...(69936 more)"),
        "the long name is cut, saying so"
    );
    assert!(
        text.lines().all(|l| l.chars().count() < 2200),
        "every line is bounded"
    );
}

#[test]
fn a_config_finding_shows_in_summary_and_grid() {
    let mut r = super::super::fixture::healthy(3);
    let nc = r
        .results
        .iter()
        .find(|x| x.path == PathClass::NodeToNode)
        .map(|x| x.result.id.to_string())
        .unwrap();
    let expired = crate::diagnose::finding::Credential {
        state: crate::diagnose::finding::CredentialState::Expired,
        nodes: vec!["n1".into()],
    };
    let mut f = Finding::new(expired, Severity::Error, "token expired on n1");
    f.evidence = vec![nc];
    r.findings = vec![f];
    let text = render(&r, style(100));
    assert!(text.contains("findings: 1 error, 0 warnings"), "{text}");
    let grid = &text[text.find("\nnode-to-node (").unwrap()..];
    assert!(grid.lines().take(5).any(|l| l.contains('!')), "{text}");
}

#[test]
fn a_token_never_sent_to_an_unverifiable_server_is_not_an_api_error() {
    let mut r = super::super::fixture::healthy(3);
    let mut records = r.results.to_vec();
    // The fixture's inventory gives no host root: n2's host agent stands in for its node check.
    let files = records
        .iter_mut()
        .find(|x| x.from.node == "n2" && x.from.agent == crate::model::AgentKind::Host)
        .unwrap();
    files.path = PathClass::NodeConfig;
    // As the host agent reports a CNI kubeconfig with insecure-skip-tls-verify (a lab run's own).
    files.result.node = Some(Box::new(
        serde_json::from_str(
            r#"{"root": "/", "cniKubeconfigs": [{"path": "/etc/cni/net.d/calico-kubeconfig",
                "server": "https://10.96.0.1:443", "auth": "token",
                "token": {"format": "jwt", "subject": "system:serviceaccount:kube-system:calico-cni-plugin",
                    "issuedAt": 1796402105, "expiresAt": 1796488505, "serviceAccount": "calico-cni-plugin",
                    "namespace": "kube-system", "bound": true, "checkedAt": 1796402105},
                "check": {"outcome": "error", "detail": "insecure-skip-tls-verify: the API server at https://10.96.0.1:443 cannot be verified, so the credential was not sent"},
                "insecureSkipTlsVerify": true, "serverTrust": "insecure-skip-verify"}]}"#,
        )
        .unwrap(),
    ));
    r.results = crate::model::Results::of(&records);
    let text = render(&r, style(100));
    let section = &text[text.find("CNI credentials:").expect("the section is shown")..];
    assert!(
        section.contains("not sent (server not verifiable)"),
        "{section}"
    );
    assert!(!section.contains("API error"), "{section}");
}

#[test]
fn an_ipv6_target_with_a_port_is_bracketed() {
    use crate::model::{AgentKind, AgentRef, PathClass, Protocol, ResultRecord, Results, Target};
    let record = |address: &str, port| ResultRecord {
        path: PathClass::NodeToNode,
        from: AgentRef {
            node: "n3".into(),
            agent: AgentKind::Host,
        },
        to: Target {
            node: Some("n1".into()),
            agent: Some(AgentKind::Host),
            service: None,
            address: address.parse().unwrap(),
            port,
            protocol: Protocol::Tcp,
        },
        unknown: None,
        result: probe_proto::ProbeResult::new(
            format!("x/{address}/{port:?}"),
            probe_proto::Outcome::Ok,
            "",
        ),
    };
    let results = Results::of(&[
        record("fd00:56::10", Some(10250)),
        record("192.168.56.10", Some(10250)),
        record("fd00:56::10", None),
    ]);
    assert_eq!(target(&results.at(0)), "n1/host [fd00:56::10]:10250");
    assert_eq!(target(&results.at(1)), "n1/host 192.168.56.10:10250");
    assert_eq!(target(&results.at(2)), "n1/host fd00:56::10");
}
