//! `prober manifests`: the objects the prober applies to run its agents.

use prober::runtime::kube::manifests::{self, AgentSpec, DEFAULT_IMAGE, DEFAULT_NAMESPACE};

#[derive(clap::Args)]
pub struct Args {
    /// Namespace of the agents.
    #[arg(long, short = 'n', env = "PROBER_NAMESPACE", default_value = DEFAULT_NAMESPACE)]
    pub namespace: String,
    /// Agent image.
    #[arg(long, env = "PROBER_IMAGE", default_value = DEFAULT_IMAGE)]
    pub image: String,
}

pub fn run(args: &Args) -> u8 {
    let spec = AgentSpec {
        namespace: args.namespace.clone(),
        image: args.image.clone(),
        ..AgentSpec::default()
    };
    print!("{}", manifests::yaml(&spec));
    prober::report::EXIT_OK
}
