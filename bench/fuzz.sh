#!/usr/bin/env bash
# The parsers' property tests, run long (prints, never asserts beyond the tests themselves):
# inventories (and the plans a valid one makes), scenarios (and the commands a valid one builds),
# saved reports (and their table), the agents' result lines, plans, kubeconfigs and the agent's
# other inputs. `scripts/test` runs each with a few hundred cases; this runs PROPTEST_CASES of
# each (default 20,000). Needs no root: the tests that bind sockets use loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
export PROPTEST_CASES=${PROPTEST_CASES:-20000}
echo "== $PROPTEST_CASES cases per property"
start=$(date +%s)
cargo test -q --release -p prober --test parser_props
cargo test -q --release -p probe-proto --test plan_props
cargo test -q --release -p probe-pod --test parser_props
echo "wall time: $(($(date +%s) - start)) s"
