#!/usr/bin/env bash
# The API path at scale (figures printed, never asserted): `prober matrix --kubeconfig K` against
# the test kit's API stand-in with N stub nodes (test-kit/examples/standin_scale.rs): real HTTPS,
# watches, server-side apply and WebSocket exec, but every agent a stub whose exec is answered
# after ROUND_TRIP_MS and whose probe phase lasts PROBE_PHASE_MS (`probe-pod probe --simulate`:
# nothing is sent on any network, no namespace is made). Prints the matrix's wall time against
# the floor (one probe phase + one exec round trip; a throttled exec adds its retries), the
# coordinator's peak RSS and the agents that ran. Needs no root.
# NODES="100 1000" and RUNS=3 choose the runs (a median of RUNS is printed per size); extra
# arguments go to `prober matrix` (say, --concurrency 64). PROFILE=debug uses debug builds;
# AGENT_WAIT (3m) is the agents' readiness wait.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x /usr/bin/time ]] || { apt-get update -qq && apt-get install -y -qq time >/dev/null; }
profile=${PROFILE:-release}
if [[ $profile == release ]]; then
    cargo build --release -q -p probe-pod -p prober
    cargo build --release -q -p test-kit --example standin_scale
else
    cargo build -q -p probe-pod -p prober
    cargo build -q -p test-kit --example standin_scale
fi
P=$PWD/target/$profile/prober
A=$PWD/target/$profile/probe-pod
S=$PWD/target/$profile/examples/standin_scale
RT=${ROUND_TRIP_MS:-100}
PP=${PROBE_PHASE_MS:-2000}
W=$(mktemp -d /tmp/prober-api-scale.XXXXXX)
SPID=
stop() {
    if [[ -n $SPID ]]; then
        kill -TERM "$SPID" 2>/dev/null || true
        wait "$SPID" 2>/dev/null || true
        SPID=
    fi
}
trap 'stop; rm -rf "$W"' EXIT

# One run on $1 stub nodes, then extra `prober matrix` arguments; prints "wall_s rss_mib ran".
one() {
    local n=$1
    shift
    rm -rf "$W/run" && mkdir -p "$W/run"
    "$S" --nodes "$n" --dir "$W/run" --agent "$A" --round-trip-ms "$RT" \
        --probe-phase-ms "$PP" >"$W/run/kubeconfig.path" 2>"$W/run/standin.log" &
    SPID=$!
    for _ in $(seq 100); do [[ -s $W/run/kubeconfig.path ]] && break; sleep 0.1; done
    local k
    k=$(head -1 "$W/run/kubeconfig.path")
    [[ -n $k ]] || { cat "$W/run/standin.log" >&2; exit 1; }
    local status=0
    env -u KUBECONFIG -u HTTPS_PROXY -u https_proxy NO_COLOR=1 /usr/bin/time -v "$P" matrix \
        --kubeconfig "$k" --image registry.example/prober:bench --agent-wait "${AGENT_WAIT:-3m}" --no-progress \
        -o json "$@" >"$W/run/out.json" 2>"$W/run/time.txt" || status=$?
    stop
    local kb wall ran agents
    kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$W/run/time.txt")
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$W/run/time.txt" |
        awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s }')
    ran=$(grep -c '"ran": true' "$W/run/out.json" || true)
    agents=$(grep -c '"ran": ' "$W/run/out.json" || true)
    if [[ $status -gt 1 || $agents -eq 0 ]]; then
        echo "prober matrix exited $status:" >&2
        grep -v '^\s' "$W/run/time.txt" | tail -5 >&2
    fi
    echo "$wall $((kb / 1024)) $ran/$agents"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

floor=$(awk -v rt="$RT" -v pp="$PP" 'BEGIN { printf "%.1f", (rt + pp) / 1000 }')
for n in ${NODES:-100 1000}; do
    walls=() rss=() ran=
    for _ in $(seq "${RUNS:-3}"); do
        read -r w m r < <(one "$n" "$@")
        walls+=("$w") rss+=("$m") ran=$r
        printf '  %5d nodes: wall %6.1f s  peak RSS %4d MiB  agents ran %s\n' "$n" "$w" "$m" "$r"
    done
    w=$(printf '%s\n' "${walls[@]}" | median)
    m=$(printf '%s\n' "${rss[@]}" | median)
    printf '%5d nodes (median of %d): wall %6.1f s against a floor of %s s (x%.1f), peak RSS %4d MiB, agents ran %s %s\n' \
        "$n" "${#walls[@]}" "$w" "$floor" "$(awk -v w="$w" -v f="$floor" 'BEGIN { print w / f }')" "$m" "$ran" "$*"
done
