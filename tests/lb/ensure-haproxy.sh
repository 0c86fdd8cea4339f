#!/usr/bin/env bash
# Debian's HAProxy for the two-replica test (tests/e2e/tests/replicas_lb.rs),
# installed from apt when missing. Only the binary is used: the test runs its
# own instance in the foreground on a loopback port; the packaged service,
# if its script started one, is stopped.
set -euo pipefail
if [ -x /usr/sbin/haproxy ]; then
    exit 0
fi
echo "ensure-haproxy: installing haproxy (Debian)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends haproxy >/dev/null ||
    { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends haproxy >/dev/null; }
service haproxy stop >/dev/null 2>&1 || true
[ -x /usr/sbin/haproxy ]
