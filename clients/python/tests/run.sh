#!/usr/bin/env bash
# The py-client phase of `make test`: the Python client's tests
# (clients/python/tests) against the real server binary, with the real
# Lagent and Qwen-Agent. Makes target/venvs/py-client from the pinned lock
# (requirements.txt, installed with --no-deps) when it is missing or the lock
# changed (PyPI must be reachable then, or pip configured: PIP_INDEX_URL /
# PIP_FIND_LINKS), then installs ./clients/python into it as users do
# (`pip install`, the hatchling backend, offline) and runs pytest.
#
#   clients/python/tests/run.sh [pytest args...]
#   clients/python/tests/run.sh --install      # only the venv (make test-prepare)
#
# Needs target/debug/toolhost (TOOLHOST_BIN) and target/plugins (make plugins).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
lock=$here/requirements.txt
venv=$repo/target/venvs/py-client
python=${PYTHON:-python3}
want=$(sha256sum "$lock" | cut -c1-16)

die() {
    echo "py-client: $*" >&2
    exit 1
}

have() {
    cat "$venv/.requirements" 2>/dev/null || true
}

if [ "$(have)" != "$want" ]; then
    mkdir -p "$(dirname "$venv")"
    exec 9>"$venv.lock"
    flock 9 2>/dev/null || true
    if [ "$(have)" != "$want" ]; then
        start=$(date +%s)
        echo "py-client: installing $lock into $venv" >&2
        rm -rf "$venv"
        "$python" -m venv "$venv" ||
            die "could not create a venv with $python (3.9+ with the venv module; on Debian: apt-get install python3-venv)"
        "$venv/bin/pip" install --disable-pip-version-check -q --no-deps -r "$lock" >&2 ||
            die "could not install $lock (is PyPI reachable? set PIP_INDEX_URL or PIP_FIND_LINKS)"
        echo "$want" >"$venv/.requirements"
        echo "py-client: venv ready in $(($(date +%s) - start)) s" >&2
    fi
    exec 9>&-
fi

[ "${1:-}" != --install ] || exit 0

# The package under test, built and installed the standard way.
"$venv/bin/pip" install --disable-pip-version-check -q --no-deps --no-build-isolation \
    --force-reinstall "$repo/clients/python" >&2 || die "could not install ./clients/python"

export TOOLHOST_BIN=${TOOLHOST_BIN:-$repo/target/debug/toolhost}
[ -x "$TOOLHOST_BIN" ] || die "no $TOOLHOST_BIN: cargo build -p toolhost"
[ -f "$repo/target/plugins/calc.wasm" ] && [ -f "$repo/target/plugins/image.wasm" ] ||
    die "calc and image are not built: make plugins"

# From a scratch directory: the tests import the installed package, never the
# source tree, and Qwen-Agent's relative `workspace/` lands there.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cd "$scratch"
# The package is typed (py.typed): its annotations hold under mypy --strict.
"$venv/bin/python" -m mypy --strict --ignore-missing-imports --cache-dir "$scratch/.mypy" \
    "$repo/clients/python/toolhost_client"
"$venv/bin/python" -m pytest -p no:cacheprovider -q -c "$repo/clients/python/pyproject.toml" \
    --rootdir "$repo/clients/python" "$repo/clients/python/tests" "$@"
