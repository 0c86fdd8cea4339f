#!/usr/bin/env bash
# Debian's docker-registry (the CNCF distribution registry) for the OCI tests
# (tests/e2e/tests/oci.rs), installed from apt when missing. Only the binary
# is used: each test runs its own on a loopback port with a filesystem store.
set -euo pipefail
if command -v docker-registry >/dev/null; then
    exit 0
fi
echo "ensure-registry: installing docker-registry (Debian)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends docker-registry >/dev/null ||
    { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends docker-registry >/dev/null; }
command -v docker-registry >/dev/null
