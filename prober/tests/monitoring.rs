//! deploy/monitoring: the alert rules and the Grafana dashboard, checked by the real `promtool`
//! against what lab runs of the scheduled mode (`matrix --log-format json --pushgateway`) really
//! pushed to a real Pushgateway: the unit tests' input series are that Pushgateway's /metrics,
//! scraped after each run and laid out 15 minutes apart, as the `CronJob` runs.

// A test: it reads fixtures and the clock freely (clippy.toml bans them in shipped code).
#![allow(clippy::disallowed_methods)]

mod common;

use common::gateway::{Pushgateway, SCHED_DEPS, get};
use common::tool;
use common::{KUBE_DEPS, StateDir, agent, lab, prober, require_root, root, text};

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn monitoring() -> PathBuf {
    root().join("deploy/monitoring")
}

fn yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn rules() -> Value {
    yaml(&monitoring().join("prober.rules.yaml"))
}

fn dashboard() -> Value {
    let p = monitoring().join("grafana-dashboard.json");
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Every query of the dashboard, with its panel's title.
fn dashboard_queries(d: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            out.push((
                p["title"].as_str().unwrap().to_string(),
                t["expr"].as_str().unwrap().to_string(),
            ));
        }
    }
    out
}

/// Every rule's expression, by alert name.
fn rule_exprs(rules: &Value) -> Vec<(String, String)> {
    rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .map(|r| {
            (
                r["alert"].as_str().unwrap().to_string(),
                r["expr"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The metric names a query selects: every identifier of ours (`prober_*`) or the
/// Pushgateway's (`push_*`); functions, label names and keywords are neither.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = expr;
    while let Some(start) = rest.find(|c: char| c.is_ascii_alphabetic() || c == '_') {
        let tail = &rest[start..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(tail.len());
        let word = &tail[..end];
        // A label value in quotes is not a name: skip to its closing quote.
        let quoted = rest[..start].ends_with('"');
        if !quoted && (word.starts_with("prober_") || word.starts_with("push_")) {
            names.insert(word.to_string());
        }
        rest = &tail[end..];
        if quoted {
            rest = rest.split_once('"').map_or("", |(_, r)| r);
        }
    }
    names
}

/// The names `exprs` select that are not in `pushed`, with where they are used.
fn unpushed(exprs: &[(String, String)], pushed: &BTreeSet<String>) -> Vec<String> {
    exprs
        .iter()
        .flat_map(|(at, e)| {
            metric_names(e)
                .into_iter()
                .filter(|n| !pushed.contains(n))
                .map(move |n| format!("{at}: {n}"))
        })
        .collect()
}

fn promtool(promtool: &Path, args: &[&str], dir: &Path) -> Output {
    Command::new(promtool)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// Writes `file` in `dir` as `name`, runs promtool there with `args`, and returns what it
/// printed; fails the test when promtool does.
fn promtool_passes(bin: &Path, dir: &Path, (name, file): (&str, &str), args: &[&str]) -> String {
    std::fs::write(dir.join(name), file).unwrap();
    let out = promtool(bin, args, dir);
    assert!(out.status.success(), "promtool {args:?}: {}", text(&out));
    text(&out)
}

fn tmp(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(prefix).tempdir().unwrap()
}

#[test]
fn the_prometheusrule_is_rendered_from_the_rules_file() {
    let check = Command::new(root().join("scripts/monitoring"))
        .arg("--check")
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", text(&check));
    let rule = yaml(&monitoring().join("prometheusrule.yaml"));
    assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(rule["kind"], "PrometheusRule");
    assert_eq!(rule["metadata"]["namespace"], "prober-system");
    assert_eq!(rule["spec"]["groups"], rules()["groups"]);
    let alerts: Vec<String> = rule_exprs(&rules()).into_iter().map(|(a, _)| a).collect();
    assert_eq!(
        alerts,
        [
            "ProberNewErrorFinding",
            "ProberNodeCutOff",
            "ProberAgentsMissing",
            "ProberRunNotCompleting",
            "ProberFailedProbesRising"
        ]
    );
}

#[test]
fn kustomize_renders_the_rules_and_the_dashboard() {
    let Some(kubectl) = tool("kubectl", KUBE_DEPS) else {
        return;
    };
    let out = Command::new(kubectl)
        .arg("kustomize")
        .arg(monitoring())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let docs: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .split("\n---")
        .map(|d| serde_saphyr::from_str(d.trim_start_matches("---")).unwrap())
        .collect();
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["ConfigMap", "PrometheusRule"]);
    let cm = &docs[0];
    assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "1");
    let shipped: Value =
        serde_json::from_str(cm["data"]["grafana-dashboard.json"].as_str().unwrap()).unwrap();
    assert_eq!(shipped, dashboard());
    assert_eq!(docs[1]["spec"]["groups"], rules()["groups"]);
}

#[test]
fn promtool_parses_the_rules_and_every_dashboard_query() {
    let Some(bin) = tool("promtool", SCHED_DEPS) else {
        return;
    };
    let out = promtool(
        &bin,
        &["check", "rules", "prober.rules.yaml"],
        &monitoring(),
    );
    assert!(out.status.success(), "{}", text(&out));
    // The dashboard's queries as recording rules: promtool parses each one.
    let dir = tmp("prober-dash-");
    let queries = dashboard_queries(&dashboard());
    assert!(queries.len() >= 9, "{queries:?}");
    let mut file = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, (_, expr)) in queries.iter().enumerate() {
        let _ = writeln!(
            file,
            "      - record: dashboard:query{i}\n        expr: {}",
            serde_json::to_string(expr).unwrap()
        );
    }
    let printed = promtool_passes(
        &bin,
        dir.path(),
        ("dashboard.rules.yaml", &file),
        &["check", "rules", "dashboard.rules.yaml"],
    );
    assert!(
        printed.contains(&format!("SUCCESS: {} rules found", queries.len())),
        "{printed}"
    );
    // A query promtool cannot parse fails the check: the check is real.
    std::fs::write(
        dir.path().join("broken.rules.yaml"),
        "groups:\n  - name: d\n    rules:\n      - record: d:q\n        expr: sum by (path (prober_probes)\n",
    )
    .unwrap();
    let out = promtool(&bin, &["check", "rules", "broken.rules.yaml"], dir.path());
    assert!(!out.status.success(), "{}", text(&out));
}

#[test]
fn metric_names_are_read_from_queries() {
    let names = metric_names(
        r#"time() - max by (job) (push_time_seconds{job="prober",x="prober_not_a_name"}) > sum(prober_probes offset 1h)"#,
    );
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        ["prober_probes", "push_time_seconds"]
    );
}

// ---------------------------------------------------------------------------------------------
// Lab runs pushed to a real Pushgateway, then promtool's unit tests on what it served.

/// A lab left running by `lab up`, taken down on drop (pass, fail or panic). Its name starts
/// with `t`, as every test lab's does, so that `scripts/test` clears what a crash leaves.
struct Lab<'a> {
    name: &'a str,
    state: &'a StateDir,
    inventory: PathBuf,
}

impl<'a> Lab<'a> {
    fn up(name: &'a str, scenario: &str, state: &'a StateDir) -> Self {
        let scenario = root().join(scenario);
        let out = lab(
            &[
                "up",
                "--name",
                name,
                "--scenario",
                scenario.to_str().unwrap(),
            ],
            state,
        );
        let mut lab = Self {
            name,
            state,
            inventory: PathBuf::new(),
        };
        assert!(out.status.success(), "{}", text(&out));
        let printed = String::from_utf8_lossy(&out.stdout);
        let inventory = printed
            .lines()
            .find_map(|l| l.strip_prefix("inventory: "))
            .unwrap_or_else(|| panic!("no inventory in {printed}"));
        lab.inventory = PathBuf::from(inventory.trim());
        lab
    }
}

impl Drop for Lab<'_> {
    fn drop(&mut self) {
        let _ = lab(&["down", self.name], self.state);
    }
}

