#!/usr/bin/env bash
# Build a JavaScript toolhost plugin into a WebAssembly component.
#
#   sdk/js/build.sh <plugin dir> <out dir>
#
# <plugin dir> holds app.js (the module with the tools; it imports from
# "toolhost-sdk") and exactly one manifest <name>.toml, whose name is the
# plugin's. Writes <out dir>/<name>.wasm and copies <name>.toml beside it.
#
# componentize-js (pinned in sdk/js/package.json and package-lock.json) is
# installed on first use with `npm ci` into sdk/js/node_modules, so node (18+) and npm are needed, and the npm registry
# reachable then (or npm configured for a mirror). The component is rebuilt only when a .js/.mjs file of the
# plugin or the SDK, the WIT package, this script or the lock file is newer
# than it (builds are not byte-for-byte reproducible, so a needless rebuild
# would make a server recompile it); the manifest is copied if changed. The WIT
# package is always <repo>/wit, the single source of the contract.
set -euo pipefail

sdk_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../build-common.sh
source "$sdk_dir/../build-common.sh"
parse_args sdk/js/build.sh "$@"
repo=$(cd "$sdk_dir/../.." && pwd)
wit_dir=$repo/wit

[ -f "$wit_dir/plugin.wit" ] || die "no WIT package at $wit_dir"
[ -f "$plugin_dir/app.js" ] || die "$plugin_dir has no app.js (the module with the tools)"

# The manifest names the plugin.
read_manifest

# node and npm, then componentize-js (pinned by the lock file) in sdk/js/node_modules.
command -v node >/dev/null ||
    die "no node: install Node.js 18 or newer with npm (e.g. apt-get install nodejs npm, or https://nodejs.org)"
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 18 ] || die "node $(node --version) is too old: install Node.js 18 or newer"
pinned=$(node -p 'require(process.argv[1]).devDependencies["@bytecodealliance/componentize-js"]' "$sdk_dir/package.json")
cjs_pkg=$sdk_dir/node_modules/@bytecodealliance/componentize-js/package.json
installed_version() {
    node -p 'require(process.argv[1]).version' "$cjs_pkg" 2>/dev/null || true
}
if [ "$(installed_version)" != "$pinned" ] || [ ! -f "$sdk_dir/node_modules/.package-lock.json" ]; then
    mkdir -p "$repo/target"
    exec 9>"$repo/target/js-sdk-npm.lock"
    flock 9 2>/dev/null || true # another build may be installing it
    if [ "$(installed_version)" != "$pinned" ] || [ ! -f "$sdk_dir/node_modules/.package-lock.json" ]; then
        command -v npm >/dev/null ||
            die "no npm: install npm (it comes with Node.js; on Debian: apt-get install npm)"
        echo "build.sh: installing componentize-js $pinned into $sdk_dir/node_modules (npm ci)" >&2
        # The lock file lists every platform's optional packages, so `npm ci`
        # installs exactly what it pins (`make js-unit` checks it is in step).
        (cd "$sdk_dir" && with_retries "$repo/target/js-sdk-npm-ci.log" npm ci --no-audit --no-fund --loglevel=error) ||
            die "npm ci could not install the build tooling in $sdk_dir (is the npm registry reachable? configure a mirror with npm config set registry <url>); see $repo/target/js-sdk-npm-ci.log"
        [ "$(installed_version)" = "$pinned" ] ||
            die "componentize-js in $sdk_dir/node_modules reports version '$(installed_version)', expected $pinned"
    fi
    exec 9>&-
fi

# Up to date? Every input older than the component (and the manifest in place).
# Only modules end up in the component (StarlingMonkey snapshots what the entry
# imports), so other files, the manifest included, do not count.
if [ -f "$wasm" ] &&
    [ -z "$(find "$plugin_dir" -name node_modules -prune -o \( -name '*.js' -o -name '*.mjs' \) -newer "$wasm" -print -quit)" ] &&
    [ -z "$(find "$wit_dir" "$sdk_dir/toolhost-sdk.js" "$sdk_dir/core.js" "$sdk_dir/build.mjs" \
        "$sdk_dir/build.sh" "$sdk_dir/../build-common.sh" "$sdk_dir/package-lock.json" -newer "$wasm" -print -quit)" ]; then
    copy_manifest
    echo "build.sh: $wasm is up to date"
    exit 0
fi

# The same sources built before: the kept component (sdk/build-common.sh).
cache=$(cache_dir js)
key=$(cache_key "componentize-js $pinned node $(node --version)" "$plugin_dir" "$wit_dir" \
    "$sdk_dir/toolhost-sdk.js" "$sdk_dir/core.js" "$sdk_dir/build.mjs" "$sdk_dir/build.sh" \
    "$sdk_dir/../build-common.sh" "$sdk_dir/package-lock.json")
from_cache "$cache" "$key" && exit 0

# Build from a staged copy (the plugin with its "toolhost-sdk" imports pointed
# at the SDK, and the SDK's entry module): see build.mjs.
mkdir -p "$repo/target/js-build"
stage=$(mktemp -d "$repo/target/js-build/$name.XXXXXX")
trap 'rm -rf "$stage"' EXIT

start=$(date +%s.%N)
node "$sdk_dir/build.mjs" "$plugin_dir" "$stage/src" "$wit_dir" "$stage/$name.wasm" ||
    die "componentize-js failed for $plugin_dir (see above)"

to_cache "$cache" "$key" "$stage/$name.wasm"
install_component "$stage/$name.wasm" "$start"
