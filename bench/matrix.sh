#!/usr/bin/env bash
# Matrix figures (printed, never asserted): wall time of the whole matrix on healthy labs of 3, 10
# and 20 nodes, the number of probes, and the coordinator's peak RSS. Needs root; labs benchm*.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps
[[ -x /usr/bin/time ]] || { apt-get update -qq && apt-get install -y -qq time >/dev/null; }
cargo build --release -q -p probe-pod -p prober
P=$PWD/target/release/prober
A=$PWD/target/release/probe-pod
for n in 3 10 20; do
    name=benchm$n
    $P lab down "$name" >/dev/null 2>&1 || true
    $P lab up --name "$name" --nodes "$n" --agent-bin "$A" >/dev/null 2>&1
    inv=/run/prober-lab/plab-$name/inventory.yaml
    out=$(/usr/bin/time -f '%e %M' "$P" matrix --inventory "$inv" --agent-bin "$A" -o json 2>/tmp/benchm.time >/tmp/benchm.json; tail -1 /tmp/benchm.time) || true
    probes=$(grep -c '"outcome"' /tmp/benchm.json || true)
    ok=$(grep -c '"outcome": "ok"' /tmp/benchm.json || true)
    read -r secs kb <<<"$out"
    printf '%2d nodes: %4d probes (%d ok) in %s s wall; coordinator peak RSS %d MB\n' "$n" "$probes" "$ok" "$secs" $((kb / 1024))
    $P lab down "$name" >/dev/null
done
rm -f /tmp/benchm.json /tmp/benchm.time
