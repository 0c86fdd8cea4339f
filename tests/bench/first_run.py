#!/usr/bin/env python3
"""Time a first `make run` the way a new user meets it: the command as the
README gives it, from whatever this machine has (run it on a fresh machine,
or after `rm -rf target` for the warm-cache figure), until the server
answers `GET /health/ready`; then the server is stopped.

    python3 tests/bench/first_run.py [--timeout 3600] [--log target/first-run.log]

Every line `make run` prints is logged with the seconds since the start; the
summary gives each step's duration, a step starting at the first line that
marks it (the table STEPS below) and ending where the next one starts. Not
part of `make bench` (it needs an empty target/ to mean anything).
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# step name, a regular expression for the first line `make run` prints in it.
STEPS = [
    ("release build (host)", r"cargo build --release -p toolhost|release-build:"),
    ("waiting for the guests", r"make run: waiting for the guests"),
    ("guests (plugin profile)", r"--profile plugin"),
    ("embedding model", r"fetch-model|all-minilm"),
    ("Python plugins", r"componentize-py|sdk/python/build"),
    ("JavaScript plugins", r"componentize-js|sdk/js/build|jco"),
    ("C plugins", r"installing the C toolchain|sdk/c/build|clang"),
    ("precompile", r"precompile --plugins"),
    ("Docker and node image", r"ensure-docker|docker.io|build-image|debootstrap"),
    ("start-up", r"cargo run --release|toolhost serve|listening"),
]


def ready(bind):
    try:
        with urllib.request.urlopen(f"http://{bind}/health/ready", timeout=1) as r:
            return r.status == 200
    except Exception:
        return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--log", default=os.path.join(ROOT, "target/first-run.log"))
    ap.add_argument("--bind", default="127.0.0.1:8001")
    ap.add_argument("--target", default="run", help="the make target (default run)")
    args = ap.parse_args()
    if ready(args.bind):
        sys.exit(f"something already answers on {args.bind}: stop it first")
    os.makedirs(os.path.dirname(args.log), exist_ok=True)
    start = time.monotonic()
    marks = {}
    proc = subprocess.Popen(["make", args.target, f"BIND={args.bind}"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace", start_new_session=True)

    def pump(log):
        for line in proc.stdout:
            t = time.monotonic() - start
            log.write(f"{t:8.1f} {line}")
            log.flush()
            for name, pattern in STEPS:
                if name not in marks and re.search(pattern, line):
                    marks[name] = t
                    print(f"{t:8.1f}s  {name}", flush=True)

    with open(args.log, "w") as log:
        reader = threading.Thread(target=pump, args=(log,), daemon=True)
        reader.start()
        served = None
        while time.monotonic() - start < args.timeout:
            if ready(args.bind):
                served = time.monotonic() - start
                break
            if proc.poll() is not None:
                break
            time.sleep(1)
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        proc.wait(timeout=60)
        reader.join(timeout=10)

    print(f"\nfirst `make {args.target}` (log: {os.path.relpath(args.log, ROOT)})")
    order = sorted(marks.items(), key=lambda kv: kv[1])
    end = served if served is not None else time.monotonic() - start
    for i, (name, t) in enumerate(order):
        nxt = order[i + 1][1] if i + 1 < len(order) else end
        print(f"  {name:<26} {t:8.1f} s → {nxt:8.1f} s  {nxt - t:7.1f} s")
    if served is None:
        print(f"  NOT SERVING after {end:.0f} s (make exited {proc.returncode})")
        sys.exit(1)
    print(f"  serving (/health/ready)    {served:8.1f} s = {served / 60:.1f} min")


if __name__ == "__main__":
    main()
