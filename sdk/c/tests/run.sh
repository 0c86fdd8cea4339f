#!/usr/bin/env bash
# Native unit tests of the C SDK, with AddressSanitizer (leaks included) and
# UndefinedBehaviorSanitizer:
#
#   sdk/c/tests/run.sh
#
# test_json.c: the JSON reader / writer and UTF-8 helpers (json.c).
# test_sdk.c: the toolkit export and the host imports (toolhost.c) through the
# generated bindings (gen/plugin.c), the wasm imports stubbed.
# Uses the host's C compiler (${CC:-cc}, gcc or clang); exits non-zero on any
# failure, warning or sanitizer report.
set -euo pipefail

tests=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
sdk=$(cd "$tests/.." && pwd)
cc=${CC:-cc}
command -v "$cc" >/dev/null || { echo "run.sh: no C compiler ($cc): apt-get install -y gcc" >&2; exit 1; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
flags=(-std=c17 -g -O1 -Wall -Wextra -Werror -fno-omit-frame-pointer
    -fsanitize=address,undefined -fno-sanitize-recover=all -I "$sdk")
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# The generated bindings carry wasm-only attributes (import/export names),
# which a native compiler ignores, and gcc finds a maybe-uninitialized read in
# them: warnings not ours to fix, so that file is compiled with -w.
"$cc" "${flags[@]}" -w -c "$sdk/gen/plugin.c" -o "$out/plugin.o"

status=0
"$cc" "${flags[@]}" "$tests/test_json.c" "$sdk/json.c" -lm -o "$out/test_json"
"$out/test_json" || status=1
"$cc" "${flags[@]}" "$tests/test_sdk.c" "$sdk/toolhost.c" "$sdk/json.c" "$out/plugin.o" -lm \
    -o "$out/test_sdk"
"$out/test_sdk" || status=1
[ $status -eq 0 ] && echo "run.sh: all C SDK tests passed" || echo "run.sh: FAILED" >&2
exit $status
