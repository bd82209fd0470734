//! Pure: which runs' objects are live and which are stale, by the expiry each run writes on its
//! objects (`prober.io/expires`), so that concurrent runs and `prober cleanup` never remove
//! another run's live agents.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::runtime::kube::manifests::{EXPIRES_ANNOTATION, RUN_LABEL};

/// Objects of an older prober, without an expiry, count as live for this long after they were
/// created (the matrix's default TTL).
pub const UNMARKED_LIFETIME: SignedDuration = SignedDuration::from_hours(2);

/// When a run started `now` with agents that live `ttl` (`2h`, `30m`) expires, as written in
/// [`EXPIRES_ANNOTATION`]; `None` when the TTL does not parse.
#[must_use]
pub fn expires_at(now: Timestamp, ttl: &str) -> Option<String> {
    let d = probe_proto::parse_duration(ttl).ok()?;
    let d = SignedDuration::try_from(d).ok()?;
    now.checked_add(d).ok().map(|t| t.to_string())
}

/// When `meta`'s object expires: its annotation, else (an older prober's) its creation plus
/// [`UNMARKED_LIFETIME`]; `None` when neither says (then it is not known to be stale).
#[must_use]
pub fn expiry(meta: &ObjectMeta) -> Option<Timestamp> {
    let annotated = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(EXPIRES_ANNOTATION))
        .and_then(|v| v.parse::<Timestamp>().ok());
    annotated.or_else(|| {
        let created = meta.creation_timestamp.as_ref()?.0;
        created.checked_add(UNMARKED_LIFETIME).ok()
    })
}

/// Whether the run object `meta` is past its expiry at `now`: its agents serve nothing any
/// more, and removing it takes nothing from a run still going.
#[must_use]
pub fn stale(meta: &ObjectMeta, now: Timestamp) -> bool {
    expiry(meta).is_some_and(|at| at <= now)
}

/// The run an object belongs to (its run label).
#[must_use]
pub fn run_of(meta: &ObjectMeta) -> Option<&str> {
    meta.labels.as_ref()?.get(RUN_LABEL).map(String::as_str)
}

/// Other runs with live objects among `objects`, each once with its expiry (when known).
#[must_use]
pub fn other_live_runs<'a>(
    objects: impl IntoIterator<Item = &'a ObjectMeta>,
    own: Option<&str>,
    now: Timestamp,
) -> Vec<(String, Option<Timestamp>)> {
    let mut out: Vec<(String, Option<Timestamp>)> = Vec::new();
    for meta in objects {
        let Some(run) = run_of(meta).filter(|r| Some(*r) != own) else {
            continue;
        };
        if stale(meta, now) || out.iter().any(|(r, _)| r == run) {
            continue;
        }
        out.push((run.to_string(), expiry(meta)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn meta(run: &str, expires: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            labels: Some(BTreeMap::from([(RUN_LABEL.to_string(), run.to_string())])),
            annotations: expires
                .map(|e| BTreeMap::from([(EXPIRES_ANNOTATION.to_string(), e.to_string())])),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn live_and_stale_runs_by_their_expiry() {
        let now: Timestamp = "2026-12-01T12:00:00Z".parse().unwrap();
        assert_eq!(
            expires_at(now, "2h").as_deref(),
            Some("2026-12-01T14:00:00Z")
        );
        assert_eq!(expires_at(now, "soon"), None);
        let live = meta("ra", Some("2026-12-01T13:00:00Z"));
        let old = meta("rb", Some("2026-12-01T11:00:00Z"));
        let own = meta("rc", Some("2026-12-01T13:00:00Z"));
        assert!(!stale(&live, now) && stale(&old, now));
        let others = other_live_runs([&live, &old, &own, &live], Some("rc"), now);
        assert_eq!(
            others,
            [(
                "ra".to_string(),
                Some("2026-12-01T13:00:00Z".parse().unwrap())
            )]
        );
        // An older prober's object without an expiry: live for two hours after its creation.
        let mut unmarked = meta("rd", None);
        assert!(!stale(&unmarked, now), "nothing says it expired");
        unmarked.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            "2026-12-01T09:00:00Z".parse().unwrap(),
        ));
        assert!(stale(&unmarked, now));
    }
}