/// The scheduled mode's run and push against `inventory` (the `CronJob`'s `matrix --log-format
/// json`, with an inventory instead of the API), then the Pushgateway's /metrics: the series
/// of job="prober" and the Pushgateway's own `push_time_seconds`.
fn push_and_scrape(gw: &Pushgateway, inventory: &Path) -> String {
    let out = Command::new(prober())
        .args(["matrix", "--inventory"])
        .arg(inventory)
        .arg("--agent-bin")
        .arg(agent())
        .args(["--no-progress", "--log-format", "json", "--pushgateway"])
        .arg(format!("http://127.0.0.1:{}", gw.port))
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    let line: Value = log
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no JSON log line: {}", text(&out)));
    assert_eq!(line["pushed"], true, "{}", text(&out));
    let metrics = get(gw.port, "/metrics").expect("the Pushgateway's /metrics");
    let body = body_of(&metrics);
    assert!(body.contains("push_time_seconds{"), "{body}");
    body
}

/// The body of an HTTP/1.1 response, its chunks joined when it came chunked.
fn body_of(response: &str) -> String {
    let (head, mut rest) = response.split_once("\r\n\r\n").expect("an HTTP response");
    if !head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return rest.to_string();
    }
    let mut body = String::new();
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).expect("a chunk size");
        if size == 0 {
            break;
        }
        body.push_str(&tail[..size]);
        rest = tail[size..].trim_start_matches("\r\n");
    }
    body
}

