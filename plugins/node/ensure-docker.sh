#!/usr/bin/env bash
# ensure-docker.sh: make sure a Docker engine answers on this machine.
#
# Idempotent. If `docker info` already works, exit 0 at once. Otherwise install
# Debian's docker.io package when dockerd is missing, start dockerd in the
# background (fully detached: own session, no inherited stdio, so a CI caller
# that waits for our stdout/stderr to close is not hung), and wait for it.
#
# Env: DOCKERD_LOG (default /var/log/toolhost-dockerd.log),
#      DOCKERD_WAIT_S (default 60), DOCKERD_STORAGE_DRIVER (default overlay2).
set -euo pipefail

LOG=${DOCKERD_LOG:-/var/log/toolhost-dockerd.log}
WAIT_S=${DOCKERD_WAIT_S:-60}
STORAGE=${DOCKERD_STORAGE_DRIVER:-overlay2}

say() { echo "ensure-docker: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

engine_ok() { docker info >/dev/null 2>&1 </dev/null; }

if command -v docker >/dev/null 2>&1 && engine_ok; then
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    die "no Docker engine answers and starting one needs root (run as root, or start dockerd yourself)"
fi

if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
    say "dockerd not found: installing Debian package docker.io (apt-get update + install)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update </dev/null >&2 || die "apt-get update failed"
    apt-get install -y --no-install-recommends docker.io </dev/null >&2 \
        || die "apt-get install docker.io failed"
    command -v dockerd >/dev/null 2>&1 || die "docker.io installed but dockerd is still not on PATH"
fi

start_dockerd() {
    say "starting dockerd (storage driver $STORAGE, log $LOG)"
    mkdir -p "$(dirname "$LOG")"
    # setsid: new session, so no controlling terminal and no SIGHUP from ours;
    # every fd redirected, so the caller's pipes are not kept open.
    setsid nohup dockerd --storage-driver "$STORAGE" </dev/null >>"$LOG" 2>&1 &
    disown || true
}

# A dockerd may already be running: starting (a concurrent caller launched it)
# or stopping (someone stopped it a moment ago). Wait for it; if it goes away
# without answering, start one ourselves (once).
started=0
if pgrep -x dockerd >/dev/null 2>&1; then
    say "dockerd is already running (pid $(pgrep -x dockerd | head -1)); waiting for it"
else
    start_dockerd
    started=1
fi

deadline=$((SECONDS + WAIT_S))
while ! engine_ok; do
    if [ "$SECONDS" -ge "$deadline" ]; then
        say "last lines of $LOG:"
        tail -n 20 "$LOG" >&2 2>/dev/null || true
        die "the Docker engine did not answer within ${WAIT_S}s (see $LOG)"
    fi
    if ! pgrep -x dockerd >/dev/null 2>&1; then
        if [ "$started" -eq 0 ]; then
            start_dockerd
            started=1
        else
            say "last lines of $LOG:"
            tail -n 20 "$LOG" >&2 2>/dev/null || true
            die "dockerd exited during start-up (see $LOG)"
        fi
    fi
    sleep 0.5
done
say "Docker engine ready ($(docker version --format '{{.Server.Version}} API {{.Server.APIVersion}}' 2>/dev/null </dev/null || echo '?'))"
