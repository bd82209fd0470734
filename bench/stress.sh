#!/usr/bin/env bash
# Verdicts under a starved machine (prints, never asserts): runs the loss and gap scenarios
# (`prober lab run`) N times each beside a CPU hog (one busy loop per core, plus one), and
# prints per scenario how many runs passed and how many failed, with the first failing line of
# each failure. A starved machine must not read as a lossy network: the counts show how often
# it still does.
# Usage: bench/stress.sh [N] [scenario.yaml ...]   (N defaults to 10)
# Needs root; each run builds and removes its own lab (prefix plab-stress-).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-10}
shift || true
SCENARIOS=("$@")
if [ ${#SCENARIOS[@]} -eq 0 ]; then
    SCENARIOS=(tests/scenarios/faults/loss.yaml tests/scenarios/faults/loss-only.yaml
        tests/scenarios/faults/loss-and-block.yaml tests/scenarios/flannel-8472.yaml)
fi
TARGET=${CARGO_TARGET_DIR:-$PWD/target}
cargo build -q -p prober -p probe-pod
PROBER=$TARGET/debug/prober
AGENT=$TARGET/debug/probe-pod
STATE=$(mktemp -d /tmp/prober-stress.XXXXXX)
HOGS=()
cleanup() {
    for p in "${HOGS[@]}"; do kill "$p" 2>/dev/null || true; done
    "$PROBER" lab down stress --state-dir "$STATE" >/dev/null 2>&1 || true
    rm -rf "$STATE"
}
trap cleanup EXIT
# The hog: one busy loop per core and one more, at the lab's own priority.
for _ in $(seq 0 "$(nproc)"); do
    (while :; do :; done) &
    HOGS+=($!)
done
printf '%-50s %5s %6s %6s\n' scenario runs passed failed
for s in "${SCENARIOS[@]}"; do
    pass=0 fail=0 first=()
    for _ in $(seq 1 "$N"); do
        if out=$("$PROBER" lab run --scenario "$s" --name stress --state-dir "$STATE" \
            --agent-bin "$AGENT" 2>&1); then
            pass=$((pass + 1))
        else
            fail=$((fail + 1))
            first+=("$(grep -m1 -E 'FAIL|failed|expected' <<<"$out" || tail -n1 <<<"$out")")
        fi
    done
    printf '%-50s %5d %6d %6d\n' "$s" "$N" "$pass" "$fail"
    for l in "${first[@]}"; do printf '    %s\n' "$l"; done
done
