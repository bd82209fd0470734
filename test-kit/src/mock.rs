//! The one in-process mock Kubernetes API (`tower_test`), for request-level unit tests: a
//! client whose every request is answered by a router (what it saw is returned), or by a
//! script of exact exchanges; canned answers; and the discovery fixtures under
//! prober/tests/fixtures/kube/FLAVOUR. Behaviour across a real connection is the stand-in's.

// Test helpers: a panic is how they fail a test, and a dropped answer is harmless.
#![allow(clippy::must_use_candidate, clippy::missing_panics_doc)]

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;

use http::{Method, Request, Response};
use http_body_util::BodyExt;
use kube::client::Body;
use serde_json::{Value, json};
/// One request the mock saw.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub uri: String,
    pub body: Value,
}

pub type Router = Box<dyn FnMut(&Seen) -> Response<Body> + Send>;

/// Serves every request with `router` until the client goes away; returns what it saw.
pub fn serve(router: Router) -> (kube::Client, tokio::task::JoinHandle<Vec<Seen>>) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(service, "default");
    let mut router = router;
    let task = tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Some((request, send)) = handle.next_request().await {
            let (parts, body) = request.into_parts();
            let bytes = body
                .collect()
                .await
                .map(http_body_util::Collected::to_bytes)
                .unwrap_or_default();
            let s = Seen {
                method: parts.method.to_string(),
                uri: parts.uri.to_string(),
                body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            };
            send.send_response(router(&s));
            seen.push(s);
        }
        seen
    });
    (client, task)
}

pub fn respond(code: u16, body: &Value) -> Response<Body> {
    Response::builder()
        .status(code)
        .body(Body::from(body.to_string().into_bytes()))
        .unwrap()
}

pub fn status(code: u16, reason: &str) -> Response<Body> {
    respond(
        code,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": if code < 300 { "Success" } else { "Failure" },
                "message": reason, "reason": reason, "code": code}),
    )
}

#[allow(clippy::needless_pass_by_value)] // lists are built inline at each call
pub fn list_of(kind: &str, items: Vec<Value>, version: &str) -> Value {
    json!({"apiVersion": "v1", "kind": kind, "metadata": {"resourceVersion": version}, "items": items})
}

pub fn fixture(flavour: &str, file: &str) -> Option<Vec<u8>> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../prober/tests/fixtures/kube")
        .join(flavour)
        .join(file);
    std::fs::read(p).ok()
}

pub fn fixture_json(flavour: &str, file: &str) -> Value {
    serde_json::from_slice(&fixture(flavour, file).unwrap()).unwrap()
}

/// `/path?&query` split into the path and its decoded query pairs.
pub fn split(uri: &str) -> (String, BTreeMap<String, String>) {
    let (path, query) = uri.split_once('?').unwrap_or((uri, ""));
    let q = query
        .split('&')
        .filter(|kv| !kv.is_empty())
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), decode(v)))
        .collect();
    (path.to_string(), q)
}

