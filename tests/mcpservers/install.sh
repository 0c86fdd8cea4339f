#!/usr/bin/env bash
# The MCP servers the tests use, installed once under target/mcpservers and
# kept: real servers nobody here wrote, for the MCP-gateway tests and
# benchmarks. The npm ones of tests/mcpservers/package.json (pinned; its lock
# file beside it) into node_modules/, the Python ones of requirements.txt into
# python/ (pip --target: mounted into a node and put on its PYTHONPATH).
# Reinstalled when any of those files changes. Prints the install's
# node_modules/.bin as the last line. The npm registry and PyPI must be
# reachable the first time.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../../sdk/build-common.sh" # with_retries (its die is replaced below)

die() {
    echo "mcpservers/install.sh: $*" >&2
    exit 1
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
dest=$repo/target/mcpservers
want=$(cat "$here/package.json" "$here/package-lock.json" "$here/requirements.txt" 2>/dev/null | sha256sum | cut -c1-16)
have() {
    cat "$dest/.installed" 2>/dev/null || true
}

if [ "$(have)" != "$want" ]; then
    mkdir -p "$dest"
    exec 9>"$dest.lock"
    flock 9 2>/dev/null || true
    if [ "$(have)" != "$want" ]; then
        command -v npm >/dev/null || die "no npm: install Node.js 20+ and npm"
        echo "mcpservers/install.sh: installing the test MCP servers into $dest" >&2
        rm -rf "$dest/node_modules"
        cp "$here/package.json" "$dest/"
        [ -f "$here/package-lock.json" ] && cp "$here/package-lock.json" "$dest/"
        (cd "$dest" && with_retries "$dest.npm-ci.log" npm ci --no-audit --no-fund --loglevel=error) ||
            die "npm ci failed (is the npm registry reachable?); see $dest.npm-ci.log"
        rm -rf "$dest/python"
        PIP_ROOT_USER_ACTION=ignore "${PYTHON:-python3}" -m pip install --disable-pip-version-check -q --no-warn-conflicts \
            --target "$dest/python" -r "$here/requirements.txt" >&2 ||
            die "pip install failed (is PyPI reachable?)"
        echo "$want" >"$dest/.installed"
    fi
    exec 9>&-
fi
echo "$dest/node_modules/.bin"
