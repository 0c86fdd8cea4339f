"""Two (or more) release builds side by side on the native invoke path: for
each, a server of calc under `wrk -t2 -c50` (5 s on `GET /health`, then 5 s
on `POST /tools/calc_evaluate/invoke`), the server's CPU a request from
`perf stat`'s task-clock over the load, and the requests a second. The
builds alternate, round by round (ROUNDS, default 4; the order reversed
every other round), each on a fresh server and data directory, and the
medians are printed at the end. Loopback only, bounded (about 25 s a build
a round). Needs `perf` and `wrk` (Debian: linux-perf, wrk).

    python3 tests/bench/invoke_ab.py before=/tmp/toolhost-before after=target/release/toolhost
"""

import os
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests/bench"))
from benchserver import BenchServer, calc_under_wrk  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "4"))


def load(server, url, extra):
    """(requests a second, server CPU us a request, p99 latency ms) under
    6 s of wrk, the CPU read over 5 s of it."""
    wrk = subprocess.Popen(["wrk", "-t2", "-c50", "-d6s", "--latency", *extra, url], stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    stat = subprocess.run(["perf", "stat", "-x,", "-e", "task-clock", "-p", str(server.pid), "--", "sleep", "5"],
                          capture_output=True, text=True).stderr
    out = wrk.communicate()[0]
    rps = float(re.search(r"Requests/sec:\s+(\S+)", out).group(1))
    ms = next(float(line.split(",")[0]) for line in stat.splitlines() if "task-clock" in line)
    return rps, ms * 1e3 / 5 / rps, p99_ms(out)


def p99_ms(out):
    """wrk's 99th percentile latency (its `--latency` table), in ms."""
    value, unit = re.search(r"^\s*99%\s+([\d.]+)(us|ms|s)\s*$", out, re.M).groups()
    return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]


def main():
    builds = [arg.split("=", 1) for arg in sys.argv[1:]]
    if len(builds) < 2 or any(len(b) != 2 for b in builds):
        sys.exit(__doc__)
    for tool in ("perf", "wrk"):
        if not shutil.which(tool):
            sys.exit(f"invoke_ab.py: `{tool}` is not installed")
    runs = {name: [] for name, _ in builds}
    for r in range(ROUNDS):
        for name, binary in builds if r % 2 == 0 else builds[::-1]:
            work, plugins, lua = calc_under_wrk("invoke-ab-")
            server = BenchServer(binary, plugins, os.path.join(work, "data"))
            try:
                server.wait_ready()
                url = f"{server.base}/tools/calc_evaluate/invoke"
                subprocess.run(["wrk", "-t2", "-c50", "-d2s", "-s", lua, url], capture_output=True)
                health = load(server, f"{server.base}/health", [])
                invoke = load(server, url, ["-s", lua])
            finally:
                server.stop()
                shutil.rmtree(work, ignore_errors=True)
            runs[name].append((invoke, health))
            print(f"round {r} {name}: invoke {invoke[0]:.0f} req/s, {invoke[1]:.1f} us CPU a call, "
                  f"p99 {invoke[2]:.2f} ms; "
                  f"health {health[0]:.0f} req/s, {health[1]:.1f} us; ratio {invoke[0] / health[0]:.3f}", flush=True)
    for name, _ in builds:
        got = runs[name]
        print(f"{name}: server CPU a call median {statistics.median(i[1] for i, _ in got):.1f} us, "
              f"invoke {statistics.median(i[0] for i, _ in got):.0f} req/s, "
              f"p99 {statistics.median(i[2] for i, _ in got):.2f} ms, "
              f"health {statistics.median(h[0] for _, h in got):.0f} req/s, "
              f"invoke/health {statistics.median(i[0] / h[0] for i, h in got):.3f}")


if __name__ == "__main__":
    main()
