//! `prober manifests`: the objects the prober applies to run its agents.

use super::out::out;
use prober::runtime::kube::manifests::{self, AgentSpec, DEFAULT_IMAGE, DEFAULT_NAMESPACE};

#[derive(clap::Args)]
pub struct Args {
    /// Namespace of the agents.
    #[arg(long, short = 'n', env = "PROBER_NAMESPACE", default_value = DEFAULT_NAMESPACE)]
    pub namespace: String,
    /// Agent image.
    #[arg(long, env = "PROBER_IMAGE", default_value = DEFAULT_IMAGE)]
    pub image: String,
    /// Mount the node's files the node checks read (the CNI configuration, the kubelet's
    /// kubeconfig) where this distribution keeps them: kubeadm, k3s, rke2, eks or gke. Without
    /// it, only /etc/resolv.conf, as deploy/base (which must start on every distribution);
    /// `deploy/components/<distribution>` adds exactly what this adds.
    #[arg(long, value_parser = ["kubeadm", "k3s", "rke2", "eks", "gke"])]
    pub distribution: Option<String>,
    /// A Secret (in the agents' namespace) the kubelet pulls the image with; repeat for more.
    #[arg(
        long = "image-pull-secret",
        env = "PROBER_IMAGE_PULL_SECRETS",
        value_delimiter = ','
    )]
    pub image_pull_secrets: Vec<String>,
    /// Also print the Namespace (with the Pod Security labels the agents need) for a namespace
    /// other than prober-system that does not exist yet. Without it, only prober-system's is
    /// printed: applied to an existing namespace, it would relabel it.
    #[arg(long)]
    pub create_namespace: bool,
    /// Print the scheduled mode instead: exactly what `kubectl kustomize deploy/scheduled`
    /// renders (the agents, RBAC, and the `CronJob` running `matrix --use-existing --remember`).
    #[arg(long, conflicts_with_all = ["namespace", "image", "distribution", "image_pull_secrets", "create_namespace"])]
    pub scheduled: bool,
    /// Print the RBAC the one running `prober matrix` needs instead (deploy/base/rbac.yaml:
    /// read the cluster, create and exec into the agents; bind it to your user or a
    /// `ServiceAccount`). The agents themselves get no permissions.
    #[arg(long, conflicts_with_all = ["namespace", "image", "scheduled", "distribution", "image_pull_secrets", "create_namespace"])]
    pub rbac: bool,
}

/// The coordinator's RBAC, as deploy/base applies it.
const RBAC: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../deploy/base/rbac.yaml"
));

pub fn run(args: &Args) -> Result<u8, super::CliError> {
    if args.rbac {
        out!("{RBAC}")?;
        return Ok(prober::report::EXIT_OK);
    }
    if args.scheduled {
        let text =
            prober::runtime::kube::kustomize::render().map_err(super::CliError::Kustomize)?;
        out!("{text}")?;
        return Ok(prober::report::EXIT_OK);
    }
    if args.create_namespace && manifests::CLUSTER_NAMESPACES.contains(&args.namespace.as_str()) {
        return Err(super::CliError::Usage(format!(
            "--create-namespace: {} is the cluster's own namespace, not one prober creates",
            args.namespace
        )));
    }
    let spec = AgentSpec {
        namespace: args.namespace.clone(),
        image: args.image.clone(),
        node_files: args.distribution.as_deref().map(|d| {
            // The CNI only adds a path inside the CNI directory, which is mounted whole.
            prober::runtime::kube::discover::nodefiles::node_files(d, prober::inventory::Cni::Other)
        }),
        image_pull_secrets: args.image_pull_secrets.clone(),
        ..AgentSpec::default()
    };
    // Only a namespace prober owns gets its Namespace object: never relabel someone else's.
    if args.namespace == DEFAULT_NAMESPACE || args.create_namespace {
        out!("{}", manifests::yaml(&spec))?;
    } else {
        out!("{}", manifests::yaml_into_existing(&spec))?;
    }
    Ok(prober::report::EXIT_OK)
}
