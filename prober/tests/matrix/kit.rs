//! A lab per test, torn down on drop; `prober matrix` over its inventory; the report schema.

use crate::common::{agent, lab_name, prober, root, text};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// A lab for one test, torn down on drop (pass, fail or panic).
pub(crate) struct TestLab {
    pub(crate) name: String,
    pub(crate) state: PathBuf,
}

impl TestLab {
    /// A lab named `base` after this run's tag (`common::lab_name`).
    pub(crate) fn up(base: &str, scenario: Option<&str>) -> Self {
        let name = lab_name(base);
        let state =
            std::env::temp_dir().join(format!("prober-matrix-test-{name}-{}", std::process::id()));
        let mut cmd = Command::new(prober());
        cmd.args(["lab", "up", "--name", &name, "--state-dir"])
            .arg(&state)
            .arg("--agent-bin")
            .arg(agent());
        if let Some(s) = scenario {
            cmd.arg("--scenario").arg(root().join(s));
        }
        let out = cmd.output().unwrap();
        let lab = Self { name, state };
        assert!(out.status.success(), "{}", text(&out));
        lab
    }

    pub(crate) fn inventory(&self) -> PathBuf {
        self.state
            .join(format!("plab-{}/inventory.yaml", self.name))
    }
}

pub(crate) fn matrix(inventory: &Path, args: &[&str]) -> Output {
    Command::new(prober())
        .args(["matrix", "--inventory"])
        .arg(inventory)
        .arg("--agent-bin")
        .arg(agent())
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

impl Drop for TestLab {
    fn drop(&mut self) {
        let _ = Command::new(prober())
            .args(["lab", "down", &self.name, "--state-dir"])
            .arg(&self.state)
            .output();
        let _ = std::fs::remove_dir_all(&self.state);
    }
}

pub(crate) fn validate(report: &Value) {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("docs/report.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the documented schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(report)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .take(10)
        .collect();
    assert!(
        errors.is_empty(),
        "report does not match docs/report.schema.json:\n{}",
        errors.join("\n")
    );
}
