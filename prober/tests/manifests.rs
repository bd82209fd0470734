//! `prober manifests` prints real Kubernetes objects, and exactly what `deploy/base` holds.

// A test: it reads fixtures and the clock freely (clippy.toml bans them in shipped code).
#![allow(clippy::disallowed_methods)]

mod common;

use common::{KUBE_DEPS, prober, root, tool};
use test_kit::manifests::{docs, validate_strictly};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule,
};

#[test]
fn manifests_are_kubernetes_objects_and_match_deploy() {
    let out = std::process::Command::new(prober())
        .arg("manifests")
        .output()
        .unwrap();
    assert!(out.status.success());
    let printed = docs(&String::from_utf8_lossy(&out.stdout));
    let kinds: Vec<&str> = printed
        .iter()
        .map(|d| d["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "Namespace",
            "ServiceAccount",
            "NetworkPolicy",
            "DaemonSet",
            "DaemonSet"
        ]
    );
    let _: Namespace = serde_json::from_value(printed[0].clone()).unwrap();
    let sa: ServiceAccount = serde_json::from_value(printed[1].clone()).unwrap();
    assert_eq!(sa.automount_service_account_token, Some(false));
    // The agents' allow policy: every ingress and egress of the pod agents, and only theirs.
    let np: NetworkPolicy = serde_json::from_value(printed[2].clone()).unwrap();
    assert_eq!(np.metadata.name.as_deref(), Some("prober-agents"));
    assert_eq!(np.metadata.namespace.as_deref(), Some("prober-system"));
    let spec = np.spec.unwrap();
    let selected = spec.pod_selector.unwrap().match_labels.unwrap();
    assert_eq!(selected["app.kubernetes.io/component"], "pod-agent");
    assert_eq!(
        spec.policy_types.as_deref(),
        Some(&["Ingress".to_string(), "Egress".to_string()][..])
    );
    assert_eq!(spec.ingress.unwrap(), [NetworkPolicyIngressRule::default()]);
    assert_eq!(spec.egress.unwrap(), [NetworkPolicyEgressRule::default()]);
    for d in &printed[3..] {
        let ds: DaemonSet = serde_json::from_value(d.clone()).unwrap();
        let pod = ds.spec.unwrap().template.spec.unwrap();
        assert_eq!(
            pod.automount_service_account_token,
            Some(false),
            "agents never call the API"
        );
        assert_eq!(pod.containers[0].args.as_ref().unwrap()[0], "serve");
    }
    let deployed = docs(&std::fs::read_to_string(root().join("deploy/base/agents.yaml")).unwrap());
    assert_eq!(
        printed, deployed,
        "deploy/base/agents.yaml drifted from `prober manifests`: regenerate it with `prober manifests > deploy/base/agents.yaml`"
    );
    let kustomization =
        std::fs::read_to_string(root().join("deploy/base/kustomization.yaml")).unwrap();
    assert!(kustomization.contains("agents.yaml") && kustomization.contains("rbac.yaml"));
    for doc in docs(&std::fs::read_to_string(root().join("deploy/base/rbac.yaml")).unwrap()) {
        assert!(
            doc["kind"].is_string() && doc["metadata"]["name"].is_string(),
            "{doc}"
        );
    }
}

