#!/usr/bin/env bash
# tests/phase.sh --self-test: a compile phase whose compiler crashes once is
# run again and passes; one that crashes twice fails and prints the panic
# last; a compile error is not run again and its error is printed last; a
# plain phase passes its command's status through untouched.
set -uo pipefail

phase=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/phase.sh
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export PHASE_TARGET=$dir/target
failures=0

# A fake compiler: crashes (as cargo reports a rustc panic) while the
# counter file holds more than 0, counting down; `error` makes it fail as
# cargo reports a compile error instead.
cat >"$dir/cc.sh" <<'FAKE'
#!/usr/bin/env bash
n=$(cat "$1")
echo "run" >>"$1.runs"
if [ "${2:-}" = error ]; then
    echo "error[E0308]: mismatched types"
    echo "error: could not compile \`x\` (lib) due to 1 previous error"
    exit 101
fi
if [ "$n" -gt 0 ]; then
    echo $((n - 1)) >"$1"
    echo "thread 'rustc' panicked at compiler/rustc_middle/src/x.rs:1:1:" >&2
    printf 'Caused by:\n  process didn'"'"'t exit successfully: `rustc %s` (exit status: 101)\n' "$(head -c 3000 /dev/zero | tr '\0' x)" >&2
    exit 101
fi
echo "Finished"
FAKE
chmod +x "$dir/cc.sh"

check() { # name, expected status, expected runs, pattern its report (or last line) holds, status, output
    local name=$1 want=$2 runs=$3 pattern=$4 got=$5 out=$6
    local n
    n=$(wc -l <"$dir/$name.runs" 2>/dev/null || echo 0)
    local report
    if [ "$want" != 0 ] && [ "$name" != plain ]; then
        # A failed compile phase's report: what follows its "failed;" line.
        report=$(sed -n "/$name failed; what the compiler said/,\$p" "$out" | tail -n +2)
    else
        report=$(tail -n 1 "$out")
    fi
    if [ "$got" != "$want" ] || [ "$n" != "$runs" ] || ! grep -q -- "$pattern" <<<"$report"; then
        echo "phase self-test: $name: status $got (want $want), runs $n (want $runs), tail:" >&2
        tail -n 6 "$out" | cut -c1-200 >&2
        failures=$((failures + 1))
    fi
}

echo 1 >"$dir/once"
"$phase" --compile once "$dir/cc.sh" "$dir/once" >"$dir/once.out" 2>&1
check once 0 2 "once took" $? "$dir/once.out"
grep -q "once more" "$dir/once.out" || { echo "phase self-test: once: no retry said" >&2; failures=$((failures + 1)); }

echo 2 >"$dir/twice"
"$phase" --compile twice "$dir/cc.sh" "$dir/twice" >"$dir/twice.out" 2>&1
check twice 101 2 "panicked at" $? "$dir/twice.out"
if sed -n '/twice failed; what the compiler said/,$p' "$dir/twice.out" | awk 'length > 300 { found = 1 } END { exit !found }'; then
    echo "phase self-test: twice: a line over 300 characters in the report" >&2
    failures=$((failures + 1))
fi

echo 0 >"$dir/error"
"$phase" --compile error "$dir/cc.sh" "$dir/error" error >"$dir/error.out" 2>&1
check error 101 1 "E0308" $? "$dir/error.out"

echo 0 >"$dir/plain"
"$phase" plain sh -c 'echo run >>"$0.runs"; exit 3' "$dir/plain" >"$dir/plain.out" 2>&1
check plain 3 1 "failed with 3" $? "$dir/plain.out"

if [ $failures -ne 0 ]; then
    echo "phase self-test: $failures failed" >&2
    exit 1
fi
echo "phase self-test: ok (a crash retried once, a second crash and a compile error reported last, a plain status kept)"
