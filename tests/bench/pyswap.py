#!/usr/bin/env python3
"""A Python plugin's hot swap, two ways, on one release server (textstats,
an 18 MB componentize-py component):

- dropped in: a new version (the built component with a tag appended, so new
  bytes) renamed into the plugins folder; the server compiles it (Winch's
  quick build first, Cranelift's behind);
- built with the server's key: `toolhost build plugins/textstats --out
  <plugins> --cache-key <the server's key>` from a copy of the plugin's
  sources with one line changed, so a new component each time; the command
  compiles it before it moves it in.

Each swap is timed from the moment the new component is in the plugins
folder (the rename; for the build, seen by polling the folder every
millisecond) to the first call answered by that version (the
`x-toolhost-plugin-version` header), the client calling in a loop from then
on, as an agent would (not after the build command exits: it still cleans
up). For the build, its own time is given beside (componentize-py and the
compile it now does), and the swap timed from the moment its compiled entry
appeared in `.compile-cache/` (which the server starts loading at once,
before the component arrives).

    target/venvs/httpapi/bin/python tests/bench/pyswap.py [--swaps 3] [--built-only]

TOOLHOST_BIN picks the binary (default target/release/toolhost).
"""

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import httpx

sys.path.insert(0, os.path.dirname(__file__))
from benchserver import ROOT, BenchServer  # noqa: E402

BIN = os.environ.get("TOOLHOST_BIN", os.path.join(ROOT, "target/release/toolhost"))
SOURCE = os.path.join(ROOT, "target/plugins/textstats.wasm")
TOOL = "/tools/textstats_summary/invoke"


def leb(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def tagged(data, tag):
    """`data` (a component) with a custom section holding `tag` appended."""
    name = b"toolhost-bench"
    payload = leb(len(name)) + name + tag.encode()
    return data + b"\x00" + leb(len(payload)) + payload


def served(client, new, deadline=120):
    """Call until `new(version)` holds for the version that answered; that
    time (perf_counter) and the version."""
    end = time.perf_counter() + deadline
    while time.perf_counter() < end:
        r = client.post(TOOL, json={"params": {"text": "a b c"}})
        version = r.headers.get("x-toolhost-plugin-version")
        if new(version):
            return time.perf_counter(), version
        time.sleep(0.001)
    raise SystemExit(f"no new version served within {deadline} s")


def inode(path):
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None


def entries(cache):
    try:
        return {n for n in os.listdir(cache) if n.endswith(".cwasm")}
    except FileNotFoundError:
        return set()


def arrivals(path, old_inode, cache, build):
    """Poll every millisecond until `path`'s inode changes: the time then
    (none if `build` ended first without changing it), and the time a new
    entry first appeared in `cache` (none if none did)."""
    before, entry = entries(cache), None
    while True:
        if entry is None and entries(cache) - before:
            entry = time.perf_counter()
        if inode(path) != old_inode:
            return time.perf_counter(), entry
        if build.poll() is not None:
            moved = inode(path) not in (old_inode, None)
            return (time.perf_counter() if moved else None), entry
        time.sleep(0.001)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--swaps", type=int, default=3)
    ap.add_argument("--pause", type=float, default=15.0,
                    help="seconds between swaps (Cranelift's build of a dropped-in one finishes)")
    ap.add_argument("--built-only", action="store_true",
                    help="only the swaps built with --cache-key")
    args = ap.parse_args()
    for need in (BIN, SOURCE):
        if not os.path.exists(need):
            raise SystemExit(f"missing {need}: `make plugins` and `cargo build --release -p toolhost`")
    work = tempfile.mkdtemp(prefix="pyswap-")
    plugins = os.path.join(work, "plugins")
    os.makedirs(plugins)
    shutil.copy(SOURCE, plugins)
    shutil.copy(SOURCE.replace(".wasm", ".toml"), plugins)
    data = os.path.join(work, "data")
    log = open(os.path.join(work, "server.log"), "w")
    server = BenchServer(BIN, plugins, data, log=log, level="info")
    try:
        server.wait_ready()
        client = httpx.Client(base_url=server.base, timeout=120)
        target = os.path.join(plugins, "textstats.wasm")
        original = open(SOURCE, "rb").read()

        dropped = []
        for i in range(0 if args.built_only else args.swaps):
            new = tagged(original, f"swap-{i}-{time.time()}")
            tmp = os.path.join(plugins, ".textstats.wasm.part")
            with open(tmp, "wb") as f:
                f.write(new)
            start = time.perf_counter()
            os.rename(tmp, target)
            version = hashlib.sha256(new).hexdigest()
            dropped.append((served(client, lambda v: v == version)[0] - start) * 1e3)
            print(f"dropped in {i}: {dropped[-1]:.0f} ms", flush=True)
            time.sleep(args.pause)

        sources = os.path.join(work, "textstats-src")
        shutil.copytree(os.path.join(ROOT, "plugins/textstats"), sources,
                        ignore=shutil.ignore_patterns("__pycache__", "tests"))
        app = os.path.join(sources, "app.py")
        text = open(app).read()
        key = os.path.join(data, "compile-cache.key")
        built, builds, overlapped = [], [], []
        for i in range(args.swaps):
            with open(app, "w") as f:
                f.write(text + f"\n# pyswap {i} {time.time()}\n")
            old = client.post(TOOL, json={"params": {"text": "a b c"}}).headers[
                "x-toolhost-plugin-version"]
            old_inode = os.stat(target).st_ino
            began = time.perf_counter()
            output = open(os.path.join(work, f"build-{i}.log"), "w+")
            build = subprocess.Popen(
                [BIN, "build", sources, "--out", plugins, "--cache-key", key],
                stdout=output, stderr=subprocess.STDOUT,
                env={**os.environ, "TOOLHOST_BUILD_CACHE": "off"})
            found, entry = arrivals(target, old_inode, os.path.join(plugins, ".compile-cache"),
                                    build)
            if found is not None:
                answered, version = served(client, lambda v: v != old)
            if build.wait() != 0 or found is None:
                output.seek(0)
                raise SystemExit(f"toolhost build failed:\n{output.read()}")
            output.close()
            if version != hashlib.sha256(open(target, "rb").read()).hexdigest():
                raise SystemExit(f"version {version[:12]} answered: not the built component")
            builds.append((found - began) * 1e3)
            built.append((answered - found) * 1e3)
            overlapped.append((answered - (entry or found)) * 1e3)
            print(f"built {i}: swap {built[-1]:.0f} ms, {overlapped[-1]:.0f} ms from its entry's "
                  f"arrival (the build before it: {builds[-1] / 1e3:.1f} s)", flush=True)
            time.sleep(1)

        if dropped:
            print(f"dropped in (compiled by the server): median {statistics.median(dropped):.0f} ms "
                  f"(min {min(dropped):.0f}, max {max(dropped):.0f}), {args.swaps} swaps")
        print(f"built with --cache-key (compiled by the build): median {statistics.median(built):.0f} ms "
              f"(min {min(built):.0f}, max {max(built):.0f}); the build itself median "
              f"{statistics.median(builds) / 1e3:.1f} s")
        print(f"  the same swaps timed from the compiled entry's arrival in .compile-cache/: median "
              f"{statistics.median(overlapped):.0f} ms (min {min(overlapped):.0f}, "
              f"max {max(overlapped):.0f})")
    finally:
        server.stop()
        log.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
