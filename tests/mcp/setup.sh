#!/usr/bin/env bash
# Install the official MCP Python SDK (pinned below) into a venv for the MCP
# end-to-end test, once, and print that venv's python as the last line.
#
#   tests/mcp/setup.sh
#
# The venv is <repo>/target/mcp-venv (override with TOOLHOST_MCP_VENV), made with
# `${PYTHON:-python3}` (3.10 or newer); PyPI must be reachable the first time
# (or pip configured: PIP_INDEX_URL / PIP_FIND_LINKS). Concurrent runs wait for
# each other on a lock beside the venv.
set -euo pipefail

MCP_VERSION=2.3.0

die() {
    echo "setup.sh: $*" >&2
    exit 1
}

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
venv=${TOOLHOST_MCP_VENV:-$repo/target/mcp-venv}
python=${PYTHON:-python3}

installed() {
    "$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))' 2>/dev/null || true
}

if [ "$(installed)" != "$MCP_VERSION" ]; then
    mkdir -p "$(dirname "$venv")"
    exec 9>"$venv.lock"
    flock 9 2>/dev/null || true
    if [ "$(installed)" != "$MCP_VERSION" ]; then
        echo "setup.sh: installing mcp $MCP_VERSION into $venv" >&2
        command -v "$python" >/dev/null ||
            die "no $python: install Python 3.10+ (with the venv module), or set PYTHON=/path/to/python3"
        if [ ! -x "$venv/bin/pip" ]; then
            "$python" -m venv "$venv" ||
                die "could not create a venv at $venv with $python (on Debian: apt-get install python3-venv)"
        fi
        "$venv/bin/pip" install --disable-pip-version-check -q "mcp==$MCP_VERSION" >&2 ||
            die "could not install mcp $MCP_VERSION with pip (is PyPI reachable? set PIP_INDEX_URL or PIP_FIND_LINKS)"
        [ "$(installed)" = "$MCP_VERSION" ] ||
            die "mcp in $venv reports version '$(installed)', expected $MCP_VERSION"
    fi
    exec 9>&-
fi
echo "$venv/bin/python"
