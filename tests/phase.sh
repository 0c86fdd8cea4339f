#!/usr/bin/env bash
# One phase of `make test`: run a command, print how long it took, and keep
# the figure in target/test-phases.txt so the summary at the end shows where
# the time goes (and growth is visible from run to run).
#
#   tests/phase.sh <name> <command> [args...]     run and time one phase
#   tests/phase.sh --reset                        start a new run's list
#   tests/phase.sh --summary                      print the run's phases
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
list=$repo/target/test-phases.txt
mkdir -p "$repo/target"

case "${1:-}" in
--reset)
    : >"$list"
    exit 0
    ;;
--summary)
    awk '{ printf "[phases] %-14s %8.1f s%s\n", $1, $2, ($3 == 0 ? "" : "  (failed)"); total += $2 }
         END { printf "[phases] %-14s %8.1f s (%.1f min)\n", "total", total, total / 60 }' "$list"
    exit 0
    ;;
esac

name=$1
shift
start=$(date +%s.%N)
echo "[phase] $name: $*"
"$@"
status=$?
secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
echo "[phase] $name took $secs s$([ $status -eq 0 ] || echo " (failed with $status)")"
echo "$name $secs $status" >>"$list"
exit $status
