"""Dependency hygiene: every crate of Cargo.lock checked against a local copy
of the RustSec advisory database, as `cargo audit` does, without installing
it or reaching the network.

    python3 tests/audit.py [--db ../shared/advisory-db] [--lock Cargo.lock]
    python3 tests/audit.py --self-test   # the version matching, and a lock it must fail

A vulnerability advisory whose patched / unaffected versions do not cover the
locked version fails the run (exit 1), unless `tests/audit-ignore.toml` lists
its id with a reason. Informational advisories (unmaintained, unsound) and
withdrawn ones are printed, not failed. Without the database (a machine
without the shared folder) the check is skipped with a note, exit 0.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def version(text: str) -> tuple[int, int, int]:
    """The numeric part of a version (`1.2.3-rc.1` -> (1, 2, 3)); missing
    parts are 0."""
    core = text.strip().split("-")[0].split("+")[0]
    parts = [int(p) if p.isdigit() else 0 for p in core.split(".")[:3]]
    return tuple(parts + [0] * (3 - len(parts)))  # type: ignore[return-value]


def matches(req: str, v: tuple[int, int, int]) -> bool:
    """Whether `v` meets one requirement: comparators joined by `,`, each
    `>=`, `>`, `<=`, `<`, `=`, `^`, `~` or bare (caret), as Cargo reads them."""
    for comparator in req.split(","):
        comparator = comparator.strip()
        m = re.fullmatch(r"(>=|<=|>|<|=|\^|~)?\s*([0-9][0-9A-Za-z.+-]*)", comparator)
        if not m:
            raise ValueError(f"requirement `{req}`")
        op, text = m.group(1) or "^", m.group(2)
        given = len(text.split("-")[0].split("."))
        bound = version(text)
        if op == ">=" and not v >= bound:
            return False
        if op == ">" and not v > bound:
            return False
        if op == "<=" and not v <= bound:
            return False
        if op == "<" and not v < bound:
            return False
        if op == "=" and v[:given] != bound[:given]:
            return False
        if op == "~":
            upper = (bound[0] + 1, 0, 0) if given == 1 else (bound[0], bound[1] + 1, 0)
            if not bound <= v < upper:
                return False
        if op == "^":
            if bound[0] > 0 or given == 1:
                upper = (bound[0] + 1, 0, 0)
            elif bound[1] > 0 or given == 2:
                upper = (0, bound[1] + 1, 0)
            else:
                upper = (0, 0, bound[2] + 1)
            if not bound <= v < upper:
                return False
    return True


def advisories(db: Path, crate: str):
    folder = db / "crates" / crate
    if not folder.is_dir():
        return
    for file in sorted(folder.glob("*.md")):
        text = file.read_text()
        m = re.search(r"```toml\n(.*?)\n```", text, re.S)
        if not m:
            continue
        data = tomllib.loads(m.group(1))
        title = next((line[2:] for line in text.splitlines() if line.startswith("# ")), "")
        yield data, title


def self_test() -> int:
    """The requirement matching as Cargo reads it, and a check that fails:
    a lock holding a version an advisory of the database names."""
    cases = [
        (">= 0.41.0", "0.38.4", False), (">= 0.41.0", "0.41.0", True),
        ("^1.2.3", "1.9.0", True), ("^1.2.3", "2.0.0", False), ("^0.3.1", "0.3.9", True),
        ("^0.3.1", "0.4.0", False), ("^0.0.3", "0.0.4", False), ("~1.2", "1.2.9", True),
        ("~1.2", "1.3.0", False), (">= 1.0, < 1.4", "1.3.2", True), (">= 1.0, < 1.4", "1.4.0", False),
        ("= 2.1", "2.1.7", True), ("0.9", "0.9.4", True), ("0.9", "0.10.0", False),
    ]
    for req, v, want in cases:
        if matches(req, version(v)) != want:
            print(f"audit self-test: `{req}` against {v}: expected {want}")
            return 1
    import subprocess, tempfile
    with tempfile.TemporaryDirectory() as d:
        lock = Path(d) / "Cargo.lock"
        lock.write_text(
            'version = 4\n[[package]]\nname = "quick-xml"\nversion = "0.38.4"\n'
            'source = "registry+https://github.com/rust-lang/crates.io-index"\n'
        )
        empty = Path(d) / "ignore.toml"
        empty.write_text("[ignore]\n")
        run = subprocess.run(
            [sys.executable, __file__, "--lock", str(lock), "--ignore", str(empty)],
            capture_output=True, text=True,
        )
        if not (REPO.parent / "shared" / "advisory-db" / "crates").is_dir():
            print("audit self-test: matching ok; no database here for the failing lock")
            return 0
        if run.returncode != 1 or "VULNERABLE: quick-xml 0.38.4" not in run.stdout:
            print(f"audit self-test: a vulnerable lock passed:\n{run.stdout}{run.stderr}")
            return 1
    print(f"audit self-test: {len(cases)} requirements matched as Cargo reads them; a vulnerable lock fails")
    return 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    p = argparse.ArgumentParser()
    p.add_argument("--db", default=str(REPO.parent / "shared" / "advisory-db"))
    p.add_argument("--lock", default=str(REPO / "Cargo.lock"))
    p.add_argument("--ignore", default=str(REPO / "tests" / "audit-ignore.toml"))
    args = p.parse_args()
    db = Path(args.db)
    if not (db / "crates").is_dir():
        print(f"audit: no advisory database at {db}: skipped (the shared folder's copy is not here)")
        return 0
    ignored = {}
    if Path(args.ignore).is_file():
        ignored = tomllib.loads(Path(args.ignore).read_text()).get("ignore", {})
    lock = tomllib.loads(Path(args.lock).read_text())
    packages = [
        pkg for pkg in lock.get("package", []) if str(pkg.get("source", "")).startswith("registry+")
    ]
    failed, noted = [], []
    for pkg in packages:
        v = version(pkg["version"])
        for data, title in advisories(db, pkg["name"]):
            adv = data.get("advisory", {})
            if adv.get("withdrawn"):
                continue
            versions = data.get("versions", {})
            safe = versions.get("patched", []) + versions.get("unaffected", [])
            if any(matches(req, v) for req in safe):
                continue
            line = f"{pkg['name']} {pkg['version']}: {adv.get('id')} {title} (patched: {', '.join(versions.get('patched', [])) or 'none'})"
            if adv.get("informational"):
                noted.append(f"{line} [{adv['informational']}]")
            elif adv.get("id") in ignored:
                noted.append(f"{line} [ignored: {ignored[adv['id']]}]")
            else:
                failed.append(line)
    snapshot = (db / "SNAPSHOT.md").read_text().strip().splitlines()[:1] if (db / "SNAPSHOT.md").is_file() else []
    print(f"audit: {len(packages)} crates of {args.lock} against {db} {' '.join(snapshot)}")
    for line in noted:
        print(f"  note: {line}")
    for line in failed:
        print(f"  VULNERABLE: {line}")
    print(f"audit: {len(failed)} vulnerable, {len(noted)} noted")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
