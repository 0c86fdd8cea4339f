#!/usr/bin/env bash
# The MCP servers the tests use, installed once under target/mcpservers and
# kept: real servers nobody here wrote, for the MCP-gateway tests and
# benchmarks. Installed by `toolhost mcp-install` from their locks: the npm
# ones of tests/mcpservers/package.json from package-lock.json (`npm ci`, every
# package's integrity hash checked) into node_modules/, the Python ones from
# requirements.txt (`pip install --require-hashes`) into python/ (mounted into a
# node and put on its PYTHONPATH); what was installed is recorded in
# .toolhost-mount.lock, which the server checks when it mounts the directory.
# Reinstalled when any of those files changes. Prints the install's
# node_modules/.bin as the last line. The npm registry and PyPI must be
# reachable the first time; the toolhost binary must be built
# ($TOOLHOST_BIN, else target/debug/toolhost or target/release/toolhost).
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
        toolhost=${TOOLHOST_BIN:-}
        for t in "$repo/target/debug/toolhost" "$repo/target/release/toolhost"; do
            [ -n "$toolhost" ] || { [ -x "$t" ] && toolhost=$t; }
        done
        [ -x "$toolhost" ] || die "no toolhost binary: cargo build -p toolhost first (or set TOOLHOST_BIN)"
        echo "mcpservers/install.sh: installing the test MCP servers into $dest" >&2
        rm -rf "$dest/node_modules" "$dest/python"
        cp "$here/package.json" "$here/package-lock.json" "$here/requirements.txt" "$dest/"
        with_retries "$dest.install.log" "$toolhost" mcp-install "$dest" --python "${PYTHON:-python3}" ||
            die "toolhost mcp-install failed (are the npm registry and PyPI reachable?); see $dest.install.log"
        echo "$want" >"$dest/.installed"
    fi
    exec 9>&-
fi
echo "$dest/node_modules/.bin"
