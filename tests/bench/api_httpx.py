"""An API tool's added latency as a plain Python client sees it: the same
`GET /get` of a local httpbinx (uvicorn, one process) sent straight to it and
through toolhost's native invoke of the API tool mounting it, one kept-alive
httpx client per path, 1,000 sequential calls each, in alternating rounds of
100 so both see the same machine. Also `GET /health` of toolhost (the
loopback hop alone, no tool). Prints medians and the added time; the repo's
own figure is `toolhost-bench api` (docs/benchmarks.md#where-an-api-tools-added-time-goes).

    cargo build --release -p toolhost
    target/venvs/httpapi/bin/python tests/bench/api_httpx.py   # tests/venv.sh tests/httpapi/requirements.txt makes it
"""

import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import httpx

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("TOOLHOST_BIN", os.path.join(ROOT, "target/release/toolhost"))
sys.path.insert(0, os.path.join(ROOT, "tests/bench"))
from benchserver import BenchServer  # noqa: E402

CALLS = int(os.environ.get("BENCH_CALLS", "1000"))
ROUND = 100


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def switches(pid):
    """The server's context switches so far, all its threads summed: each is
    a thread going to sleep or being put off a core (a wake-up handed to
    another worker shows here)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/status") as f:
                for line in f:
                    if "ctxt_switches" in line:
                        total += int(line.split()[-1])
        except OSError:
            pass
    return total


def main():
    port = free_port()
    upstream = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "httpbinx.main:app", "--host", "127.0.0.1",
         "--port", str(port), "--log-level", "warning"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    work = tempfile.mkdtemp(prefix="api-httpx-")
    server = None
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                httpx.get(f"{base}/get").raise_for_status()
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        folder = os.path.join(work, "plugins", "hbx")
        os.makedirs(folder)
        with open(os.path.join(folder, "hbx.toml"), "w") as f:
            f.write(f'[api]\nspec = "{base}/openapi.json"\nbase_url = "{base}"\n'
                    f'allow = ["127.0.0.1:{port}"]\npaths = ["/get"]\n')
        server = BenchServer(BIN, os.path.join(work, "plugins"), os.path.join(work, "data"))
        server.wait_ready()

        direct = httpx.Client(base_url=base)
        through = httpx.Client(base_url=server.base)
        hop = httpx.Client(base_url=server.base)
        calls = {
            "direct": lambda: direct.get("/get"),
            "through": lambda: through.post("/tools/hbx_get_get_get/invoke", json={"params": {}}),
            "health": lambda: hop.get("/health"),
        }
        answer = calls["through"]()
        assert answer.status_code == 200 and answer.json()["status"] == "success", answer.text
        times = {name: [] for name in calls}
        switched = {name: 0 for name in calls}
        for name, call in calls.items():  # warm-up
            for _ in range(50):
                call()
        for _ in range(CALLS // ROUND):
            for name, call in calls.items():
                before = switches(server.pid)
                for _ in range(ROUND):
                    t0 = time.perf_counter()
                    r = call()
                    times[name].append((time.perf_counter() - t0) * 1e6)
                    assert r.status_code == 200, r.text
                switched[name] += switches(server.pid) - before
        med = {name: statistics.median(t) for name, t in times.items()}
        for name, t in times.items():
            t.sort()
            print(f"{name:8s} median {med[name]:8.1f} us  p90 {t[int(len(t) * 0.9)]:8.1f} us")
        print(f"added by toolhost (through - direct): median {med['through'] - med['direct']:.1f} us")
        print(f"of which the loopback hop alone (GET /health): {med['health']:.1f} us")
        print("the server's context switches per call: "
              f"through {switched['through'] / len(times['through']):.2f}, "
              f"health {switched['health'] / len(times['health']):.2f}")
    finally:
        if server:
            server.stop()
        upstream.terminate()
        upstream.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