/// One scrape's series of job="prober": `name{labels}` (empty labels dropped, as Prometheus
/// drops them) to value.
fn series(scrape: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for l in scrape.lines().filter(|l| !l.starts_with('#')) {
        let Some((key, value)) = l.rsplit_once(' ') else {
            continue;
        };
        let Some((name, labels)) = key.split_once('{') else {
            continue;
        };
        let labels: Vec<&str> = labels
            .trim_end_matches('}')
            .split(',')
            .filter(|kv| !kv.ends_with("=\"\""))
            .collect();
        if !labels.contains(&"job=\"prober\"") {
            continue;
        }
        let v: f64 = value.parse().unwrap_or_else(|e| panic!("{l}: {e}"));
        out.insert(format!("{name}{{{}}}", labels.join(",")), v);
    }
    out
}

fn name_of(key: &str) -> &str {
    key.split('{').next().unwrap()
}

fn label<'a>(key: &'a str, name: &str) -> Option<&'a str> {
    let pat = format!("{name}=\"");
    let at = key.find(&pat)? + pat.len();
    key[at..].split('"').next()
}

/// The value of the series named `name` whose labels include all of `with`.
fn value(run: &BTreeMap<String, f64>, name: &str, with: &[(&str, &str)]) -> f64 {
    run.iter()
        .filter(|(k, _)| name_of(k) == name && with.iter().all(|(l, v)| label(k, l) == Some(*v)))
        .map(|(_, v)| *v)
        .sum()
}

const PERIOD: usize = 15;
/// Minutes of samples after the last run: its values stay on the Pushgateway, and no run
/// pushes again.
const TAIL: usize = 50;

/// promtool's input series: run k's values from minute 15k, one sample a minute, a series
/// missing from a run missing then; `push_time_seconds` and `prober_run_timestamp_seconds` (wall
/// clock times of the real runs) moved onto the test's clock, where run k finished at 15k min.
fn input_series(runs: &[BTreeMap<String, f64>]) -> String {
    let keys: BTreeSet<&String> = runs.iter().flat_map(BTreeMap::keys).collect();
    let minutes = runs.len() * PERIOD + TAIL;
    let mut out = String::new();
    for key in keys {
        let mut values = Vec::with_capacity(minutes);
        for m in 0..minutes {
            let k = (m / PERIOD).min(runs.len() - 1);
            let v = match name_of(key) {
                "push_time_seconds" | "prober_run_timestamp_seconds" => {
                    Some((k * PERIOD * 60).to_string())
                }
                _ => runs[k].get(key).map(f64::to_string),
            };
            values.push(v.unwrap_or_else(|| "_".into()));
        }
        let _ = writeln!(
            out,
            "      - series: '{key}'\n        values: '{}'",
            values.join(" ")
        );
    }
    out
}

