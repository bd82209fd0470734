#!/usr/bin/env bash
# Lab figures (printed, never asserted): `lab up` and `lab down` wall time for 3 and 20 nodes, and
# the memory the lab's processes use. Needs root; names its labs bench3/bench20 and removes them.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps
cargo build --release -q -p probe-pod -p prober
P=$PWD/target/release/prober
export PROBER_AGENT_BIN=$PWD/target/release/probe-pod
for n in 3 20; do
    name=bench$n
    $P lab down "$name" >/dev/null 2>&1 || true
    s=$(date +%s.%N)
    $P lab up --name "$name" --nodes "$n" >/dev/null 2>&1
    u=$(date +%s.%N)
    pids=$(for ns in $(ip netns list | awk '{print $1}' | grep "^plab-$name-"); do ip netns pids "$ns"; done)
    rss=$(for p in $pids; do awk '/VmRSS/ {print $2}' /proc/"$p"/status 2>/dev/null; done | awk '{s+=$1} END {print s}')
    count=$(echo "$pids" | wc -w)
    nsc=$(ip netns list | grep -c "^plab-$name-")
    d0=$(date +%s.%N)
    $P lab down "$name" >/dev/null
    d1=$(date +%s.%N)
    printf '%2d nodes: up %.2f s, down %.2f s, %d namespaces, %d processes, %d MB RSS in total\n' \
        "$n" "$(echo "$u - $s" | bc)" "$(echo "$d1 - $d0" | bc)" "$nsc" "$count" $((rss / 1024))
done
