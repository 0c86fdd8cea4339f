"""Dependency hygiene, the licence half (tests/audit.py is the advisory
half): every crate the workspace depends on, for the host
(x86_64-unknown-linux-gnu) and for the guests (wasm32-wasip2), must be
under a licence toolhost (Apache-2.0) can ship with, as its SPDX expression
in Cargo.toml says (`cargo metadata`, after `cargo fetch` of what the
build has not fetched yet).

    python3 tests/licenses.py               # exit 1 naming each crate whose licence is not allowed
    python3 tests/licenses.py --self-test   # the expression reading, and expressions it must refuse

An expression passes when some choice it offers is allowed: `A OR B` needs
one of them, `A AND B` both, `A WITH exception` A and a listed exception;
the legacy `A/B` reads as `A OR B`. A crate with no `license` field (a
licence file only) fails unless listed in EXCEPTIONS with the reason.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Permissive licences, and MPL-2.0 (file-level copyleft: its files stay
# under it, which shipping a binary built from them does not break). IJG
# (libjpeg's, in jpeg-encoder's DCT, the image plugin's JPEG writer) is
# permissive and asks that a binary's documentation say it is based in part
# on the Independent JPEG Group's work: docs/builtin-tools.md says so.
# APAFML (Adobe's Core 14 AFM files: use, copy and distribute for any
# purpose, copyright notices kept, modifications noted; the doc plugin's
# build script reads the standard fonts' widths from them) is permissive
# too: docs/builtin-tools.md gives the notice.
ALLOWED = {
    "0BSD", "APAFML", "Apache-2.0", "BSD-2-Clause", "BSD-3-Clause", "BSL-1.0", "CC0-1.0",
    "CDLA-Permissive-2.0", "IJG", "ISC", "MIT", "MIT-0", "MPL-2.0", "Unicode-3.0",
    "Unicode-DFS-2016", "Unlicense", "Zlib",
}
ALLOWED_EXCEPTIONS = {"LLVM-exception"}
# Crates with a licence file and no SPDX expression: name -> why allowed.
EXCEPTIONS: dict[str, str] = {}
TARGETS = ["x86_64-unknown-linux-gnu", "wasm32-wasip2"]


class Unreadable(Exception):
    pass


def allowed(expression: str) -> bool:
    """Whether the SPDX `expression` offers a choice of allowed licences."""
    text = expression.replace("/", " OR ")
    tokens = re.findall(r"\(|\)|[A-Za-z0-9.+-]+", text)
    pos = 0

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str:
        nonlocal pos
        if pos >= len(tokens):
            raise Unreadable(expression)
        pos += 1
        return tokens[pos - 1]

    def either() -> bool:
        ok = both()
        while peek() == "OR":
            take()
            ok = both() or ok
        return ok

    def both() -> bool:
        ok = one()
        while peek() == "AND":
            take()
            ok = one() and ok
        return ok

    def one() -> bool:
        token = take()
        if token == "(":
            ok = either()
            if take() != ")":
                raise Unreadable(expression)
            return ok
        if token in ("AND", "OR", "WITH", ")"):
            raise Unreadable(expression)
        ok = token.rstrip("+") in ALLOWED
        if peek() == "WITH":
            take()
            ok = ok and take() in ALLOWED_EXCEPTIONS
        return ok

    result = either()
    if pos != len(tokens):
        raise Unreadable(expression)
    return result


def crates(target: str) -> list[dict]:
    # What the build has not fetched yet (test-only crates, on a fresh
    # machine where only the host was built) is fetched first.
    fetch = subprocess.run(
        ["cargo", "fetch", "--locked", "--target", target], cwd=REPO, capture_output=True, text=True
    )
    if fetch.returncode != 0:
        sys.exit(f"licenses: cargo fetch for {target} failed (is crates.io reachable?):\n{fetch.stderr[-2000:]}")
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--offline", "--filter-platform", target],
        cwd=REPO, capture_output=True, text=True,
    )
    if out.returncode != 0:
        sys.exit(f"licenses: cargo metadata for {target} failed:\n{out.stderr[-2000:]}")
    meta = json.loads(out.stdout)
    members = set(meta["workspace_members"])
    return [p for p in meta["packages"] if p["id"] not in members]


def self_test() -> None:
    for good in ["MIT", "MIT OR Apache-2.0", "MIT/Apache-2.0", "Apache-2.0 WITH LLVM-exception",
                 "(MIT OR Apache-2.0) AND Unicode-3.0", "GPL-3.0 OR MIT", "ISC AND (Apache-2.0 OR ISC)"]:
        assert allowed(good), good
    for bad in ["GPL-3.0", "MIT AND GPL-3.0", "AGPL-3.0-only", "Apache-2.0 WITH Classpath-exception-2.0",
                "(GPL-2.0 OR LGPL-2.1) AND MIT", "SSPL-1.0/BUSL-1.1"]:
        assert not allowed(bad), bad
    for unreadable in ["MIT OR", "(MIT", "MIT Apache-2.0", "AND MIT"]:
        try:
            allowed(unreadable)
        except Unreadable:
            continue
        raise AssertionError(f"read: {unreadable}")
    print("licenses self-test: 7 allowed, 6 refused, 4 unreadable expressions as expected")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        self_test()
        return
    seen: dict[tuple[str, str], str | None] = {}
    for target in TARGETS:
        for p in crates(target):
            seen[(p["name"], p["version"])] = p.get("license")
    bad = []
    counts: collections.Counter[str] = collections.Counter()
    for (name, version), expression in sorted(seen.items()):
        if not expression:
            if name not in EXCEPTIONS:
                bad.append(f"{name} {version}: no SPDX licence expression")
            continue
        try:
            ok = allowed(expression)
        except Unreadable:
            ok = False
            expression = f"unreadable: {expression}"
        counts[expression] += 1
        if not ok:
            bad.append(f"{name} {version}: {expression}")
    if bad:
        print("licenses: crates under licences not allowed (tests/licenses.py, ALLOWED):", file=sys.stderr)
        for b in bad:
            print(f"  {b}", file=sys.stderr)
        sys.exit(1)
    top = ", ".join(f"{k} {v}" for k, v in counts.most_common(5))
    print(f"licenses: {len(seen)} crates ({' and '.join(TARGETS)}), every one allowed; most: {top}")


if __name__ == "__main__":
    main()
