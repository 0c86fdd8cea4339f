#!/usr/bin/env bash
# Build a C toolhost plugin into a WebAssembly component.
#
#   sdk/c/build.sh <plugin dir> <out dir>
#
# <plugin dir> holds app.c (plus any other .c / .h files: every *.c at its top
# level is compiled) and exactly one manifest <name>.toml, whose name is the
# plugin's. Writes <out dir>/<name>.wasm and copies <name>.toml beside it.
#
# The route: clang (wasm32-wasi, WASI preview 1, wasi-libc) compiles the
# plugin, the SDK (toolhost.c, json.c) and the generated bindings
# (gen/plugin.c) and links gen/plugin_component_type.o, which carries the
# world's type, into a core module; `toolhost componentize` (the host binary,
# with the WASI preview 1 reactor adapter built in) turns that into a
# component. Needs Debian's clang-19, lld-19, libclang-rt-19-dev-wasm32 and
# wasi-libc (or TOOLHOST_CLANG=<clang> and WASI_SYSROOT=<sysroot> of e.g.
# wasi-sdk), and the toolhost binary ($TOOLHOST_BIN, else the newer of
# <repo>/target/{release,debug}/toolhost, else `toolhost` on PATH).
#
# Extra flags: TOOLHOST_CFLAGS (plugin files only), TOOLHOST_LDFLAGS.
# The component is rebuilt only when a .c/.h file of the plugin, the SDK, the
# generated bindings or this script is newer than it (a needless rebuild would
# make a server recompile it); the manifest is copied if changed.
set -euo pipefail

APT_PACKAGES="clang-19 lld-19 libclang-rt-19-dev-wasm32 wasi-libc"

sdk_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../build-common.sh
source "$sdk_dir/../build-common.sh"
parse_args sdk/c/build.sh "$@"
repo=$(cd "$sdk_dir/../.." && pwd)
gen_dir=$sdk_dir/gen

for f in plugin.h plugin.c plugin_component_type.o; do
    [ -f "$gen_dir/$f" ] || die "missing $gen_dir/$f (the generated bindings; regenerate with TOOLHOST_BLESS=1 cargo test -p toolhost --test c_bindings)"
done
[ -f "$plugin_dir/app.c" ] || die "$plugin_dir has no app.c (the file with the tools)"

# The manifest names the plugin.
read_manifest

