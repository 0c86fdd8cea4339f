#!/usr/bin/env bash
# One phase of `make test`: run a command, print how long it took, and keep
# the figure in target/test-phases.txt so the summary at the end shows where
# the time goes (and growth is visible from run to run).
#
#   tests/phase.sh <name> <command> [args...]     run and time one phase
#   tests/phase.sh --compile <name> <command>...  the same for a phase that
#                                                 compiles (see below)
#   tests/phase.sh --reset                        start a new run's list
#   tests/phase.sh --summary                      print the run's phases
#   tests/phase.sh --self-test                    check the compile phases'
#                                                 retry and report
#
# A compile phase's output is also kept in target/phase-logs/<name>.log.
# When it fails, the lines that say why (the compiler's errors and panics)
# are printed again last, where a log cut to its tail (CI's) still shows
# them: cargo's last line for a crashed compiler is its whole command line.
# A compiler that crashed (cargo: "process didn't exit successfully", exit
# status 101 or a signal; not a compile error, which cargo reports as
# "previous errors") is run once more, saying so: the crates built before
# the crash are kept, and a crash that comes back fails the phase.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# PHASE_TARGET: where the list and the logs go (the self-test's own folder).
target=${PHASE_TARGET:-$repo/target}
list=$target/test-phases.txt
mkdir -p "$target"

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
--self-test)
    exec "$repo/tests/phase_selftest.sh"
    ;;
esac

compile=0
if [ "${1:-}" = --compile ]; then
    compile=1
    shift
fi
name=$1
shift

# Runs the phase's command; a compile phase's output goes to $log as well.
run() {
    if [ $compile -eq 0 ]; then
        "$@"
        return
    fi
    "$@" 2>&1 | tee "$log"
    return "${PIPESTATUS[0]}"
}

# The lines of $log that say why a compile failed, each cut to 240
# characters (a crashed compiler's command line is tens of kilobytes).
why() {
    grep -E "^(error|warning: build failed)|panicked at|^note: |^Caused by|didn't exit successfully|No space left|memory allocation|Killed|^query stack" "$log" |
        cut -c1-240 | head -n 24
}

crashed() {
    grep -qE "didn't exit successfully: .*\((exit status: 101|signal: [0-9]+)" "$log" &&
        ! grep -q "due to [0-9]* previous error" "$log"
}

log=$target/phase-logs/$name.log
[ $compile -eq 0 ] || mkdir -p "$target/phase-logs"
start=$(date +%s.%N)
echo "[phase] $name: $*"
run "$@"
status=$?
if [ $status -ne 0 ] && [ $compile -eq 1 ] && crashed; then
    echo "[phase] $name: the compiler crashed (not a compile error); what it said:"
    why | sed 's/^/[phase]   /'
    cp "$log" "$log.crashed"
    echo "[phase] $name: once more, keeping what was built"
    run "$@"
    status=$?
fi
secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
if [ $status -ne 0 ] && [ $compile -eq 1 ]; then
    echo "[phase] $name failed; what the compiler said (all of it in $log):"
    why | sed 's/^/[phase]   /'
fi
echo "[phase] $name took $secs s$([ $status -eq 0 ] || echo " (failed with $status)")"
echo "$name $secs $status" >>"$list"
exit $status
