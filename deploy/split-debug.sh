#!/bin/sh
# Move a release binary's line tables and symbols into `<binary>.debug`
# beside it, linked by `.gnu_debuglink`: the binary shipped is what runs
# (65 MB instead of 381 MB for toolhost), and a panic's backtrace, perf and
# gdb still find names and lines in the file beside it (without it a
# backtrace has no frames). Run by `make build`; a binary split already is
# left as it is.
set -eu
bin=$1
if ! readelf -S -W "$bin" | grep -q ' \.debug_line '; then
    exit 0
fi
objcopy --only-keep-debug "$bin" "$bin.debug"
chmod -x "$bin.debug"
objcopy --strip-all --add-gnu-debuglink="$bin.debug" "$bin"
size() { du -m "$1" | cut -f1; }
echo "split-debug: $bin $(size "$bin") MB, $bin.debug $(size "$bin.debug") MB"
