#!/usr/bin/env bash
# Build a Python toolhost plugin into a WebAssembly component.
#
#   sdk/python/build.sh <plugin dir> <out dir>
#
# <plugin dir> holds app.py (the module componentize-py wraps; another name with
# TOOLHOST_PY_MODULE=<module>) and exactly one manifest <name>.toml, whose name
# is the plugin's. Writes <out dir>/<name>.wasm and copies <name>.toml beside it.
#
# componentize-py (pinned below) is installed on first use into a venv at
# <repo>/target/py-venv (override with TOOLHOST_PY_VENV), with `${PYTHON:-python3}`
# (3.9 or newer) and pip, so PyPI must be reachable then (or pip configured, e.g.
# PIP_INDEX_URL / PIP_FIND_LINKS). The component is rebuilt only when a .py file
# of the plugin or the SDK, the WIT package, this script or componentize-py is
# newer than it (builds are not byte-for-byte reproducible, so a needless
# rebuild would make a server recompile it); the manifest is copied if changed.
# The WIT package is always <repo>/wit, the single source of the contract.
set -euo pipefail

COMPONENTIZE_PY_VERSION=0.25.1

sdk_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../build-common.sh
source "$sdk_dir/../build-common.sh"
parse_args sdk/python/build.sh "$@"
repo=$(cd "$sdk_dir/../.." && pwd)
wit_dir=$repo/wit
venv=${TOOLHOST_PY_VENV:-$repo/target/py-venv}
module=${TOOLHOST_PY_MODULE:-app}
python=${PYTHON:-python3}

[ -f "$wit_dir/plugin.wit" ] || die "no WIT package at $wit_dir"
[ -f "$plugin_dir/$module.py" ] || [ -f "$plugin_dir/$module/__init__.py" ] ||
    die "$plugin_dir has no $module.py (the module with the tools)"
# componentize-py exports the class `Toolkit` of the module: the SDK's, imported.
if [ -f "$plugin_dir/$module.py" ] && ! grep -Eq '\bToolkit\b|import \*' "$plugin_dir/$module.py"; then
    die "$plugin_dir/$module.py must import the export: from toolhost_sdk import Toolkit"
fi

# The manifest names the plugin.
read_manifest pyproject.toml componentize-py.toml

# componentize-py, pinned, in its own venv.
cpy=$venv/bin/componentize-py
installed=$("$cpy" --version 2>/dev/null | awk '{print $2}') || installed=
if [ "$installed" != "$COMPONENTIZE_PY_VERSION" ]; then
    mkdir -p "$(dirname "$venv")"
    exec 9>"$venv.lock"
    flock 9 2>/dev/null || true # another build may be installing it
    installed=$("$cpy" --version 2>/dev/null | awk '{print $2}') || installed=
    if [ "$installed" != "$COMPONENTIZE_PY_VERSION" ]; then
        echo "build.sh: installing componentize-py $COMPONENTIZE_PY_VERSION into $venv" >&2
        command -v "$python" >/dev/null ||
            die "no $python: install Python 3.9+ (with the venv module), or set PYTHON=/path/to/python3"
        if [ ! -x "$venv/bin/pip" ]; then
            "$python" -m venv "$venv" ||
                die "could not create a venv at $venv with $python (on Debian: apt-get install python3-venv)"
        fi
        "$venv/bin/pip" install --disable-pip-version-check -q "componentize-py==$COMPONENTIZE_PY_VERSION" ||
            die "could not install componentize-py $COMPONENTIZE_PY_VERSION with pip (is PyPI reachable? set PIP_INDEX_URL or PIP_FIND_LINKS for a mirror or a local wheel)"
        installed=$("$cpy" --version 2>/dev/null | awk '{print $2}') || installed=
        [ "$installed" = "$COMPONENTIZE_PY_VERSION" ] ||
            die "componentize-py in $venv reports version '${installed:-?}', expected $COMPONENTIZE_PY_VERSION"
    fi
    exec 9>&-
fi

# Up to date? Every input older than the component (and the manifest in place).
# Only Python sources end up in the component (componentize-py snapshots what
# the module imports), so other files, the manifest included, do not count.
if [ -f "$wasm" ] &&
    [ -z "$(find "$plugin_dir" "$sdk_dir/toolhost_sdk" -name __pycache__ -prune -o \
        -name '*.py' -newer "$wasm" -print -quit)" ] &&
    [ -z "$(find "$wit_dir" "$sdk_dir/build.sh" "$sdk_dir/../build-common.sh" "$cpy" -newer "$wasm" -print -quit)" ]; then
    copy_manifest
    echo "build.sh: $wasm is up to date"
    exit 0
fi

# The same sources built before: the kept component (sdk/build-common.sh).
cache=$(cache_dir python)
key=$(cache_key "componentize-py $COMPONENTIZE_PY_VERSION module $module" \
    "$plugin_dir" "$sdk_dir/toolhost_sdk" "$wit_dir" "$sdk_dir/build.sh" "$sdk_dir/../build-common.sh")
from_cache "$cache" "$key" && exit 0

# Build from a staged copy: componentize-py runs the module at build time (to
# snapshot the interpreter) and would leave __pycache__ in the sources.
mkdir -p "$repo/target/py-build"
stage=$(mktemp -d "$repo/target/py-build/$name.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/app" "$stage/sdk"
cp -R "$plugin_dir/." "$stage/app/"
cp -R "$sdk_dir/toolhost_sdk" "$stage/sdk/"
find "$stage" -name __pycache__ -type d -prune -exec rm -rf {} +

start=$(date +%s.%N)
(cd "$stage" && env -u VIRTUAL_ENV PYTHONDONTWRITEBYTECODE=1 RUST_BACKTRACE=0 "$cpy" -q \
    -d "$wit_dir" -w plugin componentize -p "$stage/app" -p "$stage/sdk" "$module" -o "$stage/$name.wasm") ||
    die "componentize-py failed for $plugin_dir (see above)"

to_cache "$cache" "$key" "$stage/$name.wasm"
install_component "$stage/$name.wasm" "$start"