/// `{{ $labels.x }}`, `{{ $value }}` and `{{ $value | humanizeDuration }}` of a rule's
/// annotation, as Prometheus renders them for these values.
fn render(template: &str, labels: &BTreeMap<&str, String>, value: f64) -> String {
    let mut out = template.to_string();
    for (k, v) in labels {
        out = out.replace(&format!("{{{{ $labels.{k} }}}}"), v);
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let secs = value as u64;
    let human = match (secs / 3600, secs % 3600 / 60, secs % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m {s}s"),
        (h, m, s) => format!("{h}h {m}m {s}s"),
    };
    out.replace("{{ $value | humanizeDuration }}", &human)
        .replace("{{ $value }}", &value.to_string())
}

/// One expected alert: its rule's labels with `labels`, and its annotations rendered.
fn alert(rule: &Value, labels: &[(&str, &str)], value: f64) -> String {
    let mut all: BTreeMap<&str, String> =
        labels.iter().map(|(k, v)| (*k, (*v).to_string())).collect();
    for (k, v) in rule["labels"].as_object().unwrap() {
        all.insert(k, v.as_str().unwrap().to_string());
    }
    let mut out = String::from("          - exp_labels:\n");
    for (k, v) in &all {
        let _ = writeln!(
            out,
            "              {k}: {}",
            serde_json::to_string(v).unwrap()
        );
    }
    out.push_str("            exp_annotations:\n");
    for (k, v) in rule["annotations"].as_object().unwrap() {
        let text = render(v.as_str().unwrap(), &all, value);
        let _ = writeln!(
            out,
            "              {k}: {}",
            serde_json::to_string(&text).unwrap()
        );
    }
    out
}

/// An `alert_rule_test` of `name` at minute `at`, expecting `alerts` (none: not firing).
fn expect(name: &str, at: usize, alerts: &[String]) -> String {
    let mut out = format!("      - eval_time: {at}m\n        alertname: {name}\n");
    if alerts.is_empty() {
        out.push_str("        exp_alerts: []\n");
    } else {
        out.push_str("        exp_alerts:\n");
        for a in alerts {
            out.push_str(a);
        }
    }
    out
}

/// A copy of `inventory` where node `node`'s pod agent cannot start: its exec prefix runs
/// `false`. The run reports that agent missing, as a pod that never became ready.
fn without_an_agent(inventory: &Path, node: &str, dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(inventory).unwrap();
    let mut inv: Value = serde_saphyr::from_str(&text).unwrap();
    let n = inv["nodes"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|n| n["name"] == node)
        .unwrap();
    n["agents"]["pod"]["exec"] = serde_json::json!(["false"]);
    let p = dir.join("missing-agent.json");
    std::fs::write(&p, serde_json::to_string(&inv).unwrap()).unwrap();
    p
}

type Run = BTreeMap<String, f64>;

/// The four runs the lab pushed: healthy, one agent missing, the flannel-8472 firewall gap, n3
/// cut off.
struct Pushed {
    h: Run,
    m: Run,
    b: Run,
    p: Run,
}

impl Pushed {
    /// A healthy lab, then the same lab with one agent that cannot start; the flannel-8472
    /// incident (a firewall gap); n3 losing every frame (a partition).
    fn capture(gw: &Pushgateway, dir: &Path) -> Self {
        let state = StateDir::new("alerts");
        let (h, m) = {
            let l = Lab::up("tmoh", "tests/scenarios/healthy.yaml", &state);
            let h = push_and_scrape(gw, &l.inventory);
            let m = push_and_scrape(gw, &without_an_agent(&l.inventory, "n2", dir));
            (h, m)
        };
        let b = {
            let l = Lab::up("tmob", "tests/scenarios/flannel-8472.yaml", &state);
            push_and_scrape(gw, &l.inventory)
        };
        let p = {
            let l = Lab::up("tmop", "tests/scenarios/faults/loss.yaml", &state);
            push_and_scrape(gw, &l.inventory)
        };
        Self {
            h: series(&h),
            m: series(&m),
            b: series(&b),
            p: series(&p),
        }
    }

    /// Runs every 15 minutes: healthy twice, an agent missing, healthy, the gap three times,
    /// the partition; then nothing more is pushed.
    fn timeline(&self) -> [Run; 8] {
        [
            &self.h, &self.h, &self.m, &self.h, &self.b, &self.b, &self.b, &self.p,
        ]
        .map(Clone::clone)
    }

    /// Every metric name the runs pushed.
    fn names(&self) -> BTreeSet<String> {
        [&self.h, &self.m, &self.b, &self.p]
            .into_iter()
            .flat_map(BTreeMap::keys)
            .map(|k| name_of(k).to_string())
            .collect()
    }
}

fn errors(r: &Run, kind: &str) -> f64 {
    value(
        r,
        "prober_findings",
        &[("kind", kind), ("severity", "error")],
    )
}

/// Probes of `path` that ran and failed.
fn failed(r: &Run, path: &str) -> f64 {
    r.iter()
        .filter(|(k, _)| {
            name_of(k) == "prober_probes"
                && label(k, "path") == Some(path)
                && !matches!(label(k, "outcome"), Some("ok" | "unknown"))
        })
        .map(|(_, v)| *v)
        .sum()
}

fn rule(rules: &Value, name: &str) -> Value {
    rules["groups"][0]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["alert"] == name)
        .unwrap_or_else(|| panic!("no rule {name}"))
        .clone()
}