sources=()
for f in "$plugin_dir"/*.c; do
    [ -e "$f" ] && sources+=("$f")
done

# Up to date? Every input older than the component (and the manifest in place).
if [ -f "$wasm" ] &&
    [ -z "$(find "$plugin_dir" -maxdepth 1 \( -name '*.c' -o -name '*.h' \) -newer "$wasm" -print -quit)" ] &&
    [ -z "$(find "$sdk_dir/toolhost.c" "$sdk_dir/toolhost.h" "$sdk_dir/json.c" "$sdk_dir/json.h" \
        "$gen_dir" "$sdk_dir/build.sh" "$sdk_dir/../build-common.sh" -newer "$wasm" -print -quit)" ]; then
    copy_manifest
    echo "build.sh: $wasm is up to date"
    exit 0
fi

# The toolchain: clang with the wasm32 target, wasm-ld, compiler-rt's wasm32
# builtins and a wasi-libc sysroot.
install_hint="on Debian 12: apt-get install -y $APT_PACKAGES"
clang=${TOOLHOST_CLANG:-}
if [ -z "$clang" ]; then
    if command -v clang-19 >/dev/null; then
        clang=clang-19
    elif command -v clang >/dev/null; then
        clang=clang
    else
        die "no clang-19 (the C compiler for wasm32-wasi): $install_hint (or set TOOLHOST_CLANG to a clang with the wasm32 target, e.g. wasi-sdk's)"
    fi
fi
command -v "$clang" >/dev/null || die "TOOLHOST_CLANG=$clang is not a command"
"$clang" -print-targets 2>/dev/null | grep -q wasm32 ||
    die "$clang has no wasm32 target: $install_hint"
# The linker clang would pick, passed to it explicitly (-fuse-ld) so that the
# one checked here is the one used.
linker=$("$clang" --target=wasm32-wasi -print-prog-name=wasm-ld)
[ -x "$linker" ] || linker=$(command -v "$linker") ||
    die "no wasm-ld for $clang (looked for $linker; Debian has it in lld-19): $install_hint"
builtins=$("$clang" --target=wasm32-wasi -print-libgcc-file-name)
[ -f "$builtins" ] ||
    die "no compiler-rt builtins for wasm32 ($builtins; they are in libclang-rt-19-dev-wasm32): $install_hint"
if [ -n "${WASI_SYSROOT:-}" ]; then
    [ -f "$WASI_SYSROOT/lib/wasm32-wasi/libc.a" ] ||
        die "WASI_SYSROOT=$WASI_SYSROOT has no lib/wasm32-wasi/libc.a (expected a wasi-libc sysroot, e.g. wasi-sdk's share/wasi-sysroot)"
    sysroot_flags=(--sysroot="$WASI_SYSROOT")
else
    # Debian's wasi-libc: headers in /usr/include/wasm32-wasi, libraries in
    # /usr/lib/wasm32-wasi (clang's default sysroot is /). -nostdlibinc keeps
    # the host's /usr/include (glibc) out of the search path.
    [ -f /usr/include/wasm32-wasi/stdlib.h ] && [ -f /usr/lib/wasm32-wasi/libc.a ] ||
        die "no wasi-libc (/usr/include/wasm32-wasi, /usr/lib/wasm32-wasi): $install_hint (or set WASI_SYSROOT to a wasi-libc sysroot)"
    sysroot_flags=(-nostdlibinc -isystem /usr/include/wasm32-wasi)
fi

# The host binary, for `toolhost componentize`.
toolhost=${TOOLHOST_BIN:-}
if [ -z "$toolhost" ]; then
    for b in "$repo/target/release/toolhost" "$repo/target/debug/toolhost"; do
        [ -x "$b" ] || continue
        if [ -z "$toolhost" ] || [ "$b" -nt "$toolhost" ]; then toolhost=$b; fi
    done
fi
if [ -z "$toolhost" ]; then
    toolhost=$(command -v toolhost) ||
        die "no toolhost binary (it turns the core module into a component): build it with \`cargo build -p toolhost\` in $repo, put it on PATH, or set TOOLHOST_BIN"
fi
[ -x "$toolhost" ] || command -v "$toolhost" >/dev/null ||
    die "TOOLHOST_BIN=$toolhost is not an executable (build the host with \`cargo build -p toolhost\`)"
"$toolhost" componentize --help >/dev/null 2>&1 ||
    die "$toolhost has no \`componentize\` command (too old? rebuild it, or set TOOLHOST_BIN)"

mkdir -p "$repo/target/c-build"
stage=$(mktemp -d "$repo/target/c-build/$name.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/app" "$stage/sdk"

target_flags=(--target=wasm32-wasi "${sysroot_flags[@]}")
cflags=(-O2 -std=gnu17 -Wall -Wextra -I "$sdk_dir" -I "$plugin_dir")
start=$(date +%s.%N)

# The SDK and the generated bindings (the SDK compiles without warnings).
objects=()
for src in "$sdk_dir/toolhost.c" "$sdk_dir/json.c" "$gen_dir/plugin.c"; do
    obj=$stage/sdk/$(basename "$src" .c).o
    "$clang" "${target_flags[@]}" "${cflags[@]}" -c "$src" -o "$obj" ||
        die "compiling the SDK's $(basename "$src") failed (see above)"
    objects+=("$obj")
done
# The plugin.
read -r -a extra_cflags <<<"${TOOLHOST_CFLAGS:-}"
for src in "${sources[@]}"; do
    obj=$stage/app/$(basename "$src" .c).o
    "$clang" "${target_flags[@]}" "${cflags[@]}" "${extra_cflags[@]}" -c "$src" -o "$obj" ||
        die "compiling $src failed (see above)"
    objects+=("$obj")
done

# Link a reactor (no main; _initialize runs constructors) with a 1 MiB stack
# placed first, so that a stack overflow traps instead of overwriting data.
read -r -a extra_ldflags <<<"${TOOLHOST_LDFLAGS:-}"
if ! "$clang" "${target_flags[@]}" -fuse-ld="$linker" -mexec-model=reactor -Wl,-z,stack-size=1048576 -Wl,--stack-first \
    -Wl,--strip-debug -o "$stage/core.wasm" "${objects[@]}" "$gen_dir/plugin_component_type.o" \
    "${extra_ldflags[@]}" 2>"$stage/link.log"; then
    cat "$stage/link.log" >&2
    grep -q 'undefined symbol: toolhost_plugin_tools' "$stage/link.log" &&
        echo "build.sh: hint: export the tools with TOOLHOST_EXPORT_TOOLS(<your toolhost_tool array>) in app.c" >&2
    die "linking $name failed (see above)"
fi
cat "$stage/link.log" >&2

"$toolhost" componentize "$stage/core.wasm" -o "$stage/$name.wasm" ||
    die "toolhost componentize failed for $plugin_dir (see above)"

install_component "$stage/$name.wasm" "$start"
