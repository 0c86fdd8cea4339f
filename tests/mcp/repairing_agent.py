"""A coding agent repairing a degraded tool through toolhost's builder tools,
with the official MCP Python SDK (the venv of tests/mcp/requirements.txt):

    python repairing_agent.py --url http://127.0.0.1:PORT/admin/mcp --token TOKEN --toolkit NAME

It finds the open repair task of the toolkit (open_tasks), claims it, reads
the service's source from the task's context, writes the fixed file in a
build environment (VERSION 2, /break harmless), submits it with an example
(submit_fix), follows the task to its end and destroys the environment.
Prints one JSON object with what it saw; exits 1 on the first surprise.
Run by tests/e2e/tests/repair.rs.
"""

from __future__ import annotations

import argparse
import json
import sys

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

# The coding agent's helpers (its folder is on the path when run as a script).
from coding_agent import data, task_end


async def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--toolkit", required=True)
    args = p.parse_args()
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {args.token}"}, timeout=60)
    seen: dict = {}
    async with Client(streamable_http_client(args.url, http_client=http), mode="legacy") as c:
        tasks = data(await c.call_tool("open_tasks", {}))["tasks"]
        repair = next((t for t in tasks if t["type"] == "repair_tool" and t["spec"]["name"] == args.toolkit), None)
        if repair is None:
            raise SystemExit(f"FAILED: no open repair of {args.toolkit}: {tasks}")
        seen["repair"] = repair
        claimed = data(await c.call_tool("claim_task", {"task_id": repair["task_id"], "builder": "repairing-agent"}))
        seen["claimed"] = {"status": claimed["status"], "claimed_by": claimed["claimed_by"]}
        source = repair["context"]["files"][f"{args.toolkit}.py"]
        fixed = source.replace("VERSION = 1", "VERSION = 2").replace("BREAKS = True", "BREAKS = False")
        if fixed == source:
            raise SystemExit("FAILED: the context's source is not the service's")
        env = data(await c.call_tool("create_env", {"memory_mb": 256, "cpus": 0.25}))["env_id"]
        data(await c.call_tool("write_file", {"env_id": env, "path": f"{args.toolkit}.py", "content": fixed}))
        checked = data(await c.call_tool("run", {"env_id": env, "command": f"python3 -m py_compile {args.toolkit}.py && echo compiled"}))
        seen["compiled"] = "compiled" in checked["stdout"]
        submitted = data(await c.call_tool("submit_fix", {
            "task_id": repair["task_id"], "env_id": env, "paths": [f"{args.toolkit}.py"],
            "examples": [{"tool": "echo", "input": {"text": "after the fix"}}],
        }))
        seen["submitted"] = submitted
        seen["task"] = await task_end(c, repair["task_id"])
        data(await c.call_tool("destroy_env", {"env_id": env}))
    print(json.dumps(seen))
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
