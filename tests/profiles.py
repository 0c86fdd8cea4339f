"""The dev profile's shape (Cargo.toml): dependencies at opt-level 1 through
`[profile.dev]` itself, never through `[profile.dev.package."*"]` (it would
outrank cargo's build-override and build every proc macro and build script
at 1 as well), and each workspace member taken back to opt-level 0 with line
tables by a block of its own, so a new member is not built optimised and
without line numbers unnoticed.

    python3 tests/profiles.py               # checks the repo's Cargo.toml
    python3 tests/profiles.py --self-test   # checks the checker
"""

import json
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def problems(manifest: dict, members: list[str]) -> list[str]:
    """What is wrong with `manifest`'s dev profile for these members."""
    out = []
    dev = manifest.get("profile", {}).get("dev", {})
    packages = dev.get("package", {})
    if "*" in packages:
        out.append('[profile.dev.package."*"] outranks build-override: set the level in [profile.dev]')
    if str(dev.get("opt-level", 0)) != "1":
        out.append("[profile.dev] opt-level is not 1 (the dependencies' level)")
    for name in members:
        own = packages.get(name)
        if own is None:
            out.append(f"workspace member {name} has no [profile.dev.package.{name}] block")
            continue
        if str(own.get("opt-level")) != "0":
            out.append(f"[profile.dev.package.{name}] opt-level is not 0")
        if own.get("debug") != "line-tables-only":
            out.append(f'[profile.dev.package.{name}] debug is not "line-tables-only"')
    return out


def members() -> list[str]:
    meta = subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    return [p["name"] for p in json.loads(meta)["packages"]]


def self_test() -> int:
    good = {
        "profile": {
            "dev": {
                "opt-level": 1,
                "package": {"a": {"opt-level": 0, "debug": "line-tables-only"}},
            }
        }
    }
    cases = [
        (good, ["a"], 0),
        (good, ["a", "b"], 1),  # a member without its block
        ({"profile": {"dev": {"opt-level": 1, "package": {
            "*": {"opt-level": 1}, "a": {"opt-level": 0, "debug": "line-tables-only"}}}}}, ["a"], 1),
        ({"profile": {"dev": {"package": {"a": {"opt-level": 0, "debug": "line-tables-only"}}}}}, ["a"], 1),
        ({"profile": {"dev": {"opt-level": 1, "package": {"a": {"opt-level": 1, "debug": "line-tables-only"}}}}}, ["a"], 1),
        ({"profile": {"dev": {"opt-level": 1, "package": {"a": {"opt-level": 0}}}}}, ["a"], 1),
    ]
    failed = 0
    for manifest, names, want in cases:
        got = len(problems(manifest, names))
        if got != want:
            print(f"self-test: {names} {manifest}: {got} problems, expected {want}")
            failed += 1
    print(f"profiles self-test: {len(cases) - failed}/{len(cases)} cases pass")
    return 1 if failed else 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    manifest = tomllib.loads((ROOT / "Cargo.toml").read_text())
    names = members()
    found = problems(manifest, names)
    for p in found:
        print(f"Cargo.toml: {p}")
    if not found:
        print(f"dev profile: {len(names)} workspace members at opt-level 0 with line tables, dependencies at 1")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
