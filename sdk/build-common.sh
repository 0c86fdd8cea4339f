# Shared by sdk/<lang>/build.sh (sourced, not run): the command line and the
# plugin folder's manifest, checked the same way for every language; and
# with_retries, which the tests' installers source too.
#
#   source "$(dirname "${BASH_SOURCE[0]}")/../build-common.sh"
#   parse_args sdk/<lang>/build.sh "$@"   # -> plugin_dir, out_dir (absolute)
#   read_manifest [ignored.toml ...]      # -> manifest, name, wasm

die() {
    echo "build.sh: $*" >&2
    exit 1
}

parse_args() {
    local usage=$1
    shift
    [ $# -eq 2 ] || die "usage: $usage <plugin dir> <out dir>"
    plugin_dir=$(cd "$1" 2>/dev/null && pwd) || die "no such plugin directory: $1"
    mkdir -p "$2" || die "cannot create the output directory $2"
    out_dir=$(cd "$2" && pwd)
}

# The one manifest <name>.toml of plugin_dir names the plugin; other .toml
# files the language's tools use are named as arguments and skipped.
read_manifest() {
    local f skip found=()
    for f in "$plugin_dir"/*.toml; do
        [ -e "$f" ] || continue
        for skip in "$@"; do
            [ "$(basename "$f")" = "$skip" ] && continue 2
        done
        found+=("$f")
    done
    [ ${#found[@]} -eq 1 ] ||
        die "$plugin_dir needs exactly one manifest <name>.toml (found ${#found[@]})"
    manifest=${found[0]}
    name=$(basename "$manifest" .toml)
    [[ $name =~ ^[a-z][a-z0-9-]*$ && ${#name} -le 48 ]] ||
        die "plugin name '$name' (from $manifest) must match ^[a-z][a-z0-9-]*\$, at most 48 characters"
    wasm=$out_dir/$name.wasm
}

# The manifest beside the component, copied when it changed.
copy_manifest() {
    cmp -s "$manifest" "$out_dir/$name.toml" || cp "$manifest" "$out_dir/$name.toml"
}

# install_component <built .wasm> <start, from date +%s.%N>: manifest first,
# then the component, each replaced atomically, so a server watching
# <out dir> never sees a half-written file.
install_component() {
    copy_manifest
    cp "$1" "$out_dir/.$name.wasm.tmp"
    mv -f "$out_dir/.$name.wasm.tmp" "$wasm"
    local size secs
    size=$(wc -c <"$wasm")
    secs=$(awk -v a="$2" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    echo "build.sh: built $wasm ($((size / 1024)) KiB) in $secs s"
}

# with_retries <log> <command...>: runs an install that reaches a registry
# (npm ci), up to three times, 5 s then 20 s apart, so a registry's passing
# failure does not fail a build. Every attempt's output is appended to <log>;
# when the last one fails too, its last lines go to stderr and its exit status
# is returned.
with_retries() {
    local log=$1 pause status=0
    shift
    mkdir -p "$(dirname "$log")"
    : >"$log"
    for pause in 5 20 0; do
        if "$@" >>"$log" 2>&1; then
            return 0
        else
            status=$?
        fi
        if [ "$pause" = 0 ]; then
            echo "$1 failed three times (exit $status); the last lines of $log:" >&2
            tail -n 25 "$log" >&2
            return "$status"
        fi
        echo "$1 failed (exit $status); trying again in $pause s (output in $log)" >&2
        echo "--- exit $status at $(date -u +%FT%TZ); again in $pause s ---" >>"$log"
        sleep "$pause"
    done
}

# The build cache: a component kept under the SHA-256 of everything that
# made it, so the same sources build once (componentize-py and
# componentize-js take 10-20 s of two cores; a tool requested again, by
# another replica or after a restart, is then a copy) and give the same
# bytes (neither componentizer is byte-for-byte reproducible; the same bytes
# are what a server's compile cache recognises). TOOLHOST_BUILD_CACHE picks
# the folder (default <repo>/target/build-cache), `off` turns it off; the
# newest $BUILD_CACHE_KEEP components are kept.
BUILD_CACHE_KEEP=${BUILD_CACHE_KEEP:-16}

# cache_key <text> <path>...: the key of text (the componentizer's version,
# the module) and of each path's files (every file's path under it and
# bytes, sorted; __pycache__, node_modules and the plugin folder's manifest
# skipped: the manifest is copied beside the component, not built into it).
cache_key() {
    local text=$1 path n=0
    shift
    {
        printf '%s\n' "$text"
        for path in "$@"; do
            n=$((n + 1))
            printf 'input %d\n' "$n"
            if [ -d "$path" ]; then
                (cd "$path" && find . \( -name __pycache__ -o -name node_modules \) -prune -o \
                    -type f ! -path "./$name.toml" -print0 | LC_ALL=C sort -z | xargs -0r sha256sum)
            else
                sha256sum <"$path"
            fi
        done
    } | sha256sum | cut -c1-64
}

# cache_dir <language>: the cache's folder for a language, empty when off.
cache_dir() {
    local root=${TOOLHOST_BUILD_CACHE:-$repo/target/build-cache}
    [ "$root" = off ] || printf '%s/%s' "$root" "$1"
}

# from_cache <dir> <key>: install the kept component (true), if there is one.
from_cache() {
    local kept=$1/$2.wasm start
    [ -n "$1" ] && [ -f "$kept" ] || return 1
    start=$(date +%s.%N)
    touch "$kept" # the newest are kept
    install_component "$kept" "$start" >/dev/null
    echo "build.sh: $wasm from the build cache (the same sources built before: $kept)"
}

# to_cache <dir> <key> <built .wasm>: keep it (atomically), and only the
# newest $BUILD_CACHE_KEEP.
to_cache() {
    [ -n "$1" ] || return 0
    # A folder this user cannot write (an installed SDK): no cache, quietly.
    { mkdir -p "$1" && cp "$3" "$1/.$2.$$.tmp" && mv -f "$1/.$2.$$.tmp" "$1/$2.wasm"; } 2>/dev/null || return 0
    find "$1" -maxdepth 1 -name '*.wasm' -printf '%T@ %p\n' | sort -rn |
        tail -n +$((BUILD_CACHE_KEEP + 1)) | cut -d' ' -f2- | xargs -r rm -f
}
