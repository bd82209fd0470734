#!/usr/bin/env bash
# Agent figures (prints, never asserts): wall time of a 1,000-probe plan against a closed/dropped
# mix; `probe-pod probe` peak RSS for 1,000 and 100,000 probes (the plan's text is held: memory
# grows with the plan, about 160 bytes per probe); `probe-pod serve` RSS idle, under 1,000 concurrent incoming probes, and under
# 4,096 slow connections from one source (with how many it holds for that source, and how fast
# /healthz still answers).
# Needs root; builds its own namespaces (prefix ppb-) and removes them on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps
cargo build --release -q -p probe-pod
BIN=$PWD/target/release/probe-pod
P=ppb-$$
cleanup() { scripts/cleanup-netns "$P-" >/dev/null 2>&1; }
trap cleanup EXIT
for n in cli rtr srv; do ip netns add "$P-$n"; ip -n "$P-$n" link set lo up; done
ip -n "$P-cli" link add eth0 type veth peer name r0 netns "$P-rtr"
ip -n "$P-rtr" link add r1 type veth peer name eth0 netns "$P-srv"
ip -n "$P-cli" addr add 10.77.1.2/24 dev eth0; ip -n "$P-cli" link set eth0 up
ip -n "$P-rtr" addr add 10.77.1.1/24 dev r0; ip -n "$P-rtr" link set r0 up
ip -n "$P-rtr" addr add 10.77.2.1/24 dev r1; ip -n "$P-rtr" link set r1 up
ip -n "$P-srv" addr add 10.77.2.2/24 dev eth0; ip -n "$P-srv" link set eth0 up
ip netns exec "$P-rtr" sysctl -qw net.ipv4.ip_forward=1
ip -n "$P-cli" route add default via 10.77.1.1
ip -n "$P-srv" route add default via 10.77.2.1
printf 'table inet fw {\n chain c {\n  type filter hook forward priority 0; policy accept;\n  tcp dport 7002 drop\n }\n}\n' \
    | ip netns exec "$P-rtr" nft -f -

plan() { # $1 = timeout ms, then "kind port count" triples
    local t=$1; shift; local first=1 i=0
    printf '{"deadlineMs":%d,"probeTimeoutMs":%d,"concurrency":1024,"probes":[' $((t * 3)) "$t"
    while (($#)); do
        local kind=$1 port=$2 count=$3; shift 3
        for ((k = 0; k < count; k++)); do
            ((first)) || printf ','; first=0
            printf '{"id":"p%d","kind":"%s","address":"10.77.2.2","port":%d}' $((i++)) "$kind" "$port"
        done
    done
    printf ']}'
}

echo "== 1,000 probes: 500 tcp to a closed port (RST), 500 tcp to a dropped port (2 s deadline)"
plan 2000 tcp 9999 500 tcp 7002 500 >"/tmp/$P-plan.json"
start=$(date +%s.%N)
ip netns exec "$P-cli" "$BIN" probe --plan "/tmp/$P-plan.json" >"/tmp/$P-out.jsonl"
end=$(date +%s.%N)
echo "results: $(wc -l <"/tmp/$P-out.jsonl"); outcomes: $(grep -o '"outcome":"[a-z-]*"' "/tmp/$P-out.jsonl" | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
echo "wall time: $(echo "$end - $start" | bc) s (one probe deadline is 2 s)"

peak_rss() { # $1 = stdout file, then a command: runs it and prints its peak RSS (VmHWM, sampled)
    local out=$1; shift
    "$@" >"$out" & local pid=$! hwm=0 v
    while kill -0 "$pid" 2>/dev/null; do
        v=$(awk '/VmHWM/ {print $2}' /proc/"$pid"/status 2>/dev/null || true)
        [[ -n $v && $v -gt $hwm ]] && hwm=$v
        sleep 0.05
    done
    wait "$pid" || true
    echo "$hwm kB"
}

echo "== probe-pod probe memory: plans of tcp probes to a closed port (RST), concurrency 1024"
for n in 1000 100000; do
    plan 2000 tcp 9999 "$n" | sed "s/\"deadlineMs\":6000/\"deadlineMs\":600000/" >"/tmp/$P-mem.json"
    start=$(date +%s.%N)
    rss=$(peak_rss "/tmp/$P-mem.jsonl" ip netns exec "$P-cli" "$BIN" probe --plan "/tmp/$P-mem.json")
    end=$(date +%s.%N)
    echo "$n probes: plan $(stat -c %s "/tmp/$P-mem.json") bytes, $(wc -l <"/tmp/$P-mem.jsonl") results, peak RSS $rss, wall $(echo "$end - $start" | bc) s"
done

echo "== probe-pod serve memory"
ip netns exec "$P-srv" "$BIN" serve --sniff never 2>/dev/null &
SERVE=$!
for _ in $(seq 50); do ip netns exec "$P-srv" ss -Hltn 'sport = :9917' | grep -q . && break; sleep 0.1; done
PID=$(ip netns pids "$P-srv" | head -1)
sleep 0.5
echo "idle RSS: $(awk '/VmRSS/ {print $2, $3}' /proc/"$PID"/status)"
plan 3000 tcp 9917 500 udp 9917 500 | sed 's/"port":9917}/"port":9917,"echo":true}/g; s/"kind":"udp","address":"10.77.2.2","port":9917,"echo":true/"kind":"udp","address":"10.77.2.2","port":9917/g' >"/tmp/$P-plan2.json"
ip netns exec "$P-cli" "$BIN" probe --plan "/tmp/$P-plan2.json" >"/tmp/$P-out2.jsonl"
echo "1,000 concurrent echo probes (500 tcp with nonce echo, 500 udp): $(grep -o '"outcome":"[a-z-]*"' "/tmp/$P-out2.jsonl" | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
echo "peak RSS during the burst (VmHWM): $(awk '/VmHWM/ {print $2, $3}' /proc/"$PID"/status); RSS after: $(awk '/VmRSS/ {print $2, $3}' /proc/"$PID"/status)"

echo "== 4,096 slow connections from one source (each sends one byte, then nothing)"
ip netns exec "$P-cli" bash -c '
    ulimit -n 20000
    for i in $(seq 4096); do exec {fd}<>/dev/tcp/10.77.2.2/9917 && printf x >&$fd; done 2>/dev/null
    sleep 0.5
    t0=$(date +%s%N)
    exec {h}<>/dev/tcp/10.77.2.2/9917; printf "GET /healthz HTTP/1.1\r\n\r\n" >&$h
    status=$(timeout 3 head -1 <&$h | tr -d "\r")
    echo "/healthz from the flooding source: ${status:-no answer} in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
    sleep 4' &
FLOOD=$!
sleep 3
echo "connections the agent holds for that source: $(ip netns exec "$P-srv" ss -Htn state established '( sport = :9917 and dst 10.77.1.2 )' | wc -l) (cap 1024)"
echo "serve RSS under the flood: $(awk '/VmRSS/ {print $2, $3}' /proc/"$PID"/status); peak: $(awk '/VmHWM/ {print $2, $3}' /proc/"$PID"/status)"
wait "$FLOOD" 2>/dev/null || true
kill "$PID" 2>/dev/null || true
wait 2>/dev/null || true
echo "timeouts among the udp half (ids p500+; the per-source UDP limit is a 400 burst, 200/s): $(grep timeout "/tmp/$P-out2.jsonl" | grep -c -E '"id":"p([5-9][0-9][0-9])"' || true)"
rm -f /tmp/"$P"-*