const JOB: (&str, &str) = ("job", "prober");

/// Five minutes after run `run` is pushed.
fn at(run: usize) -> usize {
    run * PERIOD + 5
}

/// A new error finding: when its kind's count goes up, until the next run.
fn new_finding_tests(x: &Pushed, rules: &Value) -> String {
    let new = rule(rules, "ProberNewErrorFinding");
    let new_kinds = |now: &Run, before: &Run| {
        let kinds: BTreeSet<&str> = now
            .keys()
            .filter(|k| name_of(k) == "prober_findings")
            .filter_map(|k| label(k, "kind"))
            .collect();
        kinds
            .into_iter()
            .filter(|k| errors(now, k) > errors(before, k))
            .map(|k| alert(&new, &[JOB, ("kind", k)], errors(now, k)))
            .collect::<Vec<_>>()
    };
    assert!(errors(&x.b, "firewall-gap") >= 1.0 && errors(&x.h, "firewall-gap") == 0.0);
    assert!(errors(&x.p, "partition") >= 1.0 && errors(&x.b, "partition") == 0.0);
    let gap = new_kinds(&x.b, &x.h);
    assert!(gap.iter().any(|a| a.contains("firewall-gap")), "{gap:?}");
    let cut = new_kinds(&x.p, &x.b);
    assert!(cut.iter().any(|a| a.contains("partition")), "{cut:?}");
    [
        expect("ProberNewErrorFinding", at(1), &[]),
        expect("ProberNewErrorFinding", at(4), &gap),
        expect("ProberNewErrorFinding", at(5), &[]),
        expect("ProberNewErrorFinding", at(7), &cut),
    ]
    .concat()
}

/// A node cut off: n3, which loses every frame, named with its failed probes.
fn cutoff_tests(x: &Pushed, rules: &Value) -> String {
    let (node, most) =
        x.p.iter()
            .filter(|(k, _)| name_of(k) == "prober_node_failed_probes")
            .map(|(k, v)| (label(k, "node").unwrap(), *v))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap();
    assert_eq!(node, "n3");
    let cutoff = rule(rules, "ProberNodeCutOff");
    [
        expect("ProberNodeCutOff", at(6), &[]),
        expect(
            "ProberNodeCutOff",
            at(7),
            &[alert(&cutoff, &[JOB, ("node", "n3")], most)],
        ),
    ]
    .concat()
}

/// Agents missing: while the run that missed one is the last.
fn missing_tests(x: &Pushed, rules: &Value) -> String {
    let missing = value(&x.m, "prober_agents", &[("state", "missing")]);
    assert!(missing >= 1.0, "{:?}", x.m);
    let rule = rule(rules, "ProberAgentsMissing");
    [
        expect("ProberAgentsMissing", at(1), &[]),
        expect(
            "ProberAgentsMissing",
            at(2),
            &[alert(&rule, &[JOB, ("state", "missing")], missing)],
        ),
        expect("ProberAgentsMissing", at(3), &[]),
    ]
    .concat()
}

/// The runs not completing: the last push (run 7) 25 minutes ago is fine, 40 is not.
fn stale_tests(rules: &Value) -> String {
    let last = 7 * PERIOD;
    let rule = rule(rules, "ProberRunNotCompleting");
    [
        expect("ProberRunNotCompleting", at(6), &[]),
        expect("ProberRunNotCompleting", last + 25, &[]),
        expect(
            "ProberRunNotCompleting",
            last + 40,
            &[alert(&rule, &[JOB], 2400.0)],
        ),
    ]
    .concat()
}

/// Failed probes rising: the gap's path classes, once the rise held through three runs.
fn rising_tests(x: &Pushed, rules: &Value) -> String {
    let rising = rule(rules, "ProberFailedProbesRising");
    let paths: BTreeSet<&str> =
        x.b.keys()
            .filter(|k| name_of(k) == "prober_probes")
            .filter_map(|k| label(k, "path"))
            .collect();
    // An hour before runs 4 to 6 are runs 0 to 2: healthy, healthy, an agent missing.
    let risen: Vec<String> = paths
        .iter()
        .filter(|path| failed(&x.b, path) > failed(&x.h, path).max(failed(&x.m, path)))
        .map(|path| alert(&rising, &[JOB, ("path", path)], failed(&x.b, path)))
        .collect();
    assert!(risen.iter().any(|a| a.contains("pod-to-pod")), "{risen:?}");
    [
        expect("ProberFailedProbesRising", at(4), &[]),
        expect("ProberFailedProbesRising", at(5), &[]),
        expect("ProberFailedProbesRising", at(6), &risen),
    ]
    .concat()
}