pub fn decode(s: &str) -> String {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            out.push(if b[i] == b'+' { b' ' } else { b[i] });
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

/// The network policy resources discovery reads, by plural.
const POLICY_PLURALS: [&str; 7] = [
    "networkpolicies",
    "adminnetworkpolicies",
    "baselineadminnetworkpolicies",
    "globalnetworkpolicies",
    "stagedglobalnetworkpolicies",
    "ciliumclusterwidenetworkpolicies",
    "ciliumnetworkpolicies",
];

/// A list of network policies (`/apis/G/V/[namespaces/NS/]PLURAL`): its group and plural.
pub fn policy_list(path: &str) -> Option<(String, String)> {
    let seg: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match seg.as_slice() {
        ["apis", group, _, plural] | ["apis", group, _, "namespaces", _, plural]
            if POLICY_PLURALS.contains(plural) =>
        {
            Some(((*group).to_string(), (*plural).to_string()))
        }
        _ => None,
    }
}

/// A policy list's answer: the flavour's `policy-PLURAL.GROUP.json`; else an empty list for
/// Kubernetes' own `NetworkPolicy` (every API server serves it) and 404 for the CRDs and
/// alpha APIs the cluster does not have.
fn policy_answer(flavour: &str, group: &str, plural: &str) -> Response<Body> {
    match fixture(flavour, &format!("policy-{plural}.{group}.json")) {
        Some(b) => Response::builder().status(200).body(Body::from(b)).unwrap(),
        None if group == "networking.k8s.io" => {
            respond(200, &list_of("NetworkPolicyList", Vec::new(), "1"))
        }
        None => status(404, "NotFound"),
    }
}

/// How a cluster shaped like `flavour` answers a discovery request: its fixture file, an empty
/// list for a workload namespace without one, and 404 for everything it does not have.
pub fn discovery_answer(flavour: &str, s: &Seen) -> Response<Body> {
    let (path, q) = split(&s.uri);
    if s.method == "GET"
        && let Some((group, plural)) = policy_list(&path)
    {
        return policy_answer(flavour, &group, &plural);
    }
    let sel = q.get("labelSelector").cloned().unwrap_or_default();
    let seg: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let file = match seg.as_slice() {
        ["api", "v1", "nodes"] => Some("nodes.json".to_string()),
        [
            "api",
            "v1",
            "namespaces",
            "default",
            "services",
            "kubernetes",
        ] => Some("svc-kubernetes.json".into()),
        ["api", "v1", "namespaces", "kube-system", "services"] if sel == "k8s-app=kube-dns" => {
            Some("svcs-k8s-app-kube-dns.json".into())
        }
        [
            "apis",
            "discovery.k8s.io",
            "v1",
            "namespaces",
            _,
            "endpointslices",
        ] => sel
            .strip_prefix("kubernetes.io/service-name=")
            .map(|svc| format!("slices-{svc}.json")),
        ["apis", "networking.k8s.io", "v1", "servicecidrs"] => Some("servicecidrs.json".into()),
        [
            "apis",
            "apps",
            "v1",
            "namespaces",
            ns,
            kind @ ("daemonsets" | "deployments"),
        ] => {
            let short = if *kind == "daemonsets" {
                "ds"
            } else {
                "deploy"
            };
            return fixture(flavour, &format!("{short}-{ns}.json")).map_or_else(
                || respond(200, &list_of("List", Vec::new(), "1")),
                |b| Response::builder().status(200).body(Body::from(b)).unwrap(),
            );
        }
        ["api", "v1", "namespaces", _, "configmaps", name] => Some(format!("cm-{name}.json")),
        ["apis", "cilium.io", "v2", "ciliumnodes"] => Some("ciliumnodes.json".into()),
        ["apis", "operator.tigera.io", "v1", "installations"] => Some("installations.json".into()),
        ["apis", "crd.projectcalico.org", "v1", plural] => Some(format!("{plural}.json")),
        ["api", "v1", "namespaces", _, "pods"] if sel == "k8s-app=calico-typha" => {
            Some("pods-calico-typha.json".into())
        }
        _ => None,
    };
    match file.and_then(|f| fixture(flavour, &f)) {
        Some(b) => Response::builder().status(200).body(Body::from(b)).unwrap(),
        None => status(404, "NotFound"),
    }
}

/// Echoes a created object back with a uid, as the API server does.
pub fn created(s: &Seen) -> Response<Body> {
    let mut b = s.body.clone();
    let name = b["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    b["metadata"]["uid"] = json!(format!("uid-{name}"));
    respond(201, &b)
}

/// One expected request of a script: method, URI, the answer's status and body (`"echo"`:
/// the request's own body, as the API server returns a created object).
pub type Exchange = (Method, &'static str, u16, Value);

/// Answers the requests in the order of `script`, failing on any other request, on one more,
/// or (when the client is dropped) on one fewer; returns the request bodies.
pub fn scripted(script: Vec<Exchange>) -> (kube::Client, tokio::task::JoinHandle<Vec<Value>>) {
    let expected = script.len();
    let mut left: VecDeque<Exchange> = script.into();
    let (client, task) = serve(Box::new(move |s| {
        let Some((method, uri, code, answer)) = left.pop_front() else {
            panic!("more requests than expected: {} {}", s.method, s.uri)
        };
        assert_eq!(
            (s.method.as_str(), s.uri.as_str()),
            (method.as_str(), uri),
            "unexpected request"
        );
        let answer = if answer == json!("echo") {
            s.body.clone()
        } else {
            answer
        };
        respond(code, &answer)
    }));
    let bodies = tokio::spawn(async move {
        let seen = task
            .await
            .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
        assert_eq!(
            seen.len(),
            expected,
            "fewer requests than expected: {seen:?}"
        );
        seen.into_iter().map(|s| s.body).collect()
    });
    (client, bodies)
}
