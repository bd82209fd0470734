//! Kubernetes API calls against a `tower_test` mock API server, one test binary by area:
//! the exact requests discovery makes on each distribution (`discover`) and the inventory it
//! builds from `kubectl get -o json`-shaped fixtures, compared to golden files (`flavours`); the
//! agents' lifecycle: create and clean up exactly what a run created (`apply`; its allow
//! policy through the API stand-in, `allow_policy`), wait, fail fast
//! and exec (`wait`); the RBAC of deploy/base checked against every request each mode makes
//! (`rbac`, `scheduled_rbac`); a healthy cluster of each distribution (`healthy`); and the
//! HTTPS proxy (`proxy`); bearer tokens that cannot be a header (`token`).

// A test: it reads fixtures and the clock freely (clippy.toml bans them in shipped code).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::needless_pass_by_value, clippy::too_many_lines)] // test fixtures built inline

#[path = "../common/mod.rs"]
mod common;

mod allow_policy;
mod apply;
mod discover;
mod flavours;
mod healthy;
mod proxy;
mod rbac;
mod scheduled_rbac;
mod token;
mod wait;
