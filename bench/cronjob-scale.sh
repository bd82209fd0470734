#!/usr/bin/env bash
# The scheduled CronJob on a large cluster (figures printed, never asserted): its own arguments
# (`matrix --log-format json --sample auto`, the table rendered) against 1,000 and 5,000 simulated
# nodes, its 512 MiB limit as the memory budget. Prints the coordinator's peak RSS against that
# limit, the peers the budget allowed and how many successive runs cover every node pair.
# CRONJOB="1000 5000" chooses the sizes, LIMIT=512 the budget in MiB; PROBER and PROBE_POD name
# other builds, as for bench/scale.sh, whose machinery this is. Needs no root, sends nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
NODES="" SAMPLE=0 CRONJOB="${CRONJOB:-1000 5000}" exec bench/scale.sh
