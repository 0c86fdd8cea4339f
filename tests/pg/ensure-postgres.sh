#!/usr/bin/env bash
# Debian's PostgreSQL for the registry's PostgreSQL tests
# (host/core/src/registry/store), installed from apt when missing. Only the
# binaries are used: each test runs its own cluster in a temporary directory
# on a loopback port, as the `postgres` user.
set -euo pipefail
if ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 && id postgres >/dev/null 2>&1; then
    exit 0
fi
echo "ensure-postgres: installing postgresql (Debian)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends postgresql >/dev/null ||
    { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends postgresql >/dev/null; }
ls /usr/lib/postgresql/*/bin/postgres >/dev/null
