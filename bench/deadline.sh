#!/usr/bin/env bash
# Honest timing (prints, and exits 1 when it does not hold): one host agent runs a 4,005-probe
# plan (one agent's share on a 1,000-node cluster) against a dropped port, once with the plan
# deadline the coordinator used to give every plan (2 x timeout + 1 s) and once with the one it
# gives now (prober/src/run/mod.rs, plan_deadline_ms: one timeout per wave of 480 probes, one
# more, and a second). With the new deadline every probe must time out at its own timeout and
# none at the plan deadline.
# Needs root; builds its own namespaces (prefix ppd-) and removes them on exit. Run it under the
# shared namespace lock: flock /tmp/prober-netns.lock bench/deadline.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${PROBE_POD_BIN:-${CARGO_TARGET_DIR:-target}/debug/probe-pod}
[ -x "$BIN" ] || cargo build -q -p probe-pod
N=${PROBES:-4005}
T=${TIMEOUT_MS:-1000}
P=ppd-$$
cleanup() { for n in cli srv; do ip netns del "$P-$n" 2>/dev/null || true; done; rm -f "/tmp/$P-"*; }
trap cleanup EXIT
for n in cli srv; do ip netns add "$P-$n"; ip -n "$P-$n" link set lo up; done
ip -n "$P-cli" link add eth0 type veth peer name eth0 netns "$P-srv"
ip -n "$P-cli" addr add 10.78.0.1/24 dev eth0; ip -n "$P-cli" link set eth0 up
ip -n "$P-srv" addr add 10.78.0.2/24 dev eth0; ip -n "$P-srv" link set eth0 up
printf 'table inet fw {\n chain c {\n  type filter hook input priority 0; policy accept;\n  tcp dport 7002 drop\n }\n}\n' \
    | ip netns exec "$P-srv" nft -f -

plan() { # $1 = plan deadline in ms
    printf '{"deadlineMs":%d,"probeTimeoutMs":%d,"concurrency":1024,"probes":[' "$1" "$T"
    for ((i = 0; i < N; i++)); do
        ((i == 0)) || printf ','
        printf '{"id":"p%d","kind":"tcp","address":"10.78.0.2","port":7002}' "$i"
    done
    printf ']}'
}

status=0
for which in old new; do
    if [ "$which" = old ]; then d=$((2 * T + 1000)); else d=$(((((N + 479) / 480) + 1) * T + 1000)); fi
    plan "$d" >"/tmp/$P-plan.json"
    start=$(date +%s.%N)
    ip netns exec "$P-cli" "$BIN" probe --plan "/tmp/$P-plan.json" >"/tmp/$P-out.jsonl"
    end=$(date +%s.%N)
    results=$(wc -l <"/tmp/$P-out.jsonl")
    timeouts=$(grep -c '"outcome":"timeout"' "/tmp/$P-out.jsonl" || true)
    at_deadline=$(grep -c 'plan deadline' "/tmp/$P-out.jsonl" || true)
    # A timeout says how long it waited ("no answer within N ms"): those under the probe's own
    # timeout were cut short by the plan deadline.
    short=$(grep -o 'no answer within [0-9]* ms' "/tmp/$P-out.jsonl" | awk -v t="$T" '$4 < t - 50' | wc -l)
    echo "$which deadline ${d} ms: $results results, $timeouts timeouts ($short cut short), $at_deadline not started before the plan deadline, wall $(echo "$end - $start" | bc) s"
    if [ "$which" = new ] && { [ "$results" -ne "$N" ] || [ "$timeouts" -ne "$N" ] || [ "$at_deadline" -ne 0 ] || [ "$short" -ne 0 ]; }; then
        echo "FAIL: with the new deadline every probe must time out at its own timeout"; status=1
    fi
done
exit $status
