"""Whether a call's and a lookup's cost stay flat as the catalog grows: a
release server with calc and an OpenAPI toolkit of 10, 1,000 and 10,000
tools (spec_churn.py's GitHub-shaped description, a local file), timing
sequentially over one kept-alive connection: a calc invoke, a tool's schema
(`GET /tools/{id}/schema`), its description (`GET /tools/{id}`), and the
whole list (`GET /tools`, native and as OpenAI and MCP definitions, which
grows with the tools by nature: shown per tool too). Medians of ROUNDS
requests each (fewer for the lists of many tools). TOOLHOST_BIN picks the
server binary (a before/after pair: run it twice).

    cargo build --release -p toolhost && make plugins
    python3 tests/bench/scale_tools.py
"""

import http.client
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("TOOLHOST_BIN", os.path.join(ROOT, "target/release/toolhost"))
sys.path.insert(0, os.path.join(ROOT, "tests/bench"))
from benchserver import BenchServer  # noqa: E402
from spec_churn import spec  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "300"))


def measure(tools):
    work = tempfile.mkdtemp(prefix="scale-tools-")
    plugins = os.path.join(work, "plugins")
    folder = os.path.join(plugins, "churn")
    os.makedirs(folder)
    for f in ("calc.wasm", "calc.toml"):
        shutil.copy(os.path.join(ROOT, "target/plugins", f), plugins)
    with open(os.path.join(folder, "churn.json"), "w") as f:
        json.dump(spec(max(tools // 2, 1)), f)
    with open(os.path.join(folder, "churn.toml"), "w") as f:
        f.write('[api]\nspec = "churn.json"\nallow = ["127.0.0.1:9"]\n')
    server = BenchServer(BIN, plugins, os.path.join(work, "data"))
    try:
        server.wait_ready()
        host, port = server.base.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port))

        def req(method, path, body=None):
            headers = {"content-type": "application/json"} if body else {}
            conn.request(method, path, body=body, headers=headers)
            r = conn.getresponse()
            data = r.read()
            assert r.status == 200, (path, r.status, data[:200])
            return data

        listed = json.loads(req("GET", "/tools"))["tools"]
        churn = sorted(t["tool_id"] for t in listed if t["tool_id"].startswith("churn_"))
        one = churn[len(churn) // 2]
        invoke = json.dumps({"params": {"expression": "6*7"}})
        mcp_headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "bench", "version": "0"}}}
        conn.request("POST", "/mcp", body=json.dumps(init), headers=mcp_headers)
        r = conn.getresponse()
        r.read()
        mcp_headers |= {"mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        conn.request("POST", "/mcp", body=json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                     headers=mcp_headers)
        conn.getresponse().read()

        def mcp_list():
            conn.request("POST", "/mcp", body=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
                         headers=mcp_headers)
            r = conn.getresponse()
            data = r.read()
            assert r.status == 200 and b'"tools"' in data, (r.status, data[:200])
            return data

        cases = {
            "calc invoke": lambda: req("POST", "/tools/calc_evaluate/invoke", invoke),
            "GET /tools/{id}/schema": lambda: req("GET", f"/tools/{one}/schema"),
            "GET /tools/{id}": lambda: req("GET", f"/tools/{one}"),
            "GET /tools": lambda: req("GET", "/tools"),
            "GET /tools?format=openai": lambda: req("GET", "/tools?format=openai"),
            "GET /tools?format=mcp": lambda: req("GET", "/tools?format=mcp"),
            "MCP tools/list": mcp_list,
        }
        out, sizes = {}, {}
        for name, call in cases.items():
            listing = name.startswith("GET /tools?") or name in ("GET /tools", "MCP tools/list")
            rounds = max(ROUNDS // max(tools // 100, 1), 5) if listing else ROUNDS
            for _ in range(10):
                sizes[name] = len(call())
            ms = []
            for _ in range(rounds):
                t0 = time.perf_counter()
                call()
                ms.append((time.perf_counter() - t0) * 1000)
            out[name] = (statistics.median(ms), sizes[name])
        return len(listed), out
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def main():
    rows = [(n, *measure(n)) for n in (10, 1000, 10000)]
    for n, listed, out in rows:
        print(f"-- {listed} tools")
        for name, (ms, size) in out.items():
            whole = name.startswith("GET /tools") and "{id}" not in name or name == "MCP tools/list"
            per = f"  ({ms * 1000 / listed:.2f} us per tool, {size / 1e6:.2f} MB)" if whole else ""
            print(f"   {name:28s} {ms:9.3f} ms{per}")


if __name__ == "__main__":
    main()
