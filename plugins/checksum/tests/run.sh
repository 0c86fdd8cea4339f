#!/usr/bin/env bash
# Native unit tests of checksum's algorithms (hashes.c), with AddressSanitizer
# and UndefinedBehaviorSanitizer: plugins/checksum/tests/run.sh
set -euo pipefail
tests=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cc=${CC:-cc}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$cc" -std=c17 -g -O1 -Wall -Wextra -Werror -fsanitize=address,undefined -fno-sanitize-recover=all \
    "$tests/test_hashes.c" "$tests/../hashes.c" -o "$out/test_hashes"
"$out/test_hashes"
