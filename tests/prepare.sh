#!/usr/bin/env bash
# What `make test` fetches and installs (`make test-prepare`: apt packages,
# the Docker engine and the node image, the componentizers and the Python and
# JavaScript plugins, the test venvs, the conformance suite), run beside its
# build phase: the compiler keeps both cores busy for most of a fresh run,
# and these steps wait on the network and the disk. Each step is skipped when
# done, and the phase that needs it checks it again (retrying what failed
# here), so a failure here is reported, not fatal.
#
#   tests/prepare.sh start <pid>   # in the background, logged to target/test-prepare.log;
#                                  # stopped if <pid> (the make running the test) ends first
#   tests/prepare.sh wait          # until it is done; exits with its status
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
log=$repo/target/test-prepare.log
status=$repo/target/test-prepare.status
pidfile=$repo/target/test-prepare.pid
mkdir -p "$repo/target"

case "${1:-}" in
start)
    owner=${2:?usage: tests/prepare.sh start <pid>}
    rm -f "$status"
    echo "make test: \`make test-prepare\` beside the build (target/test-prepare.log)"
    # A session of its own (so it can be stopped as a group); its status
    # written when it ends.
    setsid bash -c 'make -C "$1" --no-print-directory test-prepare >"$2" 2>&1; echo $? >"$3"' \
        _ "$repo" "$log" "$status" </dev/null >/dev/null 2>&1 &
    group=$!
    echo "$group" >"$pidfile"
    # It ends with the run that started it (an interrupted or failed build).
    (
        while kill -0 "$owner" 2>/dev/null && [ ! -s "$status" ]; do sleep 2; done
        [ -s "$status" ] || kill -TERM -- "-$group" 2>/dev/null
    ) </dev/null >/dev/null 2>&1 &
    ;;
wait)
    if [ ! -e "$log" ]; then
        echo "no make test-prepare was started (tests/prepare.sh start)" >&2
        exit 1
    fi
    group=$(cat "$pidfile" 2>/dev/null || true)
    while [ ! -s "$status" ]; do
        if [ -z "$group" ] || ! kill -0 "$group" 2>/dev/null; then
            sleep 1 # its status may be being written
            if [ ! -s "$status" ]; then
                echo "make test-prepare ended without a status" >&2
                echo 1 >"$status"
            fi
            break
        fi
        sleep 1
    done
    code=$(cat "$status")
    if [ "$code" = 0 ]; then
        tail -n 1 "$log"
    else
        echo "make test-prepare failed (exit $code; target/test-prepare.log): the phases below try its steps again; its last lines:" >&2
        tail -n 20 "$log" >&2
    fi
    exit "$code"
    ;;
*)
    echo "usage: tests/prepare.sh start <pid> | wait" >&2
    exit 2
    ;;
esac
