//! The scheduled mode, one test binary by area: the remembered report and Events against a
//! `tower_test` mock API server, the exact requests (`memory`); `prober diff`, `-o prometheus`
//! checked by `promtool` and pushed to a real Pushgateway on loopback, `-o html` rendered by
//! headless Chromium, on synthetic reports of any size and on lab reports where a lab can be
//! built (root, under the netns lock) (`exports`); `manifests --scheduled` against
//! `kubectl kustomize` (`manifests`); the synthetic reports and the CLI (`kit`).

#[path = "../common/mod.rs"]
mod common;

mod exports;
mod kit;
mod manifests;
mod memory;
