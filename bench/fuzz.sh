#!/usr/bin/env bash
# The parsers' property tests as fuzz targets, each run alone for a fixed budget (prints, never
# asserts beyond the tests themselves): inventories (and the plans a valid one makes), scenarios
# (and the commands a valid one builds), saved reports (and their table), the agents' result
# lines, the policy selector languages, the scheduled mode's memory, plans, kubeconfigs and the
# agent's other inputs. `scripts/test` runs each with its default few dozen to few hundred cases;
# this runs CASES of each (default 2,000), each stopped after BUDGET seconds (default 120) if it
# has not finished: a target that finds a counterexample fails and prints it. Needs no root: the
# tests that bind sockets use loopback.
#   bench/fuzz.sh                         every target, 2,000 cases or 120 s each
#   CASES=20000 BUDGET=600 RELEASE=1 bench/fuzz.sh policy_selectors_never_panic
set -uo pipefail
cd "$(dirname "$0")/.."
cases=${CASES:-2000}
budget=${BUDGET:-120}
profile=()
[ "${RELEASE:-0}" = 1 ] && profile=(--release)
# package, test binary, then its properties (the slow ones last).
targets=(
  "prober parser_props inventories_never_panic a_valid_inventory_makes_plans_the_agents_accept scenarios_never_panic a_valid_scenario_builds_only_plain_commands reports_never_panic a_reports_text_reaches_the_terminal_escaped agent_result_lines_never_panic policy_selectors_never_panic remembered_memories_never_panic"
  "probe-proto plan_props"
  "probe-pod parser_props"
)
only=("$@")
echo "== $cases cases per target, at most $budget s each (${profile[*]:-debug})"
found=0
for t in "${targets[@]}"; do
  set -- $t
  pkg=$1 bin=$2
  shift 2
  cargo test -q "${profile[@]}" -p "$pkg" --test "$bin" --no-run 2>/dev/null ||
    { echo "$pkg/$bin: does not build"; found=1; continue; }
  names=("$@")
  if [ ${#names[@]} -eq 0 ]; then
    mapfile -t names < <(cargo test -q "${profile[@]}" -p "$pkg" --test "$bin" -- --list 2>/dev/null |
      sed -n 's/: test$//p')
  fi
  for name in "${names[@]}"; do
    if [ ${#only[@]} -gt 0 ] && ! printf '%s\n' "${only[@]}" | grep -qx "$name"; then continue; fi
    start=$(date +%s)
    out=$(PROPTEST_CASES=$cases timeout "$budget" \
      cargo test -q "${profile[@]}" -p "$pkg" --test "$bin" -- --exact "$name" 2>&1)
    rc=$?
    took=$(($(date +%s) - start))
    case $rc in
      0) echo "$pkg/$name: $cases cases, nothing found ($took s)" ;;
      124) echo "$pkg/$name: stopped at the $budget s budget, nothing found before it" ;;
      *) echo "$pkg/$name: FOUND (exit $rc, $took s):"; echo "$out" | grep -E 'minimal failing|panicked|overflow|Test failed' | head -5; found=1 ;;
    esac
  done
done
exit $found
