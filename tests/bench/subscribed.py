"""How soon an MCP client subscribed to a workspace file hears that it
changed (`notifications/resources/updated` on its standalone stream), from
the moment another process wrote the file on disk, and from the moment a
`files_write` call over MCP answered. Median and p90 of 40 writes each,
0.2-0.45 s apart at random (a fixed gap could fall in step with a server
that looks at the files periodically; its 2 s look-anyway never comes first).

    cargo build --release -p toolhost && make plugins
    python3 tests/bench/subscribed.py
"""

import http.client
import json
import os
import queue
import random
import shutil
import statistics
import sys
import threading
import time
import urllib.parse

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("TOOLHOST_BIN", os.path.join(ROOT, "target/release/toolhost"))
sys.path.insert(0, os.path.join(ROOT, "tests/bench"))
from benchserver import BenchServer, work_with_plugins  # noqa: E402

WRITES = 40
URI = "toolhost://workspace/watched/a.txt"


class Client:
    def __init__(self, base):
        self.addr = urllib.parse.urlsplit(base).netloc
        self.conn = http.client.HTTPConnection(self.addr)
        self.session = None

    def post(self, body):
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        if self.session:
            headers |= {"mcp-session-id": self.session, "mcp-protocol-version": "2025-11-25"}
        self.conn.request("POST", "/mcp", json.dumps(body), headers)
        r = self.conn.getresponse()
        self.session = self.session or r.getheader("mcp-session-id")
        return r.read()

    def listen(self, notes):
        """The standalone stream's notifications of updates, each put in
        `notes` with the time it arrived."""
        conn = http.client.HTTPConnection(self.addr)
        headers = {"accept": "text/event-stream", "mcp-session-id": self.session, "mcp-protocol-version": "2025-11-25"}
        conn.request("GET", "/mcp", headers=headers)
        r = conn.getresponse()
        assert r.status == 200, r.status

        def read():
            for line in r:
                if line.startswith(b"data:") and b"resources/updated" in line:
                    notes.put(time.perf_counter())

        threading.Thread(target=read, daemon=True).start()


def main():
    work, plugins = work_with_plugins("subscribed-", ["files"])
    data = os.path.join(work, "data")
    server = BenchServer(BIN, plugins, data)
    server.wait_ready()
    try:
        c = Client(server.base)
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}
        c.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        c.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

        def write_call(i, text):
            args = {"path": "watched/a.txt", "content": text}
            c.post({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "files_write", "arguments": args}})

        write_call(1, "first")
        c.post({"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": URI}})
        notes = queue.Queue()
        c.listen(notes)
        time.sleep(0.5)
        workspaces = os.path.join(data, "workspaces")
        (path,) = [
            os.path.join(workspaces, d, "watched/a.txt")
            for d in os.listdir(workspaces)
            if os.path.exists(os.path.join(workspaces, d, "watched/a.txt"))
        ]

        def drain():
            while not notes.empty():
                notes.get()

        on_disk, after_call, calls = [], [], []
        for i in range(WRITES):
            drain()
            t0 = time.perf_counter()
            with open(path, "w") as f:
                f.write(f"disk {i}")
            on_disk.append((notes.get(timeout=10) - t0) * 1000)
            time.sleep(random.uniform(0.2, 0.45))
            drain()
            t0 = time.perf_counter()
            write_call(100 + i, f"call {i} " * (i + 1))
            answered = time.perf_counter()
            calls.append((answered - t0) * 1000)
            after_call.append((notes.get(timeout=10) - answered) * 1000)
            time.sleep(random.uniform(0.2, 0.45))
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)

    def row(name, ms):
        ms = sorted(ms)
        print(f"{name:44s} median {statistics.median(ms):7.2f} ms  p90 {ms[int(len(ms) * 0.9)]:7.2f} ms")

    row("written on disk -> notification", on_disk)
    row("files_write call (its own latency)", calls)
    row("files_write answered -> notification", after_call)


if __name__ == "__main__":
    main()
