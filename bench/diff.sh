#!/usr/bin/env bash
# `prober diff` on generated reports whose findings all share one cause (a network gap on
# udp/8472, each between its own two nodes): the case that paired every finding with every
# other. Prints the wall time and peak RSS per size (GNU time -v); asserts nothing.
#   SIZES="3000 6000" bench/diff.sh        PROBER=target/release/prober bench/diff.sh
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=${SIZES:-3000 6000}
prober=${PROBER:-target/debug/prober}
[ -x "$prober" ] || cargo build -q -p prober --bin prober
[ -x /usr/bin/time ] || { echo "bench/diff.sh needs GNU time (apt-get install time)" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for n in $sizes; do
  # Old: gap i between n(2i) and n(2i+1); new: the same gaps moved one node on, so each pairs
  # by the nodes it shares (the index), and the same report again (twins).
  python3 - "$dir" "$n" <<'PY'
import json, sys
out, n = sys.argv[1], int(sys.argv[2])
def report(shift):
    findings = [{
        "kind": "firewall-gap", "severity": "error",
        "summary": f"udp/8472 is blocked between n{2*i+shift} and n{2*i+1+shift}",
        "evidence": [f"overlay:n{2*i+shift}/host->n{2*i+1+shift}/host:vxlan/8472"],
        "consequences": [], "fix": [], "protocol": "udp", "port": 8472,
        "from": [f"n{(2*i+shift) % (2*n)}"], "to": [f"n{(2*i+1+shift) % (2*n)}"],
        "direction": "both", "where": "network"} for i in range(n)]
    return {"schema": "prober.report/v1", "results": [], "findings": findings, "agents": [],
            "summary": {"total": 0, "ok": 0, "failed": 0, "unknown": 0, "nodes": 2*n,
                        "agents": 0, "agentsMissing": 0, "durationMillis": 1,
                        "interrupted": False, "byPath": {}, "exitCode": 1}}
json.dump(report(0), open(f"{out}/old.json", "w"))
json.dump(report(1), open(f"{out}/moved.json", "w"))
PY
  size=$(du -k "$dir/old.json" | cut -f1)
  for pair in "old.json old.json identical" "old.json moved.json moved"; do
    set -- $pair
    /usr/bin/time -v "$prober" diff -o json "$dir/$1" "$dir/$2" >"$dir/out.json" 2>"$dir/time" || true
    wall=$(grep 'Elapsed (wall clock)' "$dir/time" | awk '{print $NF}')
    rss=$(grep 'Maximum resident set size' "$dir/time" | awk '{print $NF}')
    persisting=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['persisting']))" "$dir/out.json")
    echo "$n x $n findings ($3, ${size} KB each): wall $wall, peak RSS $((rss / 1024)) MB, $persisting persisting"
  done
done
