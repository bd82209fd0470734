#!/usr/bin/env bash
# Preflight figures (printed, never asserted), on one lab (tests/scenarios/preflight/
# overlay-dropped-to-candidate.yaml: 3 nodes, a candidate "new" whose firewall drops UDP 8472 on
# the way in): the wall time of `prober preflight` against the same checks done by a
# `nc -z -w 2` loop and by `nmap -sT` / `nmap -sU`, and what each says about the overlay port,
# where nmap can only say `open|filtered`. nc and nmap need something listening on the candidate
# for the inbound checks: they get the stand-ins preflight starts for itself (not timed).
# Needs root, nc (netcat-openbsd) and nmap; the lab is named pfbench and removed at the end.
# BIN_DIR=target/debug uses binaries already built instead of a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps
for tool in nc nmap; do
    command -v "$tool" >/dev/null || { apt-get update -qq && apt-get install -y -qq netcat-openbsd nmap >/dev/null; }
done
if [[ -z ${BIN_DIR:-} ]]; then
    cargo build --release -q -p probe-pod -p prober
    BIN_DIR=$PWD/target/release
fi
P=$BIN_DIR/prober
A=$BIN_DIR/probe-pod
name=pfbench
lab=plab-$name
$P lab down "$name" >/dev/null 2>&1 || true
$P lab up --name "$name" --scenario tests/scenarios/preflight/overlay-dropped-to-candidate.yaml \
    --agent-bin "$A" >/dev/null 2>&1
trap '$P lab down "$name" >/dev/null 2>&1 || true' EXIT
inv=/run/prober-lab/$lab/inventory.yaml
cand=192.168.57.249
nodes=(n1 n2 n3)
# The lab's layout: zone z is 192.168.(56+z).0/24, node i is .(9+i); n1 serves the API.
declare -A ip=([n1]=192.168.56.10 [n2]=192.168.56.11 [n3]=192.168.56.12)
api=${ip[n1]}
now() { date +%s.%N; }
secs() { echo "$2 - $1" | bc; }

# 1. prober preflight: every check both ways, stand-ins included.
t0=$(now)
$P preflight --inventory "$inv" --candidate new --candidate-address "$cand" \
    --candidate-exec "ip netns exec $lab-new" --candidate-host-root "/run/prober-lab/$lab/nodes/new" \
    --agent-bin "$A" -o json >/tmp/pfbench.json || true
t1=$(now)
probes=$(grep -c '"outcome"' /tmp/pfbench.json || true)
printf 'prober preflight:      %6.2f s wall, %d probes, both ways, overlay confirmed by the receiver\n' \
    "$(secs "$t0" "$t1")" "$probes"

# The stand-ins, for nc and nmap's inbound checks (as preflight's own).
ip netns exec "$lab-new" "$A" serve --listen 0.0.0.0 --port 9917 --sniff never --ttl 5m \
    --extra-tcp-port=10250 --standin-udp-port=8472 2>/dev/null &
standins=$!
sleep 1

# 2. nc -z -w 2: the same checks, one at a time.
declare -A ncsays
t0=$(now)
ip netns exec "$lab-new" nc -z -w 2 "$api" 6443 >/dev/null 2>&1 || true
for n in "${nodes[@]}"; do
    ip netns exec "$lab-new" nc -z -w 2 "${ip[$n]}" 10250 >/dev/null 2>&1 || true
    if ip netns exec "$lab-new" nc -z -u -w 2 "${ip[$n]}" 8472 >/dev/null 2>&1; then
        ncsays[new-$n]=open; else ncsays[new-$n]=closed; fi
    ip netns exec "$lab-$n" nc -z -w 2 "$cand" 10250 >/dev/null 2>&1 || true
    if ip netns exec "$lab-$n" nc -z -u -w 2 "$cand" 8472 >/dev/null 2>&1; then
        ncsays[$n-new]=open; else ncsays[$n-new]=closed; fi
done
t1=$(now)
printf 'nc -z -w 2 loop:       %6.2f s wall, %d checks, one at a time\n' "$(secs "$t0" "$t1")" $((1 + 4 * ${#nodes[@]}))

# 3. nmap -sT and -sU: outbound from the candidate in one scan each, inbound from each node.
declare -A nmapsays
t0=$(now)
ip netns exec "$lab-new" nmap -n -Pn -sT -p 6443,10250 "${ip[@]}" >/dev/null 2>&1 || true
out=$(ip netns exec "$lab-new" nmap -n -Pn -sU -p 8472 "${ip[@]}" 2>/dev/null || true)
for n in "${nodes[@]}"; do
    nmapsays[new-$n]=$(awk -v a="${ip[$n]}" '$0 ~ "report for "a"$" {f=1} f && /^8472\/udp/ {print $2; exit}' <<<"$out")
    ip netns exec "$lab-$n" nmap -n -Pn -sT -p 10250 "$cand" >/dev/null 2>&1 || true
    o=$(ip netns exec "$lab-$n" nmap -n -Pn -sU -p 8472 "$cand" 2>/dev/null || true)
    nmapsays[$n-new]=$(awk '/^8472\/udp/ {print $2; exit}' <<<"$o")
done
t1=$(now)
printf 'nmap -sT + -sU:        %6.2f s wall, the same checks\n' "$(secs "$t0" "$t1")"
kill "$standins" 2>/dev/null || true
wait "$standins" 2>/dev/null || true

# What each says about UDP 8472 (dropped toward the candidate only).
pf() { # preflight's outcome for one overlay probe, from the JSON report
    python3 -c 'import json, sys
r = json.load(open("/tmp/pfbench.json"))
want = f"overlay:{sys.argv[1]}/host->{sys.argv[2]}/host:vxlan/8472"
print(next((x["outcome"] for x in r["results"] if x["id"] == want), "?"))' "$1" "$2"
}
echo
echo 'UDP 8472 (the overlay), dropped toward new only:'
printf '  %-10s %-10s %-14s %s\n' path nc nmap preflight
for n in "${nodes[@]}"; do
    for dir in "new $n" "$n new"; do
        read -r a b <<<"$dir"
        printf '  %-10s %-10s %-14s %s\n' "$a->$b" "${ncsays[$a-$b]}" "${nmapsays[$a-$b]:-?}" "$(pf "$a" "$b")"
    done
done
rm -f /tmp/pfbench.json
