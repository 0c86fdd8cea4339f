"""What the resource links of MCP results cost: calc calls and file writes
over MCP (release server) in a session without a workspace, and in sessions
whose workspace holds 10, 1,000 and 10,000 files. The files a call wrote are
told by the kernel (inotify), so the figures should not grow with the
workspace (they did when it was walked before and after each call: 2.9x the
empty case at 100 files, 9.7x at 1,000). Median and p99 of 400 calls each.

    cargo build --release -p toolhost && make plugins
    python3 tests/bench/written_walk.py
"""

import json
import os
import shutil
import statistics
import sys
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("TOOLHOST_BIN", os.path.join(ROOT, "target/release/toolhost"))
sys.path.insert(0, os.path.join(ROOT, "tests/bench"))
from benchserver import BenchServer, work_with_plugins  # noqa: E402

CALLS = 400


def main():
    work, plugins = work_with_plugins("written-walk-", ["calc", "files"])
    server = BenchServer(BIN, plugins, os.path.join(work, "data"))
    server.wait_ready()

    def post(session, body):
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        if session:
            headers |= {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        req = urllib.request.Request(f"{server.base}/mcp", data=json.dumps(body).encode(), headers=headers)
        with urllib.request.urlopen(req) as r:
            return r.headers.get("mcp-session-id"), r.read()

    def open_session():
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}
        session, _ = post(None, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        post(session, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        return session

    def call(session, i, tool, args):
        body = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": tool, "arguments": args}}
        return post(session, body)

    def timed(session, n):
        ms = []
        for i in range(n):
            t0 = time.perf_counter()
            call(session, i + 10, "calc_evaluate", {"expression": "6*7"})
            ms.append((time.perf_counter() - t0) * 1000)
        ms.sort()
        return statistics.median(ms), ms[int(len(ms) * 0.99)]

    try:
        bare = open_session()
        timed(bare, 50)  # warm
        rows = [("no workspace", *timed(bare, CALLS))]
        for n in (10, 1000, 10000):
            session = open_session()
            for i in range(n):
                call(session, 9000 + i, "files_write", {"path": f"d{i % 10}/f{i}.txt", "content": "x"})
            timed(session, 50)
            rows.append((f"{n} files", *timed(session, CALLS)))
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    for name, median, p99 in rows:
        print(f"{name:14s} median {median:.3f} ms  p99 {p99:.3f} ms  ratio {median / rows[0][1]:.2f}")


if __name__ == "__main__":
    main()
