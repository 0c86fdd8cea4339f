#!/usr/bin/env bash
# A Python venv with the pinned packages of a requirements file, made once and
# kept under target/: real clients (the MCP SDK, Qwen-Agent) for the
# end-to-end tests. Prints the venv's python as the last line.
#
#   tests/venv.sh tests/mcp/requirements.txt      # -> target/venvs/mcp
#
# The venv is named after the requirements file's folder and made with
# `${PYTHON:-python3}` (3.10 or newer); it is remade when the requirements
# file changes. PyPI must be reachable the first time (or pip configured:
# PIP_INDEX_URL / PIP_FIND_LINKS). Concurrent runs wait for each other on a
# lock beside the venv.
set -euo pipefail

die() {
    echo "venv.sh: $*" >&2
    exit 1
}

[ $# -eq 1 ] || die "usage: tests/venv.sh <requirements.txt>"
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
requirements=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
[ -f "$requirements" ] || die "no requirements file $1"
name=$(basename "$(dirname "$requirements")")
venv=$repo/target/venvs/$name
python=${PYTHON:-python3}
want=$(sha256sum "$requirements" | cut -c1-16)

have() {
    cat "$venv/.requirements" 2>/dev/null || true
}

if [ "$(have)" != "$want" ]; then
    mkdir -p "$(dirname "$venv")"
    exec 9>"$venv.lock"
    flock 9 2>/dev/null || true
    if [ "$(have)" != "$want" ]; then
        echo "venv.sh: installing $1 into $venv" >&2
        command -v "$python" >/dev/null ||
            die "no $python: install Python 3.10+ (with the venv module), or set PYTHON=/path/to/python3"
        rm -rf "$venv"
        "$python" -m venv "$venv" ||
            die "could not create a venv at $venv with $python (on Debian: apt-get install python3-venv)"
        "$venv/bin/pip" install --disable-pip-version-check -q -r "$requirements" >&2 ||
            die "could not install $1 with pip (is PyPI reachable? set PIP_INDEX_URL or PIP_FIND_LINKS)"
        echo "$want" >"$venv/.requirements"
    fi
    exec 9>&-
fi
echo "$venv/bin/python"
