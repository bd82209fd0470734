//! The table's CNI credentials section: every CNI kubeconfig the host agents read, by node.

use std::fmt::Write as _;

use super::{Report, Style, wrap};
use crate::model::PathClass;
use probe_proto::ServerTrust;

/// Every CNI token the host agents found: whose, issued, expires, and the API server's verdict
/// (docs/incidents.md, incidents 3 and 4). Claims only; the token itself is never in the report.
pub(super) fn credentials(out: &mut String, report: &Report, style: Style) {
    use crate::model::time::{age, utc};
    let mut lines = Vec::new();
    for r in report
        .results
        .iter()
        .filter(|r| r.path == PathClass::NodeConfig)
    {
        for kc in r.result.node.iter().flat_map(|n| &n.cni_kubeconfigs) {
            // The agent's error names the file and field, never a value (a token included).
            if let Some(e) = &kc.error {
                lines.push(format!("  {:<5} {}", r.from.node, kc.path));
                lines.push(format!("        UNUSABLE: {e}"));
                continue;
            }
            let Some(t) = &kc.token else { continue };
            let who = t.service_account.as_deref().map_or_else(
                || t.subject.clone().unwrap_or_else(|| "?".into()),
                |sa| format!("{}/{sa}", t.namespace.as_deref().unwrap_or("?")),
            );
            let issued = t.issued_at.map_or_else(
                || "issued ?".into(),
                |i| format!("issued {} ago", age(t.checked_at.saturating_sub(i))),
            );
            let expires = match t.expires_at {
                Some(e) if e <= t.checked_at => format!("EXPIRED {}", utc(e)),
                Some(e) => format!("expires {}", utc(e)),
                None if t.format == "jwt" => "never expires".into(),
                None => "opaque token".into(),
            };
            // A server that could not be verified was never sent the token: say so, not "error".
            let unverified = matches!(
                kc.server_trust,
                Some(
                    ServerTrust::InsecureSkipVerify
                        | ServerTrust::Untrusted
                        | ServerTrust::Unverifiable
                )
            );
            let api =
                kc.check
                    .as_ref()
                    .map_or_else(String::new, |c| match (c.outcome, c.http_status) {
                        _ if unverified => ", not sent (server not verifiable)".into(),
                        (o, Some(s)) => format!(", API {o} ({s})"),
                        (o, None) => format!(", API {o}"),
                    });
            lines.push(format!("  {:<5} {} ({who})", r.from.node, kc.path));
            lines.push(format!("        {issued}, {expires}{api}"));
        }
    }
    if !lines.is_empty() {
        let _ = writeln!(out, "\nCNI credentials:");
        for l in lines {
            let _ = writeln!(out, "{}", wrap(&super::safe::text(&l), style.width, 8));
        }
    }
}