#[test]
fn namespace_and_image_flags() {
    let out = std::process::Command::new(prober())
        .args([
            "manifests",
            "-n",
            "probing",
            "--create-namespace",
            "--image",
            "registry.local/prober:dev",
        ])
        .output()
        .unwrap();
    let printed = docs(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(printed[0]["metadata"]["name"], "probing");
    assert!(
        printed[1..]
            .iter()
            .all(|d| d["metadata"]["namespace"] == "probing")
    );
    assert_eq!(
        printed[3]["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.local/prober:dev"
    );
}

/// `manifests -n NS` never relabels a namespace prober does not own: kube-system (or any
/// namespace named without `--create-namespace`) gets no Namespace object, only a comment saying
/// what labels it needs; prober-system, and a namespace the operator asks prober to create, do.
#[test]
fn manifests_never_relabel_a_namespace_prober_does_not_own() {
    let manifests = |args: &[&str]| {
        std::process::Command::new(prober())
            .arg("manifests")
            .args(args)
            .output()
            .unwrap()
    };
    let kinds = |out: &std::process::Output| -> Vec<String> {
        docs(&String::from_utf8_lossy(&out.stdout))
            .iter()
            .map(|d| d["kind"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let out = manifests(&["-n", "kube-system"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        !kinds(&out).contains(&"Namespace".to_string()),
        "kube-system would be relabelled:\n{printed}"
    );
    assert!(
        docs(&printed)
            .iter()
            .all(|d| d["metadata"]["namespace"] == "kube-system"),
        "{printed}"
    );
    assert!(
        printed.lines().any(|l| l.starts_with('#')
            && l.contains("pod-security.kubernetes.io/enforce")
            && l.contains("privileged")),
        "the labels the namespace needs are said in a comment:\n{printed}"
    );
    let out = manifests(&["-n", "monitoring"]);
    assert!(!kinds(&out).contains(&"Namespace".to_string()));
    // Its own namespace, and one the operator asks it to create, come with their labels.
    let out = manifests(&[]);
    assert_eq!(kinds(&out)[0], "Namespace");
    let out = manifests(&["-n", "probing", "--create-namespace"]);
    assert_eq!(kinds(&out)[0], "Namespace");
    let out = manifests(&["-n", "kube-system", "--create-namespace"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "the cluster's own namespace is not prober's to create"
    );
}

/// `manifests --help` names the RBAC and `--rbac` prints exactly deploy/base's (what a 403 tells
/// the operator to bind).
#[test]
fn the_rbac_is_printed_and_named_in_help() {
    let help = std::process::Command::new(prober())
        .args(["manifests", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--rbac") && help.contains("RBAC"), "{help}");
    let out = std::process::Command::new(prober())
        .args(["manifests", "--rbac"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let want = std::fs::read_to_string(root().join("deploy/base/rbac.yaml")).unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(printed, want);
    assert!(printed.contains("kind: ClusterRole"), "{printed}");
}

/// The small mistakes of a first hour, each refused with exit 2 and what would have been right:
/// a node filter naming no node lists the nodes, a concurrency of 0, a lab that does not exist.
#[test]
fn small_mistakes_are_refused_saying_what_is_valid() {
    let dir = tempfile::Builder::new()
        .prefix("prober-small-")
        .tempdir()
        .unwrap();
    let inv = dir.path().join("inventory.yaml");
    std::fs::write(
        &inv,
        "cluster:\n  cni: flannel\n  podCIDR: 10.244.0.0/16\n  serviceCIDR: 10.96.0.0/12\n  \
         api: {service: \"10.96.0.1:443\", endpoints: [\"192.168.56.10:6443\"]}\nnodes:\n\
         - {name: n1, address: 192.168.56.10, agents: {}}\n\
         - {name: n2, address: 192.168.56.11, agents: {}}\n",
    )
    .unwrap();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(prober())
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let inv = inv.to_str().unwrap();
    let (code, err) = run(&["matrix", "--inventory", inv, "--nodes", "n9"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("n9") && err.contains("its nodes: n1, n2"),
        "{err}"
    );
    let (code, err) = run(&["matrix", "--inventory", inv, "--concurrency", "0"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--concurrency"), "{err}");
    let state = dir.path().join("labs");
    let (code, err) = run(&[
        "lab",
        "down",
        "nosuch",
        "--state-dir",
        state.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    // In words, not Rust's debug form (`["nosuch"]`).
    assert!(err.contains("no lab named nosuch (labs here: "), "{err}");
}

#[test]
fn without_a_cluster_matrix_fails_fast_and_clearly() {
    let tmp_dir = tempfile::Builder::new()
        .prefix("prober-kc-")
        .tempdir()
        .unwrap();
    let dir = tmp_dir.path().to_path_buf();
    std::fs::create_dir_all(&dir).unwrap();
    let kc = dir.join("kubeconfig");
    // Loopback port 1: nothing listens; the connection is refused at once.
    std::fs::write(&kc, "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"https://127.0.0.1:1\"}\nusers:\n- name: u\n  user: {token: abc}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n").unwrap();
    let started = std::time::Instant::now();
    let out = std::process::Command::new(prober())
        .args(["matrix", "--kubeconfig"])
        .arg(&kc)
        .output()
        .unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("https://127.0.0.1:1") && err.contains(kc.to_str().unwrap()),
        "names the server and the kubeconfig: {err}"
    );
    assert!(
        err.contains("the cluster was not reached: connection refused"),
        "refused, in words: {err}"
    );
    assert!(!err.contains("client error (Connect)"), "{err}");

    // Something answers on the address, but it is not a TLS server: reached, TLS failed.
    let plain = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = plain.local_addr().unwrap().port();
    let answering = std::thread::spawn(move || {
        use std::io::{Read, Write};
        if let Ok((mut c, _)) = plain.accept() {
            let mut buf = [0u8; 512];
            let _ = c.read(&mut buf);
            let _ = c.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n");
        }
    });
    let kc_tls = dir.join("kubeconfig-plain");
    std::fs::write(
        &kc_tls,
        std::fs::read_to_string(&kc)
            .unwrap()
            .replace("127.0.0.1:1", &format!("127.0.0.1:{port}")),
    )
    .unwrap();
    let out = std::process::Command::new(prober())
        .args(["matrix", "--kubeconfig"])
        .arg(&kc_tls)
        .output()
        .unwrap();
    answering.join().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the cluster was reached, but TLS failed"),
        "{err}"
    );

    // No kubeconfig at all: the ways forward, not the library's text alone.
    let out = std::process::Command::new(prober())
        .arg("matrix")
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("HOME", &dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no kubeconfig here")
            && err.contains("--kubeconfig FILE")
            && err.contains("--inventory FILE")
            && err.contains("prober lab up"),
        "{err}"
    );
    let missing = std::process::Command::new(prober())
        .args(["discover", "--kubeconfig", "/nonexistent/kubeconfig"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/kubeconfig"));
}

#[test]
fn installed_as_kubectl_probe_it_is_a_kubectl_plugin() {
    let tmp_dir = tempfile::Builder::new()
        .prefix("prober-plugin-")
        .tempdir()
        .unwrap();
    let dir = tmp_dir.path().to_path_buf();
    std::fs::create_dir_all(&dir).unwrap();
    let plugin = dir.join("kubectl-probe");
    let _ = std::fs::remove_file(&plugin);
    std::os::unix::fs::symlink(prober(), &plugin).unwrap();
    let out = std::process::Command::new(&plugin)
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && help.contains("Usage: kubectl probe"),
        "{help}"
    );
    let manifests = std::process::Command::new(&plugin)
        .arg("manifests")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&manifests.stdout).contains("kind: DaemonSet"));
}

#[test]
fn deploy_base_validates_strictly_against_kubernetes_1_30_to_1_34() {
    let (Some(_), Some(validator)) = (
        tool("kubectl", KUBE_DEPS),
        tool("kubernetes-validate", KUBE_DEPS),
    ) else {
        return;
    };
    let dir = tempfile::Builder::new()
        .prefix("prober-kustomize-")
        .tempdir()
        .unwrap();
    let out = std::process::Command::new("kubectl")
        .args(["kustomize"])
        .arg(root().join("deploy/base"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl kustomize deploy/base: {}",
        common::text(&out)
    );
    let built = dir.path().join("base.yaml");
    std::fs::write(&built, &out.stdout).unwrap();
    let kinds: Vec<String> = docs(&String::from_utf8_lossy(&out.stdout))
        .iter()
        .map(|d| d["kind"].as_str().unwrap_or_default().to_string())
        .collect();
    for k in [
        "Namespace",
        "DaemonSet",
        "ServiceAccount",
        "NetworkPolicy",
        "ClusterRole",
        "Role",
        "RoleBinding",
    ] {
        assert!(kinds.iter().any(|x| x == k), "no {k} in {kinds:?}");
    }
    let mut files = vec![built.clone()];
    let mut optional: Vec<_> = std::fs::read_dir(root().join("deploy/base/optional"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    optional.sort();
    files.extend(optional);
    validate_strictly(&validator, &files, "deploy/base");
}

#[test]
fn the_agents_namespace_admits_them_and_they_stay_on_linux() {
    let deployed = docs(&std::fs::read_to_string(root().join("deploy/base/agents.yaml")).unwrap());
    assert_eq!(
        deployed[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "privileged"
    );
    for ds in deployed.iter().filter(|d| d["kind"] == "DaemonSet") {
        let pod = &ds["spec"]["template"]["spec"];
        assert_eq!(pod["nodeSelector"]["kubernetes.io/os"], "linux");
        assert!(
            pod.get("priorityClassName").is_none(),
            "system-node-critical only in kube-system"
        );
        assert_eq!(
            pod["containers"][0]["readinessProbe"]["httpGet"]["path"],
            "/healthz"
        );
    }
}

/// A reader that goes away at once (`prober manifests | head -0`) ends the command quietly: no
/// panic, no message, status 0.
#[test]
fn a_closed_stdout_ends_quietly() {
    for args in [&["manifests"][..], &["manifests", "--rbac"][..]] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = std::process::Command::new(prober())
            .args(args)
            .stdout(writer)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.is_empty(), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    }
}

/// `kubectl kustomize` of a kustomization holding deploy/base and `component`, from a
/// directory under the system's temporary directory (kustomize refuses absolute paths).
fn kustomize_with(component: &str) -> String {
    let dir = tempfile::Builder::new()
        .prefix("prober-component-")
        .tempdir()
        .unwrap();
    let up = "../".repeat(dir.path().components().count() - 1);
    let rel = |p: &str| {
        format!(
            "{up}{}",
            root().join(p).display().to_string().trim_start_matches('/')
        )
    };
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        format!(
            "resources: [{}]\ncomponents: [{}]\n",
            rel("deploy/base"),
            rel(&format!("deploy/components/{component}"))
        ),
    )
    .unwrap();
    let out = std::process::Command::new("kubectl")
        .arg("kustomize")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl kustomize with {component}: {}",
        common::text(&out)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn each_distributions_component_mounts_what_a_run_there_mounts() {
    if tool("kubectl", KUBE_DEPS).is_none() || tool("kubernetes-validate", KUBE_DEPS).is_none() {
        return;
    }
    let mut components: Vec<String> = std::fs::read_dir(root().join("deploy/components"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    components.sort();
    assert_eq!(components, ["eks", "gke", "k3s", "kubeadm", "rke2"]);
    for d in &components {
        let out = std::process::Command::new(prober())
            .args(["manifests", "--distribution", d])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", common::text(&out));
        let printed = docs(&String::from_utf8_lossy(&out.stdout));
        let rendered = kustomize_with(d);
        let agents: Vec<serde_json::Value> = docs(&rendered)
            .into_iter()
            .filter(|o| {
                matches!(
                    o["kind"].as_str(),
                    Some("Namespace" | "DaemonSet" | "NetworkPolicy")
                ) || o["metadata"]["name"] == "prober-agent"
            })
            .collect();
        let key = |o: &serde_json::Value| format!("{}/{}", o["kind"], o["metadata"]["name"]);
        let mut a = printed.clone();
        let mut b = agents.clone();
        a.sort_by_key(key);
        b.sort_by_key(key);
        assert_eq!(
            a, b,
            "deploy/components/{d} differs from `prober manifests --distribution {d}`"
        );
        // What a run that discovered this distribution creates mounts the same host paths.
        let files = prober::runtime::kube::discover::nodefiles::node_files(
            d,
            prober::inventory::Cni::Other,
        );
        let host = a
            .iter()
            .find(|o| o["metadata"]["name"] == "probe-host")
            .unwrap();
        let paths: Vec<&str> = host["spec"]["template"]["spec"]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["hostPath"]["path"].as_str().unwrap())
            .collect();
        assert_eq!(
            paths,
            [
                "/etc/resolv.conf",
                files.cni_conf_dir.to_str().unwrap(),
                files.kubelet_kubeconfig.to_str().unwrap()
            ]
        );
        let file =
            std::env::temp_dir().join(format!("prober-component-{d}-{}.yaml", std::process::id()));
        std::fs::write(&file, &rendered).unwrap();
        let valid = std::process::Command::new("kubernetes-validate")
            .args(["--strict", "--quiet", "-k", "1.34.0"])
            .arg(&file)
            .output()
            .unwrap();
        let _ = std::fs::remove_file(&file);
        assert!(valid.status.success(), "{d}: {}", common::text(&valid));
    }
}