/// The promtool unit test file for `rules_file` over the runs' timeline.
fn unit_file(x: &Pushed, rules: &Value, rules_file: &str) -> String {
    let tests = [
        new_finding_tests(x, rules),
        cutoff_tests(x, rules),
        missing_tests(x, rules),
        stale_tests(rules),
        rising_tests(x, rules),
    ]
    .concat();
    format!(
        "rule_files:\n  - {rules_file}\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n{}    alert_rule_test:\n{tests}",
        input_series(&x.timeline()),
    )
}

/// Every name the rules and the dashboard select is one the runs pushed, and each of the
/// series the issue names is selected by something.
fn check_names(exprs: &[(String, String)], pushed: &BTreeSet<String>) {
    assert_eq!(unpushed(exprs, pushed), Vec::<String>::new(), "{pushed:?}");
    let queries = dashboard_queries(&dashboard());
    assert_eq!(
        unpushed(&queries, pushed),
        Vec::<String>::new(),
        "{pushed:?}"
    );
    for want in [
        "prober_findings",
        "prober_probes",
        "prober_probe_latency_seconds_bucket",
        "prober_agents",
        "prober_node_failed_probes",
        "push_time_seconds",
    ] {
        let used = exprs
            .iter()
            .chain(&queries)
            .any(|(_, e)| metric_names(e).contains(want));
        assert!(used, "nothing selects {want}");
    }
}

/// A rule whose metric name drifts from what is pushed: the name check and promtool's unit
/// tests both fail, for every name the rules select.
fn check_drift(x: &Pushed, exprs: &[(String, String)], promtool_bin: &Path, dir: &Path) {
    let pushed = x.names();
    let source = std::fs::read_to_string(monitoring().join("prober.rules.yaml")).unwrap();
    let names: BTreeSet<String> = exprs.iter().flat_map(|(_, e)| metric_names(e)).collect();
    for name in names {
        let drifted_name = format!("{name}_drifted");
        let drifted = source.replace(&format!("{name}{{"), &format!("{drifted_name}{{"));
        assert_ne!(drifted, source, "{name} is not selected with labels");
        let drifted_rules: Value = serde_saphyr::from_str(&drifted).unwrap();
        assert!(
            unpushed(&rule_exprs(&drifted_rules), &pushed)
                .iter()
                .any(|u| u.ends_with(&drifted_name)),
            "{name}"
        );
        std::fs::write(dir.join("drifted.rules.yaml"), &drifted).unwrap();
        // The expectations stay those of the shipped rules.
        let unit = unit_file(x, &rules(), "drifted.rules.yaml");
        std::fs::write(dir.join("drifted.test.yaml"), unit).unwrap();
        let out = promtool(promtool_bin, &["test", "rules", "drifted.test.yaml"], dir);
        assert!(
            !out.status.success(),
            "promtool's tests still pass with {name} renamed {drifted_name}"
        );
    }
}

#[test]
fn alerts_fire_on_what_lab_runs_pushed() {
    if !require_root() {
        return;
    }
    let (Some(promtool_bin), Some(gw_bin)) = (
        tool("promtool", SCHED_DEPS),
        tool("prometheus-pushgateway", SCHED_DEPS),
    ) else {
        return;
    };
    let gw = Pushgateway::start(&gw_bin);
    let dir = tmp("prober-alerts-");
    let x = Pushed::capture(&gw, dir.path());
    let rules = rules();
    let exprs = rule_exprs(&rules);
    check_names(&exprs, &x.names());
    let shipped = monitoring().join("prober.rules.yaml");
    let unit = unit_file(&x, &rules, &shipped.display().to_string());
    promtool_passes(
        &promtool_bin,
        dir.path(),
        ("alerts.test.yaml", &unit),
        &["test", "rules", "alerts.test.yaml"],
    );
    check_drift(&x, &exprs, &promtool_bin, dir.path());
}
