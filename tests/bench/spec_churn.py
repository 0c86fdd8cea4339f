"""What a big OpenAPI toolkit costs in memory, and whether removing it gives
the memory back: a synthetic description shaped like GitHub's REST one
(OPS operations, long operationIds, shared component schemas, ~10 KB per
operation) is dropped into a running toolhost's plugins directory and removed
again, ROUNDS times; the server's RSS is read after each load and each
removal.

    python3 tests/bench/spec_churn.py [--ops 1200] [--rounds 10] [--bin target/release/toolhost]

Prints one line per round and a summary (RSS before, the largest, after the
last removal, and the per-tool cost while loaded). Loopback only, bounded:
stops by itself. No network beyond 127.0.0.1 (the spec is a local file).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def spec(ops: int) -> dict:
    """A description with `ops` operations over 40 shared schemas."""
    schemas = {}
    for i in range(40):
        schemas[f"Thing{i}"] = {
            "type": "object",
            "description": f"A thing of kind {i}. " * 8,
            "properties": {
                **{f"field_{j}": {"type": "string", "description": f"Field {j} of thing {i}. " * 3} for j in range(25)},
                "owner": {"$ref": f"#/components/schemas/Thing{(i + 1) % 40}"} if i % 3 else {"type": "string"},
            },
        }
    paths = {}
    for n in range(ops):
        area = ["actions", "repos", "orgs", "enterprise_admin", "code_scanning"][n % 5]
        path = f"/{area}/{{owner}}/{{repo}}/self-hosted-runners/groups/{n}/items"
        paths[path] = {
            "get": {
                "operationId": f"{area}/list-self-hosted-runners-in-group-for-org-with-labels-and-permissions-{n}",
                "summary": f"List things {n}",
                "description": "Lists the things of a group. " * 20,
                "tags": [area],
                "parameters": [
                    {"name": "owner", "in": "path", "required": True, "schema": {"type": "string"}},
                    {"name": "repo", "in": "path", "required": True, "schema": {"type": "string"}},
                    {"name": "per_page", "in": "query", "schema": {"type": "integer", "default": 30}},
                    {"name": "page", "in": "query", "schema": {"type": "integer", "default": 1}},
                ],
                "responses": {
                    "200": {
                        "description": "ok",
                        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/Thing{n % 40}"}}},
                    }
                },
            },
            "post": {
                "operationId": f"{area}/create-self-hosted-runner-in-group-for-org-with-labels-{n}",
                "requestBody": {
                    "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/Thing{(n + 7) % 40}"}}}
                },
                "responses": {"201": {"description": "created"}},
            },
        }
    return {
        "openapi": "3.0.3",
        "info": {"title": "churn", "version": "1"},
        "servers": [{"url": "http://127.0.0.1:9/"}],
        "paths": paths,
        "components": {"schemas": schemas},
    }


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.load(r)


def wait(what, timeout: float = 120.0):
    end = time.time() + timeout
    while time.time() < end:
        v = what()
        if v:
            return v
        time.sleep(0.1)
    raise SystemExit("timed out")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--ops", type=int, default=600, help="paths; each has 2 operations")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--bin", default="target/release/toolhost")
    args = p.parse_args()

    work = tempfile.mkdtemp(prefix="spec-churn-")
    plugins, data = os.path.join(work, "plugins"), os.path.join(work, "data")
    os.makedirs(plugins)
    text = json.dumps(spec(args.ops))
    spec_file = os.path.join(work, "churn.json")
    with open(spec_file, "w") as f:
        f.write(text)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [args.bin, "serve", "--bind", f"127.0.0.1:{port}", "--plugins", plugins, "--data", data],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait(lambda: _up(base))
        time.sleep(1)
        before = rss_mb(server.pid)
        print(f"spec: {len(text) / 1e6:.1f} MB, {2 * args.ops} operations; server RSS at start {before:.0f} MB")
        peak, loaded_rss, tools = before, [], 0
        for r in range(1, args.rounds + 1):
            folder = os.path.join(plugins, "churn")
            os.makedirs(folder)
            shutil.copy(spec_file, os.path.join(folder, "churn.json"))
            with open(os.path.join(folder, "churn.toml"), "w") as f:
                f.write('[api]\nspec = "churn.json"\nallow = ["127.0.0.1:9"]\n')
            plugin = wait(lambda: _plugin(base, "churn", ready=True))
            tools = len(plugin["tools"])
            up = rss_mb(server.pid)
            shutil.rmtree(folder)
            wait(lambda: _plugin(base, "churn", ready=False) is None)
            # The server gives freed memory back a second after a removal.
            time.sleep(2.5)
            down = rss_mb(server.pid)
            peak = max(peak, up)
            loaded_rss.append(up - down)
            print(f"round {r}: loaded {tools} tools, RSS {up:.0f} MB; removed, RSS {down:.0f} MB")
        after = rss_mb(server.pid)
        per_tool = sorted(loaded_rss)[len(loaded_rss) // 2] * 1024 / max(tools, 1)
        print(
            f"summary: start {before:.0f} MB, peak {peak:.0f} MB, after the last removal {after:.0f} MB "
            f"(+{after - before:.0f} MB kept); loaded costs {per_tool:.1f} KiB per tool (median of rounds)"
        )
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _up(base: str) -> bool:
    try:
        get(base + "/plugins")
        return True
    except OSError:
        return False


def _plugin(base: str, name: str, ready: bool):
    for p in get(base + "/plugins")["plugins"]:
        if p["name"] == name:
            if ready and p["state"] == "failed":
                raise SystemExit(f"failed: {p['error']}")
            return p if (not ready or p["state"] == "ready") else None
    return None


if __name__ == "__main__":
    sys.exit(main())
