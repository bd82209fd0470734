#!/usr/bin/env bash
# Scale figures (printed, never asserted): the coordinator's whole pipeline (plan, run, diagnose,
# report) on synthetic clusters of 150 and 1,000 nodes in three zones, against simulated agents
# (`probe-pod probe --simulate`: every probe answered at once, nothing sent, nothing listened on),
# and on 1,000 nodes with `--sample`. Prints the coordinator's peak RSS, bytes of it per result,
# wall time and the JSON report's size. Needs no root and touches no network.
# NODES="150 1000" (empty: none) and SAMPLE=3 (0: no sampled run) choose the runs. bytes/result is peak RSS
# divided by the results in the report.
# CRONJOB="1000 5000" (empty: none) also runs the scheduled CronJob's own arguments on those sizes
# (`--log-format json --sample auto`, the table on stdout, its 512 MiB limit as the budget) and
# prints its peak RSS against that limit, the peers the budget allowed and the runs that cover
# every node pair.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x /usr/bin/time ]] || { apt-get update -qq && apt-get install -y -qq time >/dev/null; }
# PROBER and PROBE_POD name other builds (say, an older commit's) instead of this tree's.
[[ -n ${PROBER:-} ]] || cargo build --release -q -p probe-pod -p prober
P=${PROBER:-$PWD/target/release/prober}
A=${PROBE_POD:-$PWD/target/release/probe-pod}
W=$(mktemp -d /tmp/prober-scale.XXXXXX)
trap 'rm -rf "$W"' EXIT

# A flannel cluster of $1 nodes, round-robin in zones a, b and c, three control planes; every
# agent runs the real probe-pod through `env PROBE_POD_SIMULATE=true`.
inventory() {
    awk -v n="$1" 'BEGIN {
        printf "{\"cluster\": {\"cni\": \"flannel\", \"podCIDR\": \"10.64.0.0/14\", \"serviceCIDR\": \"10.96.0.0/12\",\n"
        printf "  \"overlay\": {\"mode\": \"vxlan\", \"port\": 8472, \"vni\": 1, \"mtu\": 1450},\n"
        printf "  \"api\": {\"service\": \"10.96.0.1:443\", \"endpoints\": [\"10.10.0.1:6443\", \"10.10.0.2:6443\", \"10.10.0.3:6443\"]},\n"
        printf "  \"dns\": {\"service\": \"10.96.0.10:53\", \"endpoints\": [\"10.64.0.53:53\", \"10.64.1.53:53\"], \"names\": [\"kubernetes.default.svc.cluster.local\"]}},\n"
        printf " \"nodes\": [\n"
        sim = "\"exec\": [\"env\", \"PROBE_POD_SIMULATE=true\"]"
        for (i = 0; i < n; i++) {
            hi = int(i / 256); lo = i % 256
            addr = sprintf("10.%d.%d.%d", 10 + int(i / 250), int(i / 250), i % 250 + 1)
            pod = sprintf("10.%d.%d", 64 + hi, lo)
            role = (i < 3) ? "[\"control-plane\"]" : "[]"
            printf "  {\"name\": \"node-%04d\", \"roles\": %s, \"address\": \"%s\", \"zone\": \"zone-%c\",\n", i, role, addr, 97 + i % 3
            printf "   \"podCIDR\": \"%s.0/24\", \"vtep\": {\"address\": \"%s.0\", \"mac\": \"02:00:0a:%02x:%02x:00\"},\n", pod, pod, hi, lo
            printf "   \"agents\": {\"host\": {%s, \"address\": \"%s\", \"port\": 9917},\n", sim, addr
            printf "              \"pod\": {%s, \"address\": \"%s.2\", \"port\": 9917}}}%s\n", sim, pod, (i < n - 1) ? "," : ""
        }
        printf " ]}\n"
    }' >"$W/inv-$1.json"
}

# One run: $1 nodes, then extra `prober matrix` arguments.
run() {
    local n=$1
    shift
    [[ -f "$W/inv-$n.json" ]] || inventory "$n"
    local status=0
    /usr/bin/time -v "$P" matrix --inventory "$W/inv-$n.json" --agent-bin "$A" --no-progress \
        -o json "$@" >"$W/out.json" 2>"$W/time.txt" || status=$?
    local kb secs results bytes
    kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$W/time.txt")
    secs=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$W/time.txt")
    results=$(grep -c '"outcome": ' "$W/out.json" || true)
    bytes=$(stat -c %s "$W/out.json")
    printf '%5d nodes %-12s %9d results  peak RSS %6d MiB  %5d B/result  wall %8s  JSON %6d MiB  exit %d\n' \
        "$n" "$*" "$results" $((kb / 1024)) $((kb * 1024 / (results > 0 ? results : 1))) "$secs" \
        $((bytes / 1048576)) "$status"
}

# One run as the CronJob runs it: $1 nodes, `--sample auto` within LIMIT MiB (the CronJob's
# limits.memory, which it passes as PROBER_MEMORY_BUDGET), the table rendered.
cronjob() {
    local n=$1 limit=${LIMIT:-512}
    [[ -f "$W/inv-$n.json" ]] || inventory "$n"
    local status=0
    /usr/bin/time -v -o "$W/time.txt" "$P" matrix --inventory "$W/inv-$n.json" --agent-bin "$A" \
        --no-progress --log-format json --sample auto --memory-budget "$limit" --width 100 \
        >"$W/table.txt" 2>"$W/log.txt" || status=$?
    local kb secs
    kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$W/time.txt")
    secs=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$W/time.txt")
    # The run's one JSON log line says what the budget allowed.
    python3 - "$W/log.txt" "$n" "$kb" "$limit" "$secs" "$status" <<'PY'
import json, sys
log, n, kb, limit, secs, status = sys.argv[1:]
line = next((json.loads(l) for l in open(log) if l.startswith('{') and '"sample"' in l), {})
s = line.get('sample') or {}
probes = (line.get('probes') or {}).get('total', '?')
print(f"{int(n):5d} nodes cronjob  peak RSS {int(kb) // 1024:4d} MiB of {limit} MiB  "
      f"peers {s.get('peers', 'all')}  pairs {s.get('pairs', '?')}/{s.get('possiblePairs', '?')}  "
      f"runs for full coverage {s.get('runs', 1)}  probes {probes}  wall {secs}  exit {status}")
PY
}

for n in ${NODES-150 1000}; do run "$n"; done
if [[ ${SAMPLE:-3} != 0 ]]; then run 1000 --sample "${SAMPLE:-3}"; fi
for n in ${CRONJOB-1000 5000}; do cronjob "$n"; done
